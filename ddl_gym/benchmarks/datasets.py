"""Offline datasets: every heuristic's episodes on a suite split, as Minari datasets.

    ddl-gym benchmark datasets --suite ddl-gym-v1 --split train --root runs/minari
    MINARI_DATASETS_PATH=runs/minari python -c "import minari;
        d = minari.load_dataset('ddl-gym-v1-train/pollux-1_pcie128/gandiva-v0')"

One dataset per (case, heuristic), one episode per seed of the case, in the
Gymnasium env (``ddl_gym.env.ClusterEnv``) on the case's workload, cluster
and congestion, with the heuristic's own engine settings (Dally's leases,
Gandiva's free migration). The heuristic acts on the env's view of the
engine (``env.view``) and its action is recorded as the env's discrete
action (``action_index``), so an offline learner sees the observations,
actions and rewards an online agent would.

An action the env cannot express (a job past the first ``K`` pending ones,
or a running job past the first ``M``) ends that episode there, truncated:
what follows would not be the heuristic's. The summary counts such episodes
per dataset; larger windows (``K``, ``M``) make them longer (a Tiresias or
Dally queue of more than ``K`` waiting jobs is where it happens). Needs
``minari`` and ``pyarrow`` (the ``datasets`` extra); datasets go to ``root``
(``MINARI_DATASETS_PATH``), in Minari's Arrow format.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ddl_gym.baselines import HEURISTICS
from ddl_gym.benchmarks.policies import resolve_policy
from ddl_gym.benchmarks.suite import Case, get_suite

if TYPE_CHECKING:
    from ddl_gym.env import ClusterEnv

ENV_ENGINE_KEYS = ("lease_s", "lazy_leases", "tick_s", "restore_s_per_gpu")
DEFAULT_K = 32
DEFAULT_M = 32


@dataclass(frozen=True)
class DatasetSummary:
    dataset_id: str
    episodes: int
    steps: int
    dropped: int  # episodes whose first action lay outside the env's windows
    cut: int = 0  # episodes truncated where the policy left the windows


def dataset_id(suite: str, split: str, case: Case, policy: str) -> str:
    """``<suite>-<split>/<case>/<policy>-v0`` with Minari's allowed characters."""

    def clean(text: str) -> str:
        return re.sub(r"[^-\w]+", "_", text)

    return f"{clean(suite)}-{clean(split)}/{clean(case.name)}/{clean(policy)}-v0"


def case_env(case: Case, seed: int, policy: Any, K: int, M: int) -> ClusterEnv:
    """The env of ``case`` (workload seed ``seed``) with ``policy``'s engine settings."""
    from ddl_gym.env import ClusterEnv

    wanted = getattr(policy, "engine_kwargs", dict)()
    engine = {k: v for k, v in wanted.items() if k in ENV_ENGINE_KEYS}
    return ClusterEnv(
        trace=case.workload.build(seed),
        cluster=case.cluster(),
        congestion=case.congestion,
        K=K,
        M=M,
        **engine,
    )


def record_episode(env: Any, policy: Any, seed: int, episode_id: int) -> Any | None:
    """Run ``policy`` through ``env``; the episode as a Minari
    ``EpisodeBuffer`` (observations, actions, rewards, terminations,
    truncations, and the action mask of each observation in ``infos``), or
    None when the policy took an action the env cannot express. Built here
    rather than with Minari's ``DataCollector``, which needs jax to append
    steps."""
    from minari.data_collector import EpisodeBuffer

    obs, info = env.reset(seed=seed)
    policy.reset(env.view, seed=seed)
    observations: dict[str, list[np.ndarray]] = {k: [v] for k, v in obs.items()}
    # the valid actions at each observation (Minari keeps infos beside them)
    masks: list[np.ndarray] = [info["action_mask"]]
    actions: list[int] = []
    rewards: list[float] = []
    terminations: list[bool] = []
    truncations: list[bool] = []
    while True:
        try:
            action = env.action_index(policy.act(env.view))
        except ValueError:
            # outside the windows: what follows would not be the heuristic's
            # episode, so it ends here, truncated (None if nothing was recorded)
            if not actions:
                return None
            truncations[-1] = True
            return _buffer(EpisodeBuffer, episode_id, seed, observations, actions, rewards,
                           terminations, truncations, masks)  # fmt: skip
        obs, reward, terminated, truncated, info = env.step(action)
        if "invalid" in info:
            raise RuntimeError(f"{policy.name} chose an invalid action: {info['invalid']}")
        for key, value in obs.items():
            observations[key].append(value)
        masks.append(info["action_mask"])
        actions.append(int(action))
        rewards.append(float(reward))
        terminations.append(bool(terminated))
        truncations.append(bool(truncated))
        if terminated or truncated:
            return _buffer(EpisodeBuffer, episode_id, seed, observations, actions, rewards,
                           terminations, truncations, masks)  # fmt: skip


def _buffer(cls: Any, episode_id: int, seed: int, observations: dict, actions: list,
            rewards: list, terminations: list, truncations: list, masks: list) -> Any:  # fmt: skip
    # an episode cut short keeps one observation (and mask) more than actions
    keep = len(actions) + 1
    return cls(
        id=episode_id,
        seed=seed,
        observations={k: v[:keep] for k, v in observations.items()},
        actions=actions,
        rewards=rewards,
        terminations=terminations,
        truncations=truncations,
        infos={"action_mask": masks[:keep]},
    )


def build_datasets(
    suite: str = "ddl-gym-v1",
    split: str = "train",
    policies: Sequence[str] = HEURISTICS,
    root: str | Path | None = None,
    quick: bool = False,
    cases: Sequence[str] | None = None,
    K: int = DEFAULT_K,
    M: int = DEFAULT_M,
    progress: bool = True,
) -> list[DatasetSummary]:
    """Record every policy's episodes on every case of the split (or of the
    quick sub-suite) as Minari datasets under ``root``."""
    import minari

    if root is not None:
        os.environ["MINARI_DATASETS_PATH"] = str(Path(root).resolve())
    chosen = get_suite(suite).select(split, quick=quick)
    if cases is not None:
        chosen = tuple(c for c in chosen if c.name in set(cases))
    out: list[DatasetSummary] = []
    for case in chosen:
        for name in policies:
            spec = resolve_policy(name)
            buffers, dropped, cut, env = [], 0, 0, None
            for seed in case.seeds:
                policy = spec.factory()
                env = case_env(case, seed, policy, K, M)
                episode = record_episode(env, policy, seed, len(buffers))
                if episode is None:
                    dropped += 1
                else:
                    buffers.append(episode)
                    engine = env.engine  # set by the episode's reset
                    cut += int(engine is not None and not engine.done)
            ident = dataset_id(suite, "quick" if quick else split, case, spec.name)
            if buffers and env is not None:
                with warnings.catch_warnings():
                    # Minari warns of what is expected here: no author e-mail, no env
                    # spec (the env is built directly), no separate evaluation env
                    warnings.filterwarnings("ignore", category=UserWarning, module="minari")
                    _create(minari, ident, buffers, env, spec.name, case, suite, K, M)
            steps = sum(len(b.rewards) for b in buffers)
            out.append(DatasetSummary(ident, len(buffers), steps, dropped, cut))
            if progress:
                print(
                    f"{ident}: {len(buffers)} episodes ({cut} cut short), {steps} steps, "
                    f"{dropped} dropped"
                )
    return out


def _create(minari: Any, ident: str, buffers: list, env: Any, policy: str, case: Case,
            suite: str, K: int, M: int) -> None:  # fmt: skip
    minari.create_dataset_from_buffers(
        dataset_id=ident,
        buffer=buffers,
        observation_space=env.observation_space,
        action_space=env.action_space,
        algorithm_name=policy,
        author="ddl-gym",
        description=f"{policy} on {suite} case {case.name} (seeds "
        f"{', '.join(map(str, case.seeds))}); ClusterEnv K={K}, M={M}",
        data_format="arrow",
    )
