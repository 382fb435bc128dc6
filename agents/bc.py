"""Behaviour-cloning warm start: imitate a heuristic before PPO.

PPO from a random policy spends most of a small budget learning what every
heuristic already does (place the queue head, pack tightly, do not idle).
Here the set policy is first trained by supervised learning on the decisions
of a heuristic (``BCConfig.teacher``, e.g. Gandiva) taken in the very env the
agent trains in, on the training parts of the traces only:

1. ``collect``: the teacher acts through ``SetClusterEnv`` (``env.view``);
   its engine action is mapped to the env's discrete action
   (``ClusterEnv.action_index``). A teacher action the env cannot express
   (its job outside the K rows, a second preemption beyond the budget) is not
   a label: the env then takes WAIT (or the first valid action) and the
   sample is dropped.
2. ``pretrain``: the policy's masked logits are fitted to the teacher's
   actions (cross-entropy) and its value head to the teacher's normalised
   discounted returns, so that PPO's first advantages are not noise that
   would undo the imitation.

The result is the "BC only" model; MaskablePPO then fine-tunes it ("BC +
PPO"). Model selection stays on the validation traces (``train.train``).

Several teachers (``teacher = "gandiva,tiresias"``): no single heuristic is
best everywhere (Gandiva on the seed's traces, Tiresias on Pollux's), so
each collected episode is labelled by the teacher with the lowest mean JCT
*on that training window* (each candidate is simulated on the window first,
``best_teacher``). Only training data is used to choose.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ddl_gym.agents.config import BCConfig, EnvConfig

from ddl_gym.traces import Trace


@dataclass
class Demonstrations:
    """Teacher decisions: observations, masks, actions, value targets."""

    obs: np.ndarray  # (N, obs_size) float32
    masks: np.ndarray  # (N, n_actions) bool
    actions: np.ndarray  # (N,) int64
    returns: np.ndarray  # (N,) float32, discounted return-to-go / its std
    stats: dict[str, float] = field(default_factory=dict)


def _episode_returns(rewards: list[float], gamma: float) -> np.ndarray:
    out = np.zeros(len(rewards), dtype=np.float64)
    acc = 0.0
    for i in range(len(rewards) - 1, -1, -1):
        acc = rewards[i] + gamma * acc
        out[i] = acc
    return out


def teachers(spec: str) -> list[str]:
    """``"gandiva"`` -> ``["gandiva"]``; ``"gandiva,tiresias"`` -> both."""
    names = [t.strip() for t in spec.split(",") if t.strip()]
    if not names:
        raise ValueError(f"bc.teacher {spec!r} names no policy")
    return names


def best_teacher(names: Sequence[str], engine, env_cfg: EnvConfig) -> tuple[str, dict[str, float]]:
    """The teacher of ``names`` with the lowest mean JCT on ``engine``'s
    window (the episode about to be collected), simulated under the env's
    congestion, ticks and restore cost (the settings the teacher then acts
    under in the env); returns it and every candidate's mean JCT (s)."""
    import warnings

    from ddl_gym.baselines import make_policy

    from ddl_gym.engine import simulate

    if len(names) == 1:
        return names[0], {}
    jct: dict[str, float] = {}
    for name in names:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the env's settings override the teacher's
            res = simulate(
                engine.trace,
                engine.cluster,
                make_policy(name),
                congestion=env_cfg.congestion,
                tick_s=env_cfg.tick_s,
                restore_s_per_gpu=env_cfg.restore_s_per_gpu,
            )
        jct[name] = float(res.summary["mean_jct_s"])
    return min(names, key=lambda n: (jct[n], names.index(n))), jct


def collect(
    env_cfg: EnvConfig,
    traces: Sequence[Trace],
    bc: BCConfig,
    gamma: float,
    seed: int,
) -> Demonstrations:
    """Run ``bc.teacher`` on training windows until ``bc.samples`` labelled
    decisions are gathered (at most ``bc.max_episode_steps`` per episode)."""
    from ddl_gym.agents.envs import MixedWindowEnv
    from ddl_gym.baselines import make_policy

    windows = env_cfg.windows_h or [(env_cfg.window_s or 0.0) / 3600.0]
    env = MixedWindowEnv(env_cfg, traces, windows)
    obs_l: list[Any] = []  # the env's observations, stacked at the end
    mask_l: list[np.ndarray] = []
    act_l: list[int] = []
    ret_l: list[np.ndarray] = []
    dropped = steps = episodes = 0
    rng_seed = seed
    names = teachers(bc.teacher)
    chosen = {n: 0 for n in names}
    while len(act_l) < bc.samples:
        obs, _ = env.reset(seed=rng_seed if episodes == 0 else None)
        base = env.current
        name, _ = best_teacher(names, base.engine, env_cfg)
        chosen[name] += 1
        teacher = make_policy(name)
        teacher.reset(base.view, seed=seed + episodes)
        rewards: list[float] = []
        labelled: list[int] = []  # step index of each labelled sample
        for t in range(bc.max_episode_steps):
            mask = base.action_masks()
            try:
                a = base.action_index(teacher.act(base.view))
            except ValueError:
                a = -1
            if 0 <= a < len(mask) and mask[a]:
                obs_l.append(obs)
                mask_l.append(mask)
                act_l.append(a)
                labelled.append(t)
            else:
                dropped += 1
                a = 0 if mask[0] else int(np.flatnonzero(mask)[0])
            obs, r, term, trunc, _ = env.step(a)
            rewards.append(float(r))
            steps += 1
            if term or trunc or len(act_l) >= bc.samples:
                break
        ret_l.append(_episode_returns(rewards, gamma)[labelled])
        episodes += 1
    returns = np.concatenate(ret_l)
    scale = float(returns.std()) or 1.0
    return Demonstrations(
        obs=np.asarray(obs_l, dtype=np.float32),
        masks=np.asarray(mask_l, dtype=bool),
        actions=np.asarray(act_l, dtype=np.int64),
        returns=(returns / scale).astype(np.float32),
        stats={
            "episodes": episodes,
            "env_steps": steps,
            "samples": len(act_l),
            "dropped": dropped,
            "return_scale": scale,
            "wait_share": float(np.mean(np.asarray(act_l) == 0)) if act_l else 0.0,
        }
        | ({f"episodes_{n}": float(c) for n, c in chosen.items()} if len(names) > 1 else {}),
    )


def from_minari(dataset_ids: Sequence[str], gamma: float) -> Demonstrations:
    """Teacher decisions read from Minari datasets (``ddl-gym datasets build``:
    a heuristic's episodes in the ``ClusterEnv``, action masks in ``infos``)
    instead of collected by running the teacher: every step of every episode,
    observations flattened as ``FlattenClusterObs`` does, value targets the
    discounted returns scaled as ``collect`` scales them."""
    import minari
    from ddl_gym.agents.envs import flatten_obs

    obs_l: list[np.ndarray] = []
    mask_l: list[np.ndarray] = []
    act_l: list[np.ndarray] = []
    ret_l: list[np.ndarray] = []
    episodes = 0
    for ident in dataset_ids:
        data = minari.load_dataset(ident)
        for ep in data.iterate_episodes():
            steps = len(ep.actions)
            if "action_mask" not in ep.infos:
                raise ValueError(f"Minari dataset {ident}: episode {ep.id} has no action masks")
            obs = ep.observations
            keys = sorted(obs) if isinstance(obs, dict) else None
            for t in range(steps):
                row = {k: obs[k][t] for k in keys} if keys is not None else obs[t]
                obs_l.append(flatten_obs(row))
            mask_l.append(np.asarray(ep.infos["action_mask"][:steps], dtype=bool))
            act_l.append(np.asarray(ep.actions, dtype=np.int64).reshape(steps))
            ret_l.append(_episode_returns([float(r) for r in ep.rewards], gamma))
            episodes += 1
    if not obs_l:
        raise ValueError(f"no steps in the Minari datasets {list(dataset_ids)}")
    returns = np.concatenate(ret_l)
    scale = float(returns.std()) or 1.0
    actions = np.concatenate(act_l)
    return Demonstrations(
        obs=np.asarray(obs_l, dtype=np.float32),
        masks=np.concatenate(mask_l),
        actions=actions,
        returns=(returns / scale).astype(np.float32),
        stats={
            "episodes": episodes,
            "samples": len(actions),
            "return_scale": scale,
            "wait_share": float(np.mean(actions == 0)),
        },
    )


def pretrain(policy, demos: Demonstrations, bc: BCConfig, seed: int) -> dict[str, float]:
    """Fit ``policy`` (a ``MaskableActorCriticPolicy``) to ``demos``; returns
    the final epoch's loss and the accuracy of its greedy action."""
    import torch as th

    gen = th.Generator().manual_seed(seed)
    obs = th.as_tensor(demos.obs)
    masks = th.as_tensor(demos.masks)
    acts = th.as_tensor(demos.actions)
    rets = th.as_tensor(demos.returns)
    n = len(acts)
    opt = th.optim.Adam(policy.parameters(), lr=bc.learning_rate)
    policy.set_training_mode(True)
    stats: dict[str, float] = {}
    for epoch in range(bc.epochs):
        order = th.randperm(n, generator=gen)
        tot_nll = tot_v = correct = 0.0
        for i in range(0, n, bc.batch_size):
            idx = order[i : i + bc.batch_size]
            values, log_prob, _ = policy.evaluate_actions(
                obs[idx], acts[idx], action_masks=masks[idx]
            )
            nll = -log_prob.mean()
            v_loss = th.nn.functional.mse_loss(values.flatten(), rets[idx])
            loss = nll + bc.value_coef * v_loss
            opt.zero_grad()
            loss.backward()
            th.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
            opt.step()
            with th.no_grad():
                dist = policy.get_distribution(obs[idx], action_masks=masks[idx].numpy())
                greedy = dist.distribution.probs.argmax(dim=-1)
            correct += float((greedy == acts[idx]).sum())
            tot_nll += float(nll.detach()) * len(idx)
            tot_v += float(v_loss.detach()) * len(idx)
        stats = {
            "epoch": epoch + 1,
            "nll": tot_nll / n,
            "value_mse": tot_v / n,
            "accuracy": correct / n,
        }
        print(
            f"bc epoch {epoch + 1}/{bc.epochs}: nll {stats['nll']:.3f}, "
            f"accuracy {stats['accuracy']:.3f}, value mse {stats['value_mse']:.3f}",
            flush=True,
        )
    policy.set_training_mode(False)
    return stats
