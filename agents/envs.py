"""Trace splits and the env stack an agent trains and is validated on.

The split is the guard against evaluating on training data: every pool trace
is cut by arrival time into disjoint train / val / test parts, and training
env windows are drawn only from the train parts (see ``SplitConfig``).

``AgentEnv`` is the one wrapper between ``ClusterEnv`` and SB3: it flattens
the observation, optionally hides the preemption actions, and for plain PPO
maps invalid actions to WAIT. ``AgentPolicy`` (``agents.policy``) rebuilds
exactly this observation and mask inside ``simulate()``.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from ddl_gym.agents.config import EnvConfig, SplitConfig
from gymnasium import spaces

from ddl_gym.env import ClusterEnv
from ddl_gym.env.set_env import SetClusterEnv
from ddl_gym.traces import (
    Trace,
    TraceWarning,
    default_trace,
    find_data_dir,
    load_trace,
    synthetic_trace,
    window,
)
from ddl_gym.traces.transform import scale_load

PARTS = ("train", "val", "test")
_DEFAULT_SPEC = re.compile(r"^(default|long):(\d+)(?:-(\d+))?$")
_SCALED_SPEC = re.compile(r"^(.+)\*(\d+(?:\.\d+)?)$")

# "long:S": a synthetic workload shaped like the seed's traces (its GPU mix,
# a log-normal duration with the seed's ~20 h median, ~2.5 arrivals per hour),
# far longer jobs than the bundled default workload (median ~6 min).
LONG_SPEC: dict[str, Any] = {
    "n_jobs": 300,
    "arrival_rate_per_h": 2.5,
    "gpu_mix": {2: 0.10, 4: 0.23, 8: 0.47, 16: 0.14, 32: 0.06},
    "duration_median_s": 20 * 3600.0,
    "duration_sigma": 1.2,
    "max_duration_s": 30 * 86400.0,
}


# -- traces and the split ----------------------------------------------------
def resolve_traces(specs: Sequence[str]) -> list[Trace]:
    """Traces named by ``SplitConfig.traces`` specs."""
    out: list[Trace] = []
    for spec in specs:
        scaled = _SCALED_SPEC.match(spec)
        if scaled:  # "PATH*K": the trace with K times its arrival rate
            (base,) = resolve_traces([scaled.group(1)])
            out.append(scale_load(base, float(scaled.group(2))))
            continue
        m = _DEFAULT_SPEC.match(spec)
        if m:
            kind = m.group(1)
            lo = int(m.group(2))
            hi = int(m.group(3) or lo)
            for seed in range(lo, hi + 1):
                if kind == "default":
                    trace = default_trace(seed=seed)
                else:
                    trace = synthetic_trace(seed=seed, name=f"long:{seed}", **LONG_SPEC)
                out.append(Trace(f"{kind}:{seed}", trace.jobs))
            continue
        path = Path(spec).expanduser()
        if not path.is_file():
            data = find_data_dir()
            if data is None or not (data / spec).is_file():
                raise FileNotFoundError(f"trace {spec!r}: no such file (nor under the data dir)")
            path = data / spec
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TraceWarning)  # the seed's JSON is unsorted
            out.append(load_trace(path))
    return out


def time_part(trace: Trace, lo: float, hi: float) -> Trace:
    """Jobs arriving in the ``[lo, hi)`` fraction of the trace's arrival span
    (``hi == 1`` includes the last job), shifted to start at 0."""
    a = trace.jobs["arrival_s"].to_numpy()
    first, last = float(a.min()), float(a.max())
    span = last - first
    start = first + lo * span
    end = first + hi * span if hi < 1.0 else last + 1.0
    return window(trace, start, end)


def split_traces(split: SplitConfig) -> dict[str, list[Trace]]:
    """``{"train": [...], "val": [...], "test": [...]}``, one part per trace,
    plus ``"val_whole"`` / ``"test_whole"``: the held-out whole traces."""
    bounds = {"train": split.train, "val": split.val, "test": split.test}
    (a0, a1), (b0, b1), (c0, c1) = split.train, split.val, split.test
    if not (0.0 <= a0 < a1 <= b0 < b1 <= c0 < c1 <= 1.0):
        raise ValueError(f"split parts must be ordered and disjoint: {bounds}")
    overlap = (set(split.traces) | set(split.val_traces) | set(split.select_traces)) & set(
        split.test_traces
    )
    if overlap or set(split.traces) & set(split.val_traces):
        raise ValueError(f"a held-out trace is also a training/validation trace: {overlap}")
    traces = resolve_traces(split.traces)
    parts = {name: [time_part(t, *bounds[name]) for t in traces] for name in PARTS}
    parts["val_whole"] = resolve_traces(split.val_traces)
    parts["test_whole"] = resolve_traces(split.test_traces)
    return parts


def describe_split(split: SplitConfig, parts: dict[str, list[Trace]]) -> str:
    lines = [f"trace split (fractions of each trace's arrival span), traces: {split.traces}"]
    for name in PARTS:
        lo, hi = getattr(split, name)
        n = sum(len(t) for t in parts[name])
        lines.append(f"  {name:5s} [{lo:.0%}, {hi:.0%}): {n} jobs in {len(parts[name])} traces")
    for name in ("val_whole", "test_whole"):
        if parts.get(name):
            names = ", ".join(t.name for t in parts[name])
            lines.append(f"  {name}: {sum(len(t) for t in parts[name])} jobs ({names})")
    return "\n".join(lines)


def fixed_windows(parts: Sequence[Trace], n: int, window_s: float | None, seed: int) -> list[Trace]:
    """``n`` windows of ``window_s`` seconds drawn (seeded) from ``parts`` in
    turn; the whole part when ``window_s`` is None."""
    rng = np.random.default_rng(seed)
    out: list[Trace] = []
    for i in range(n):
        part = parts[i % len(parts)]
        if window_s is None:
            out.append(part)
            continue
        a = part.jobs["arrival_s"].to_numpy()
        room = max(0.0, float(a.max()) - window_s)
        for _ in range(100):
            start = float(rng.random()) * room
            w = window(part, start, start + window_s)
            if len(w):
                out.append(w)
                break
        else:
            raise ValueError(f"no window of {window_s} s of {part.name!r} holds a job")
    return out


# -- envs ----------------------------------------------------------------------
def cluster_env(env: EnvConfig, traces: Sequence[Trace], window_s: float | None) -> ClusterEnv:
    if env.obs not in ("flat", "set"):
        raise ValueError(f"unknown obs {env.obs!r}: 'flat' or 'set'")
    # arguments both observation kinds take
    common: dict[str, Any] = dict(
        trace=list(traces),
        cluster=env.cluster,
        fabric=env.fabric,
        congestion=env.congestion,
        K=env.K,
        M=env.M,
        lease_s=env.lease_s,
        tick_s=env.tick_s,
        restore_s_per_gpu=env.restore_s_per_gpu,
        reward=env.reward,
        time_scale_s=env.time_scale_s,
        max_steps=env.max_steps,
        window_s=window_s,
    )
    if env.obs == "set":
        return SetClusterEnv(**common, preempt_budget=env.preempt_budget)
    return ClusterEnv(**common, queue_order=env.queue_order)


def flatten_obs(obs: dict[str, np.ndarray] | np.ndarray) -> np.ndarray:
    """The Dict observation as one vector, keys sorted (as ``spaces.flatten``
    and ``ddl_gym.env.wrappers.FlattenClusterObs`` do); a flat one as it is."""
    if isinstance(obs, np.ndarray):
        return obs
    return np.concatenate([obs[key].ravel() for key in sorted(obs)])


def agent_mask(mask: np.ndarray, K: int, preempt: bool) -> np.ndarray:
    """The env's mask, with the preemption actions removed unless allowed."""
    if preempt:
        return mask
    out = mask.copy()
    out[1 + 3 * K :] = False
    return out


def slowdown_guard(mask: np.ndarray, obs: np.ndarray, K: int, M: int, s_max: float) -> np.ndarray:
    """``mask`` without the placements (pending row k, level l) whose
    predicted slowdown exceeds ``s_max`` (the set observation encodes a
    slowdown x as 1 - 1/x); unchanged if that would leave no action, so the
    guard never stalls the episode."""
    from ddl_gym.env.observation import slowdown_above
    from ddl_gym.env.set_observation import SET_PENDING_FIELDS, split_set_obs

    pending, _, _ = split_set_obs(obs, K, M)
    first = SET_PENDING_FIELDS.index("slowdown_machine")
    too_slow = slowdown_above(pending[:, first : first + 3], s_max)  # (K, 3)
    out = mask.copy()
    out[1 : 1 + 3 * K] &= ~too_slow.reshape(-1)
    return out if out.any() else mask


class WindowCycleEnv(gym.Env):
    """A fixed list of traces, one per episode in turn (validation: every
    evaluation sees exactly the same windows, so scores are comparable)."""

    metadata = {"render_modes": []}

    def __init__(self, env: EnvConfig, traces: Sequence[Trace]) -> None:
        self._envs = [cluster_env(env, [t], None) for t in traces]
        self._i = -1
        self.observation_space = self._envs[0].observation_space
        self.action_space = self._envs[0].action_space

    @property
    def current(self) -> ClusterEnv:
        return self._envs[max(self._i, 0) % len(self._envs)]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._i += 1
        return self.current.reset(seed=seed)

    def step(self, action):
        return self.current.step(action)

    def action_masks(self) -> np.ndarray:
        return self.current.action_masks()


class MixedWindowEnv(gym.Env):
    """Training episodes of mixed lengths: each reset draws a window length
    from ``windows_h`` (0: the whole trace part) and runs the env for it, so
    one policy sees 24 h windows and whole traces alike."""

    metadata = {"render_modes": []}

    def __init__(self, env: EnvConfig, traces: Sequence[Trace], windows_h: Sequence[float]):
        self._envs = [cluster_env(env, traces, h * 3600.0 if h > 0 else None) for h in windows_h]
        self._i = 0
        self.observation_space = self._envs[0].observation_space
        self.action_space = self._envs[0].action_space

    @property
    def current(self) -> ClusterEnv:
        return self._envs[self._i]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            for k, e in enumerate(self._envs):
                e.reset(seed=seed + 7919 * k)  # seed each env's own RNG once
        self._i = int(self.np_random.integers(len(self._envs)))
        return self.current.reset()

    def step(self, action):
        return self.current.step(action)

    def action_masks(self) -> np.ndarray:
        return self.current.action_masks()


class AgentEnv(gym.Wrapper):
    """Flat observation, the agent's action mask, and for plain PPO
    (``invalid_to_wait``) invalid actions replaced by WAIT (by the first
    valid action when WAIT would stall).

    With preemption disabled, instants where WAIT is the only action left
    are stepped through here, as ``ClusterEnv`` does for its own trivial
    instants, so the agent only sees real choices.
    """

    def __init__(
        self,
        env: gym.Env,
        K: int,
        preempt: bool,
        invalid_to_wait: bool,
        preempt_cost: float = 0.0,
        max_slowdown: float | None = None,
        M: int = 0,
    ) -> None:
        super().__init__(env)
        if not preempt_cost >= 0:
            raise ValueError(f"preempt_cost must be >= 0, got {preempt_cost}")
        if max_slowdown is not None and not max_slowdown > 1:
            raise ValueError(f"max_slowdown must be > 1, got {max_slowdown}")
        self.K = K
        self.M = M
        self.max_slowdown = max_slowdown
        self.preempt_cost = float(preempt_cost)
        self.preempt = preempt
        self.invalid_to_wait = invalid_to_wait
        space = env.observation_space
        if isinstance(space, spaces.Dict):
            size = sum(int(np.prod(s.shape or ())) for s in space.spaces.values())
        else:
            size = int(np.prod(space.shape or ()))
        self.observation_space = spaces.Box(0.0, 1.0, shape=(size,), dtype=np.float32)
        self._last: np.ndarray | None = None

    def action_masks(self) -> np.ndarray:
        mask = agent_mask(self.env.get_wrapper_attr("action_masks")(), self.K, self.preempt)
        if self.max_slowdown is not None and self._last is not None:
            mask = slowdown_guard(mask, self._last, self.K, self.M, self.max_slowdown)
        return mask

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        obs, reward, terminated, truncated, info = self._skip(obs, 0.0, False, False, info)
        self._last = flatten_obs(obs)
        return self._last, info

    def step(self, action):
        mask = self.action_masks()
        a = int(action)
        if not (0 <= a < len(mask) and mask[a]):
            if not self.invalid_to_wait:  # an action only this wrapper forbids: a no-op
                assert self._last is not None, "step() before reset()"
                return (
                    self._last.copy(),
                    0.0,
                    False,
                    False,
                    {"invalid": "masked", "action_mask": mask},
                )
            a = 0 if mask[0] else int(np.flatnonzero(mask)[0])
        obs, reward, terminated, truncated, info = self.env.step(a)
        if a > 3 * self.K:  # 1 + 3K + j: preempt running row j
            reward = float(reward) - self.preempt_cost
        obs, reward, terminated, truncated, info = self._skip(
            obs, float(reward), terminated, truncated, info
        )
        self._last = flatten_obs(obs)
        return self._last, reward, terminated, truncated, info

    def _skip(self, obs, reward: float, terminated: bool, truncated: bool, info):
        if self.preempt:
            return obs, reward, terminated, truncated, info
        while not (terminated or truncated) and not self.action_masks()[1:].any():
            obs, r, terminated, truncated, info = self.env.step(0)
            reward += float(r)
        return obs, reward, terminated, truncated, info


def make_env_fn(
    env: EnvConfig,
    traces: Sequence[Trace],
    *,
    invalid_to_wait: bool,
    cycle: bool = False,
) -> Callable[[], gym.Env]:
    """A factory for SB3 vector envs: random windows of ``traces`` (training)
    or, with ``cycle``, the traces themselves in turn (validation). SB3
    seeds each copy (seed + rank) at its first reset."""

    def make() -> gym.Env:
        from stable_baselines3.common.monitor import Monitor

        base: gym.Env
        if cycle:
            base = WindowCycleEnv(env, traces)
        elif env.windows_h:
            base = MixedWindowEnv(env, traces, env.windows_h)
        else:
            base = cluster_env(env, traces, env.window_s)
        # the preemption cost shapes the training reward only: validation
        # (cycle) returns stay minus the total JCT
        cost = 0.0 if cycle else env.preempt_cost
        guard = env.max_slowdown if env.obs == "set" else None
        return Monitor(
            AgentEnv(
                base,
                env.K,
                env.preempt,
                invalid_to_wait,
                preempt_cost=cost,
                max_slowdown=guard,
                M=env.M,
            )
        )

    return make
