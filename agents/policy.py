"""A trained model as a scheduler with the baselines' protocol.

``load_policy(path)`` returns an ``AgentPolicy`` (``reset(view, seed)``,
``act(view)``, ``engine_kwargs()``), so a model runs in
``ddl_gym.engine.simulate()`` beside the heuristics. At each decision point it
rebuilds the observation the env would show (same ``ObsBuilder``, same
windows, same mask), skips the instants the env skips (only WAIT possible)
and returns only valid actions.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from ddl_gym.agents.config import TrainConfig
from ddl_gym.agents.envs import agent_mask, flatten_obs, slowdown_guard
from ddl_gym.agents.shield import RepackWhenIdle, cross_rack_mask, quantum_mask

from ddl_gym.engine import WAIT, Action, EngineView, Place, Preempt
from ddl_gym.env.observation import LEVELS, ObsBuilder, ObsConfig
from ddl_gym.env.set_observation import SetObsBuilder, SetObsConfig

DEFAULT_MODEL = Path(__file__).resolve().parent / "models" / "default.zip"


def config_path(model_path: str | Path) -> Path:
    """The training config saved beside a model, in the model's own folder
    only: ``<stem>.json``, ``<stem>.toml``, else ``config.json`` (what
    ``ddl-gym train`` writes beside ``best/best_model.zip``). A folder above
    is never read: a ``config.json`` there may belong to anything."""
    p = Path(model_path)
    candidates = (p.with_suffix(".json"), p.with_suffix(".toml"), p.parent / "config.json")
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    from ddl_gym.model_env import ENV_SUFFIX, env_file

    looked = ", ".join(c.name for c in (env_file(p), *candidates))
    up = p.parent.parent / "config.json"
    hint = (
        f"; {up} (one folder up) is not read: copy it beside the model if it is this model's"
        if up.is_file() and p.parent.resolve() != up.parent.resolve()
        else ""
    )
    raise FileNotFoundError(
        f"no settings for model {p} in {p.parent} (looked for {looked}){hint}: save your "
        "model with ddl_gym.agents.save_model(model, path, env_id, env_kwargs), or give the "
        'env it was trained on: load_policy(path, env_kwargs={...}, env_id="ddl_gym/Cluster-v0")'
        f" (ddl-gym: --agent-env, which keeps it in {p.stem}{ENV_SUFFIX})"
    )


def settings_path(model_path: str | Path) -> Path:
    """The file ``load_policy(model_path)`` reads the model's settings from:
    ``<stem>.env.json`` (``save_model``), else its training config
    (:func:`config_path`); FileNotFoundError, saying what was looked for,
    when neither is there."""
    from ddl_gym.model_env import env_file

    saved = env_file(model_path)
    return saved if saved.is_file() else config_path(model_path)


def load_model(path: str | Path, algo: str, policy: str = "mlp") -> Any:
    if algo == "maskable_ppo":
        from sb3_contrib import MaskablePPO

        custom: dict[str, Any] = {}
        if policy == "set":
            # the class by its current import path, whatever path it was saved under
            from ddl_gym.agents.set_policy import SetPolicy

            custom["policy_class"] = SetPolicy
        return MaskablePPO.load(str(path), device="cpu", custom_objects=custom)
    if algo == "ppo":
        from stable_baselines3 import PPO

        return PPO.load(str(path), device="cpu")
    raise ValueError(f"unknown algo {algo!r}")


def masked_logits(model: Any, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The model's action logits for one flat observation; -inf where masked."""
    policy = model.policy
    with th.no_grad():
        x = th.as_tensor(obs, dtype=th.float32).unsqueeze(0)
        features = policy.extract_features(x, policy.pi_features_extractor)
        logits = policy.action_net(policy.mlp_extractor.forward_actor(features))[0].numpy()
    return np.where(mask, logits, -np.inf)


def action_probabilities(logits: np.ndarray) -> np.ndarray:
    """Softmax of masked logits (0 where -inf)."""
    p = np.exp(logits - logits.max())
    return p / p.sum()


class AgentPolicy:
    """A trained actor-critic acting on an engine view.

    ``deterministic``: the most likely valid action (default); otherwise a
    sample from the masked distribution, seeded by ``reset(seed=...)``.
    """

    def __init__(
        self, model: Any, config: TrainConfig, name: str = "agent", deterministic: bool = True
    ) -> None:
        self.model = model
        self.config = config
        self.name = name
        self.deterministic = deterministic
        env = config.env
        self._set = env.obs == "set"
        self._set_cfg = SetObsConfig(
            K=env.K, M=env.M, clairvoyant=False, preempt_budget=env.preempt_budget
        )
        self._obs_cfg = ObsConfig(
            K=env.K,
            M=env.M,
            time_scale_s=env.time_scale_s,
            horizon_s=86400.0,  # ClusterEnv's horizon without max_time_s (never set in training)
            clairvoyant=False,
            queue_order=env.queue_order,
        )
        self._builder: ObsBuilder | SetObsBuilder | None = None
        self._rng = np.random.default_rng(0)
        self._repack = RepackWhenIdle() if getattr(env, "repack_idle", False) else None

    def fresh(self) -> AgentPolicy:
        """A new policy on the same model(s) and settings (its own state)."""
        return AgentPolicy(self.model, self.config, self.name, self.deterministic)

    def engine_kwargs(self) -> dict[str, Any]:
        """Engine settings the agent was trained under (congestion is the scenario's)."""
        env = self.config.env
        return {
            "lease_s": env.lease_s,
            "tick_s": env.tick_s,
            "restore_s_per_gpu": env.restore_s_per_gpu,
        }

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        self._builder = self._new_builder(view)
        self._rng = np.random.default_rng(seed)
        if self._repack is not None:
            self._repack.reset()

    def _new_builder(self, view: EngineView) -> ObsBuilder | SetObsBuilder:
        # The observation needs the engine itself (ObsBuilder reads its
        # internals, as ClusterEnv does); EngineView has no public accessor,
        # so the agent reaches behind the view here and only reads.
        if self._set:
            return SetObsBuilder(view._engine, self._set_cfg)  # noqa: SLF001
        return ObsBuilder(view._engine, self._obs_cfg)  # noqa: SLF001

    def act(self, view: EngineView) -> Action:
        builder = self._builder
        if builder is None or builder.engine is not view._engine:  # noqa: SLF001
            builder = self._builder = self._new_builder(view)
        builder.update()
        if self._repack is not None:
            forced = self._repack.action(view)
            if forced is not None:
                return forced
        env = self.config.env
        mask = builder.mask if self._set else agent_mask(builder.mask, env.K, env.preempt)
        if not mask[1:].any():  # the env skips these instants: no choice
            return WAIT
        obs = flatten_obs(builder.obs)
        max_slowdown = getattr(env, "max_slowdown", None)
        if self._set and max_slowdown is not None:
            mask = slowdown_guard(mask, obs, env.K, env.M, max_slowdown)
        cross_rack_guard = getattr(env, "cross_rack_guard", None)
        if self._set and cross_rack_guard is not None:
            mask = cross_rack_mask(mask, obs, env.K, env.M, cross_rack_guard)
        min_run_s = getattr(env, "min_run_s", None)
        if self._set and min_run_s is not None:
            mask = quantum_mask(mask, builder.win_running, 1 + 3 * env.K, view.now, min_run_s)
        a = self.choose(obs, mask)
        if not mask[a]:  # cannot happen with masked logits; stay valid anyway
            a = 0 if mask[0] else int(np.flatnonzero(mask)[0])
        return self._decode(builder, a)

    def choose(self, obs: np.ndarray, mask: np.ndarray) -> int:
        """Masked argmax (or sample) of the policy's action logits."""
        logits = masked_logits(self.model, obs, mask)
        if self.deterministic:
            return int(np.argmax(logits))
        p = action_probabilities(logits)
        return int(self._rng.choice(len(p), p=p))

    def _decode(self, builder: ObsBuilder | SetObsBuilder, a: int) -> Action:
        K = self.config.env.K
        if a == 0:
            return WAIT
        if a <= 3 * K:
            k, level = divmod(a - 1, 3)
            return Place(builder.win_pending[k].index, LEVELS[level])
        return Preempt(builder.win_running[a - 1 - 3 * K].index)


def load_policy(
    path: str | Path = DEFAULT_MODEL,
    deterministic: bool = True,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    env_id: str | None = None,
) -> Any:
    """A saved model (``.zip``) as a ``Policy`` for ``simulate()``.

    * A model saved by ``ddl_gym.agents.save_model`` (its env in
      ``<stem>.env.json`` beside it) or trained by ``ddl_gym.agents.train``
      (config saved beside it): ``load_policy(path)``.
    * Your own SB3 / sb3-contrib model (``MaskablePPO`` or ``PPO``, on the
      env's ``Dict`` observation or a flattened one): give the env it was
      trained on, ``load_policy("my_model.zip", env_kwargs={...},
      env_id="ddl_gym/Cluster-v0")`` (either may be omitted: the default id is
      ``ddl_gym/Cluster-v0``, the default kwargs its registered ones). See
      ``ddl_gym.agents.external``.
    """
    from ddl_gym.agents.external import load_sb3
    from ddl_gym.agents.threads import one_thread

    from ddl_gym.model_env import find_model_env, model_env

    one_thread()
    path = Path(path)
    if not path.is_file() and path.with_suffix(".zip").is_file():
        path = path.with_suffix(".zip")  # SB3 saves "name" as name.zip
    if not path.is_file():
        raise FileNotFoundError(f"no model file {path}")
    if env_kwargs is not None or env_id is not None:
        given = model_env(env_id, env_kwargs, trained_on=())  # names the bad field first
        return load_sb3(path, given.env_kwargs, given.env_id, deterministic=deterministic)
    saved = find_model_env(path)  # save_model's <stem>.env.json (checked as it is read)
    if saved is not None:
        agent = load_sb3(path, saved.env_kwargs, saved.env_id, deterministic=deterministic)
        agent.name = f"agent:{path.stem}"
        return agent
    config = TrainConfig.load(config_path(path))
    model = load_model(path, config.ppo.algo, config.ppo.policy)
    return AgentPolicy(model, config, name=f"agent:{path.stem}", deterministic=deterministic)


def training_specs(path: str | Path = DEFAULT_MODEL) -> list[str]:
    """The trace specs a saved model learned from (``SplitConfig.traces``
    form: ``default:0-9``, trace files): its ``<stem>.env.json``'s
    ``trained_on``, else its training config's ``split.traces``."""
    from ddl_gym.model_env import find_model_env

    saved = find_model_env(path)
    if saved is not None:
        return list(saved.trained_on)
    return list(TrainConfig.load(config_path(path)).split.traces)


def training_jobs(path: str | Path = DEFAULT_MODEL) -> list[Any]:
    """The traces a saved model was trained on, cut to the part it trained
    on (a ``ddl_gym.agents.train`` config's ``split.train``); specs whose
    file is not here (no data dir) are left out."""
    from ddl_gym.agents.envs import resolve_traces, time_part

    from ddl_gym.model_env import env_file, find_model_env

    specs = training_specs(path)
    saved = find_model_env(path)
    config = env_file(path) if saved is not None else config_path(path)
    part = (0.0, 1.0) if saved is not None else TrainConfig.load(config).split.train
    out = []
    for spec in specs:
        try:
            traces = resolve_traces([_beside(spec, config.parent)])
        except FileNotFoundError:
            continue
        out.extend(time_part(t, *part) for t in traces)
    return out


def _beside(spec: str, folder: Path) -> str:
    """A relative trace file of a training config, found from another working
    directory: relative to the folder of the config or one above it (``ddl-gym
    train`` writes ``<out>/traces/*.csv`` relative to where it ran)."""
    p = Path(spec)
    if p.is_absolute() or p.is_file() or ":" in spec:
        return spec
    for base in (folder, *folder.resolve().parents):
        if (base / p).is_file():
            return str(base / p)
    return spec
