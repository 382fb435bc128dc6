"""Any model that acts on ``ClusterEnv`` observations, as a ``simulate()`` policy.

A user's own model (SB3 ``MaskablePPO`` / ``PPO`` trained on
``gymnasium.make("ddl_gym/...", **env_kwargs)``, an RLlib module, a plain
function) knows nothing of the engine: it maps the env's observation (and
action mask) to a discrete action. :class:`EnvModelPolicy` rebuilds, at each
decision point of ``simulate()``, exactly the observation and mask the env
would show (the same ``ObsBuilder`` with the env's windows and scales),
skips the instants the env skips (only WAIT possible), asks the model, and
turns the index into the engine action (the env's ``ActionCodec``). So a
model is evaluated in ``simulate()`` beside the heuristics, on any trace, on
the cluster shape it was trained on.

``load_sb3(path, env_kwargs, env_id)`` loads an SB3 zip this way
(``ddl_gym.agents.load_policy(path, env_kwargs=...)`` calls it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ddl_gym.engine import WAIT, Action, EngineView

Predict = Callable[[dict[str, np.ndarray], np.ndarray], int]
DEFAULT_ENV_ID = "ddl_gym/Cluster-v0"


def env_arguments(env_kwargs: Mapping[str, Any] | None, env_id: str | None) -> dict[str, Any]:
    """The ``ClusterEnv`` arguments of ``gymnasium.make(env_id, **env_kwargs)``:
    the registered variant's defaults overridden by ``env_kwargs``."""
    from ddl_gym import ENV_VARIANTS

    env_id = env_id or DEFAULT_ENV_ID
    if env_id not in ENV_VARIANTS:
        raise ValueError(f"unknown env id {env_id!r}; registered: {', '.join(ENV_VARIANTS)}")
    return {**ENV_VARIANTS[env_id], **dict(env_kwargs or {})}


class EnvModelPolicy:
    """``predict(observation, mask) -> action index`` as an engine policy.

    ``env_kwargs`` / ``env_id``: how the model's env was made
    (``gymnasium.make(env_id, **env_kwargs)``); they fix the observation
    (windows ``K`` / ``M``, scales, queue order, cluster shape) and the engine
    settings the model expects (``engine_kwargs()``: ``lease_s``, ``tick_s``,
    ``restore_s_per_gpu``; ``simulate()`` applies them). The trace and the
    congestion are the caller's.
    """

    deterministic = True

    def __init__(
        self,
        predict: Predict,
        env_kwargs: Mapping[str, Any] | None = None,
        env_id: str | None = None,
        name: str = "model",
    ) -> None:
        from gymnasium import spaces

        self.predict = predict
        self.name = name
        self.env_kwargs = env_arguments(env_kwargs, env_id)
        # the env itself validates the arguments and owns the observation
        # config and action codec the model was trained against; none of them
        # depends on the trace, so the probe runs one 1-GPU job (the env's own
        # trace may not fit a cluster given here, and need not be loaded)
        probe = _probe_env(self.env_kwargs, env_id)
        self._probe = probe
        self.observation_space = probe.observation_space
        # a size-free observation (the bench env's) runs on any cluster: no cluster
        size_free = not isinstance(probe.observation_space, spaces.Dict)
        self.cluster = None if size_free else probe.cluster
        self._obs_cfg = probe._obs_cfg  # noqa: SLF001
        self._codec = probe._codec  # noqa: SLF001
        self._engine_kwargs = {
            k: v
            for k, v in probe._engine_kwargs.items()  # noqa: SLF001
            if k in ("lease_s", "tick_s", "restore_s_per_gpu")
        }
        self._builder: Any = None

    def engine_kwargs(self) -> dict[str, Any]:
        """Engine settings of the env the model was trained in."""
        return dict(self._engine_kwargs)

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        engine = view._engine  # noqa: SLF001  (the observation reads the engine, as the env's does)
        c, mine = engine.cluster, self.cluster
        shape = (c.racks, c.num_servers, c.gpus_per_server)
        if mine is not None and shape != (mine.racks, mine.num_servers, mine.gpus_per_server):
            raise ValueError(
                f"{self.name} was trained on a {mine.describe()} cluster; it cannot observe "
                f"{c.describe()} (its observation has one row per server and rack)"
            )
        self._builder = self._probe._make_obs_builder(engine)  # noqa: SLF001  (the env's own)

    def act(self, view: EngineView) -> Action:
        builder = self._builder
        if builder is None or builder.engine is not view._engine:  # noqa: SLF001
            self.reset(view)
            builder = self._builder
        builder.update()
        if not builder.has_choice:  # the env skips these instants: no choice
            return WAIT
        mask = builder.mask
        a = int(self.predict(builder.observation(), mask.copy()))
        if not (0 <= a < len(mask) and mask[a]):
            # an unmasked model (plain PPO) may pick an invalid action: the
            # env would make it a no-op, i.e. WAIT where WAIT is valid
            a = 0 if mask[0] else int(np.flatnonzero(mask)[0])
        return self._codec.decode(a, builder)


def _probe_env(env_kwargs: Mapping[str, Any], env_id: str | None) -> Any:
    """The model's env on a one-job trace: ``ClusterEnv`` for the cluster
    ids, ``bench_env.probe_env`` (a ``SetClusterEnv``, no suite data read)
    for the bench ids."""
    from ddl_gym import ENTRY_POINTS

    if ENTRY_POINTS.get(env_id or DEFAULT_ENV_ID, "").endswith(":BenchEnv"):
        from ddl_gym.env.bench_env import probe_env

        return probe_env(**env_kwargs)
    from ddl_gym.env import ClusterEnv

    return ClusterEnv(**{**env_kwargs, "trace": _probe_trace()})


def _probe_trace() -> Any:
    """One 1-GPU job: enough to build an env for its spaces."""
    import pandas as pd

    from ddl_gym.traces.schema import make_trace

    job = {"job_id": "probe", "arrival_s": 0.0, "gpus": 1, "model": "resnet18"}
    return make_trace("probe", pd.DataFrame([{**job, "iterations": 1.0, "iter_time_s": 1.0}]), None)


def sb3_predictor(model: Any, observation_space: Any, deterministic: bool = True) -> Predict:
    """``predict(obs, mask)`` of an SB3 model, whichever observation it was
    trained on: the env's ``Dict`` (``MultiInputPolicy``) or the same
    flattened (``FlattenObservation`` / ``FlattenClusterObs``)."""
    from gymnasium import spaces

    flat = not isinstance(model.observation_space, spaces.Dict)
    if not flat:  # the Dict's parts, one by one, in this env's words
        for key, space in observation_space.spaces.items():
            theirs = model.observation_space.spaces.get(key)
            if theirs is None or theirs.shape != space.shape:
                got = "no such part" if theirs is None else f"shape {theirs.shape}"
                raise ValueError(
                    f"the model's observation part {key!r} has {got}, this env's has shape "
                    f"{space.shape}: check env_kwargs (cluster: servers and racks; K: pending "
                    "rows; M: running rows) against its training env"
                )
    if flat:
        expected = spaces.flatdim(observation_space)
        got = int(np.prod(model.observation_space.shape))
        if got != expected:
            raise ValueError(
                f"the model observes {got} values but this env's observation has {expected} "
                "(Dict or flattened): check env_kwargs (cluster, K, M) against its training env"
            )
    maskable = "action_masks" in model.predict.__code__.co_varnames

    def predict(obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        x = spaces.flatten(observation_space, obs) if flat else obs
        kwargs = {"action_masks": mask} if maskable else {}
        action, _ = model.predict(x, deterministic=deterministic, **kwargs)
        return int(np.asarray(action).reshape(-1)[0])

    return predict


def load_sb3(
    path: str | Path,
    env_kwargs: Mapping[str, Any] | None = None,
    env_id: str | None = None,
    algo: str = "auto",
    deterministic: bool = True,
) -> EnvModelPolicy:
    """An SB3 / sb3-contrib model zip (``MaskablePPO`` or ``PPO``; ``algo``
    "auto" tries both) as a policy for ``simulate()``."""
    from ddl_gym.agents.threads import one_thread

    one_thread()
    path = Path(path)
    if not path.is_file() and path.with_suffix(".zip").is_file():
        path = path.with_suffix(".zip")
    if not path.is_file():
        raise FileNotFoundError(f"no model file {path}")
    model = _load_model(path, algo)
    policy = EnvModelPolicy(lambda o, m: 0, env_kwargs, env_id, name=f"model:{path.stem}")
    policy.predict = sb3_predictor(model, policy.observation_space, deterministic)
    policy.deterministic = deterministic
    policy.model = model  # type: ignore[attr-defined]
    return policy


def _load_model(path: Path, algo: str) -> Any:
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    algos = {"maskable_ppo": MaskablePPO, "ppo": PPO}
    if algo != "auto":
        if algo not in algos:
            raise ValueError(f"unknown algo {algo!r}; known: auto, {', '.join(algos)}")
        return algos[algo].load(str(path), device="cpu")
    errors = []
    for cls in algos.values():
        try:
            return cls.load(str(path), device="cpu")
        except Exception as err:  # noqa: BLE001 - report every attempt below
            errors.append(f"{cls.__name__}: {err}")
    raise ValueError(f"{path}: not a MaskablePPO or PPO model ({'; '.join(errors)})")
