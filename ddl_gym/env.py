"""Gymnasium environment over the ddl-gym engine.

``gymnasium.make("ddl_gym/Cluster-v0", trace=..., cluster=..., ...)``; the
variants registered on ``import ddl_gym`` are listed in
``ddl_gym.ENV_VARIANTS`` (kept there so registering does not import the
engine). The env
drives an ``Engine`` with the same actions heuristics use (``Place``,
``Preempt``, ``Wait``), so ``env.view`` lets a heuristic act on the env and
``action_index`` / ``engine_action`` translate between the two action forms.

Design notes (why, beyond DESIGN.md section 5):

* Non-WAIT actions act at the current instant, so one instant may see many
  steps; only WAIT moves time and therefore only WAIT earns a non-zero reward.
* Instants at which WAIT is the only valid action (empty queue and nothing to
  preempt) are skipped inside the step: the agent has no choice there and
  skipping them keeps episodes short. This never changes what a policy can do.
* WAIT is masked (and refused) when it would stall the engine: nothing runs,
  jobs wait, no event is due and there is no periodic tick. Some placement is
  then always possible (every job fits the empty cluster), so the agent must
  place and an episode can never deadlock.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
from gymnasium import spaces

from ddl_gym.engine import WAIT, Action, Engine, EngineView, InvalidAction, Place, Preempt, Wait
from ddl_gym.env_obs import (
    GLOBAL_FIELDS,
    LEVELS,
    PENDING_FIELDS,
    QUEUE_ORDERS,
    RACK_FIELDS,
    RUNNING_FIELDS,
    ObsBuilder,
    ObsConfig,
)
from ddl_gym.perf import Level
from ddl_gym.topology import Cluster, get_cluster
from ddl_gym.traces import (
    Trace,
    TraceWarning,
    check_fits,
    default_trace,
    find_data_dir,
    load_trace,
    synthetic_trace,
    validate,
    window,
)

REWARDS = ("jct", "makespan", "comm", "slowdown")

# Named traces accepted by ``trace=`` besides paths, Traces and DataFrames.
SEED_WEEK_FILE = "traces/dally/sense_500jobs_poisson_1proc-week.json"
PHILLY_WEEK_FILE = "traces/philly/philly_2017-11-13_to_2017-11-19.csv"

_CLUSTER_SHAPE = re.compile(r"^(\d+)x(\d+)x(\d+)$")


def resolve_cluster(cluster: Cluster | str, fabric: str | None = None) -> Cluster:
    """A ``Cluster``, a preset name or ``"RxSxG"`` (racks x servers x GPUs;
    fabric ``seed`` unless ``fabric`` says otherwise)."""
    if isinstance(cluster, str):
        m = _CLUSTER_SHAPE.match(cluster)
        if m:
            return Cluster(*(int(x) for x in m.groups()), fabric=fabric or "seed")
    return get_cluster(cluster, fabric)


def _named_trace(name: str, cluster: Cluster) -> Trace:
    data = find_data_dir()
    if name == "default":
        return default_trace(seed=0)
    if name in ("seed-week", "philly-week"):
        rel = SEED_WEEK_FILE if name == "seed-week" else PHILLY_WEEK_FILE
        if data is not None and (data / rel).is_file():
            with warnings.catch_warnings():
                # the seed's JSON is unsorted; the loader sorts it and says so
                warnings.simplefilter("ignore", TraceWarning)
                return load_trace(data / rel)
        warnings.warn(
            f"trace {name!r}: {rel} not found (no data dir); using a synthetic stand-in",
            stacklevel=3,
        )
        if name == "seed-week":
            return default_trace(seed=0)
        return synthetic_trace(n_jobs=5869, seed=0, max_gpus=cluster.num_gpus, name=name)
    path = Path(name).expanduser()
    if path.is_file():
        return load_trace(path)
    raise ValueError(
        f"unknown trace {name!r}: not 'default', 'seed-week', 'philly-week' or a trace file"
    )


def _as_trace(item: Any, cluster: Cluster) -> Trace:
    if isinstance(item, Trace):
        return item
    if isinstance(item, pd.DataFrame):
        return Trace("<DataFrame>", validate(item.reset_index(drop=True), "<DataFrame>"))
    if isinstance(item, (str, Path)):
        return _named_trace(str(item), cluster)
    raise TypeError(f"not a trace: {type(item).__name__}")


class ClusterEnv(gym.Env):
    """Schedule distributed deep-learning jobs on a GPU cluster whose network
    makes placement matter.

    ## Description

    An event-driven simulator (``ddl_gym.engine``) runs a job trace on a
    cluster of racks x servers x GPUs. Each job is a gang of data-parallel
    workers; how fast it runs depends on how far its GPUs spread (one
    machine, one rack, several racks), on its model (the performance model,
    ``ddl_gym.perf``) and on the other jobs and background traffic sharing the
    rack uplinks. The agent decides which waiting job to start, how tightly to
    pack it, and which running job to preempt.

    ## Action Space

    ``Discrete(1 + 3K + M)``:

    * ``0``: WAIT: advance time to the next event (arrival, completion, lease
      expiry, congestion change, tick);
    * ``1 + 3k + l``: ``Place`` the k-th pending job of the queue window
      (``queue_order``) on the tightest placement whose span is at most level
      ``l`` (0 machine, 1 rack, 2 network), now;
    * ``1 + 3K + j``: ``Preempt`` the j-th running job (start order), now: it
      is checkpointed and returns to the queue (cost ``restore_s_per_gpu`` per
      GPU at its next start). A job that started at this very instant cannot
      be preempted at it (that would only pay the checkpoint, and would let a
      policy loop place / preempt without time passing).

    ``action_masks()`` (sb3-contrib's convention, reachable through wrappers
    with ``get_wrapper_attr`` and through vector envs with ``call`` /
    ``env_method``) and ``info["action_mask"]`` give the valid actions. An
    invalid action is a no-op (zero reward, state untouched) that sets
    ``info["invalid"]`` to the reason. WAIT is invalid only when it would
    stall the simulation (nothing runs, jobs wait, no event is due): then the
    agent must place.

    ## Observation Space

    ``Dict`` of float32 arrays, every value in [0, 1]. Counts ``n`` are shown
    as ``n / (n + c)``, durations ``t`` as ``t / (t + time_scale_s)``,
    slowdowns ``s = t_iter / t_compute >= 1`` as ``1 - 1/s``.

    * ``servers`` (servers,): free GPUs of each server / GPUs per server.
    * ``racks`` (racks, 2): ``free``: free GPUs / GPUs per rack;
      ``uplink_jobs``: cross-rack jobs using the rack's uplink, ``n/(n+1)``.
    * ``pending`` (K, 21), one row per job of the queue window (zeros when
      the slot is empty), columns in this order (``env_obs.PENDING_FIELDS``):
      ``present``; ``gpus`` (log(1+g)/log(1+cluster GPUs));
      ``has_machine|rack|network``: whether a shape of that level exists for
      the job on this cluster; ``log_grad_bytes`` (log10 bytes / 10, the
      bytes the model moves on this fabric: catalogue x ``comm_scale``),
      ``log_buckets`` (all-reduce messages per iteration on this fabric),
      ``backward_share`` (overlap potential), ``log_iter_time``
      ((log10 s + 5) / 6): model features;
      ``slowdown_machine|rack|network``: the performance model's prediction
      at the tightest shape of that level under the current background
      (``EngineView.predicted_slowdown``), 1 when no such shape exists;
      ``feasible_machine|rack|network``: placeable now (= the mask);
      ``waited`` (since arrival or last preemption); ``age`` (since arrival);
      ``preemptions``; ``attained`` (GPU-seconds received);
      ``progress`` (fraction of iterations done) and ``remaining`` (ideal
      wall time left on its GPUs): only when ``clairvoyant``, else 0.
    * ``running`` (M, 18), one row per running job in start order
      (``env_obs.RUNNING_FIELDS``): ``present``; ``gpus``; the four model
      features; ``level_machine|rack|network`` (one-hot span of its
      placement); ``slowdown`` (current, including contention);
      ``efficiency`` (time-averaged compute / (compute + exposed
      communication), as in the seed's re-offers); ``running_for`` (since
      its start); ``restoring`` (paying its checkpoint-restore cost);
      ``lease_expired`` (at this instant); ``preemptions``; ``attained``;
      ``progress`` and ``remaining`` (only when ``clairvoyant``: progress
      reveals the job's total size).
    * ``global`` (11,) (``env_obs.GLOBAL_FIELDS``): ``used`` GPU fraction;
      ``background`` uplink traffic fraction; ``queue`` length
      (``n/(n+K)``); ``queue_gpus`` (GPUs asked by the whole queue,
      ``x/(x + cluster GPUs)``); ``running`` jobs (``n/(n+M)``); ``done``
      fraction of the episode's jobs; ``time`` since the episode start
      (``t/(t + horizon)``, horizon = ``max_time_s`` or a day);
      ``time_of_day``; ``max_server_free`` and ``max_rack_free`` (largest
      holes); ``lease_expired`` (any lease expired now).

    ``wrappers.FlattenClusterObs`` flattens it for MLP policies.

    ## Rewards

    Only WAIT moves time, so only WAIT steps earn a reward, for the interval
    ``dt`` it spans (all of it scaled by ``reward_scale``):

    * ``"jct"`` (default): ``-(jobs in system) * dt / time_scale_s``; the
      return is minus the total JCT (in ``time_scale_s`` units).
    * ``"makespan"``: ``-dt / time_scale_s``; the return is minus the makespan.
    * ``"comm"``: minus the GPU-time running jobs spend in exposed all-reduce
      during ``dt``, over ``time_scale_s`` (GPU-hours by default).
    * ``"slowdown"``: ``-sum over jobs in system of dt / max(ideal, 10 s)``,
      ``ideal`` being the job's run time without communication; the return is
      minus the sum of bounded slowdowns.

    ## Starting State

    ``reset(seed=...)`` picks a trace from the pool (or generates one from a
    synthetic spec) and, with ``window_s``, a window of it, all from the env's
    seeded RNG; the engine starts at the first arrival.

    ## Episode End

    Terminated when every job is done. Truncated after ``max_steps`` steps or
    ``max_time_s`` simulated seconds. The final ``info`` carries
    ``"summary"``: the engine's ``Result.summary`` (makespan, JCT percentiles,
    queueing, communication, utilisation, preemptions, allocations per level).

    ## Arguments

    * ``trace``: a ``Trace``, DataFrame (trace schema), file path,
      ``"default"`` (bundled synthetic), ``"seed-week"`` (the seed's Helios
      week, or the default if the data is absent), ``"philly-week"`` (Philly
      week, or a Philly-like synthetic trace); a list of those (a pool: one
      per episode); or a mapping of ``synthetic_trace`` keyword arguments (a
      fresh seeded trace per episode).
    * ``cluster``: a ``Cluster``, preset name or ``"RxSxG"``; ``fabric``:
      fabric preset overriding the cluster's.
    * ``congestion``: background uplink traffic (preset name or fraction).
    * ``K``, ``M``: pending and running window sizes (8, 8).
    * ``lease_s``, ``tick_s``, ``restore_s_per_gpu``: engine arguments.
    * ``reward``: ``"jct"``, ``"makespan"``, ``"comm"`` or ``"slowdown"``;
      ``reward_scale``; ``time_scale_s`` (3600): time unit of rewards and
      observations.
    * ``max_steps``, ``max_time_s``: truncation limits (None: whole trace).
    * ``window_s``: episode = a window of this many seconds of a pool trace.
    * ``queue_order``: ``"arrival"``, ``"small_first"`` (fewest GPUs first)
      or ``"las"`` (least attained service first); ties by arrival.
    * ``clairvoyant``: whether remaining work is observable.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        trace: Any = "default",
        cluster: Cluster | str = "seed64",
        fabric: str | None = None,
        congestion: str | float = "none",
        K: int = 8,
        M: int = 8,
        lease_s: float | None = None,
        tick_s: float | None = None,
        restore_s_per_gpu: float = 1.0,
        reward: str = "jct",
        reward_scale: float = 1.0,
        time_scale_s: float = 3600.0,
        max_steps: int | None = None,
        max_time_s: float | None = None,
        window_s: float | None = None,
        queue_order: str = "arrival",
        clairvoyant: bool = False,
        render_mode: str | None = None,
    ) -> None:
        if K < 1 or M < 0:
            raise ValueError(f"need K >= 1 and M >= 0, got K={K}, M={M}")
        if reward not in REWARDS:
            raise ValueError(f"unknown reward {reward!r}; known: {', '.join(REWARDS)}")
        if queue_order not in QUEUE_ORDERS:
            raise ValueError(
                f"unknown queue_order {queue_order!r}; known: {', '.join(QUEUE_ORDERS)}"
            )
        if not time_scale_s > 0:
            raise ValueError(f"time_scale_s must be positive, got {time_scale_s}")
        if window_s is not None and not window_s > 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"unsupported render_mode {render_mode!r}")
        self.render_mode = render_mode
        self.cluster = resolve_cluster(cluster, fabric)
        self.K, self.M = int(K), int(M)
        self.reward_kind = reward
        self.reward_scale = float(reward_scale)
        self.time_scale_s = float(time_scale_s)
        self.max_steps = max_steps
        self.max_time_s = max_time_s
        self.window_s = window_s
        self.clairvoyant = clairvoyant
        self._engine_kwargs = {
            "congestion": congestion,
            "lease_s": lease_s,
            "tick_s": tick_s,
            "restore_s_per_gpu": restore_s_per_gpu,
            "clairvoyant": clairvoyant,
            "record_series": False,  # the summary does not need it
        }
        self._obs_cfg = ObsConfig(
            K=self.K,
            M=self.M,
            time_scale_s=self.time_scale_s,
            horizon_s=float(max_time_s) if max_time_s else 86400.0,
            clairvoyant=clairvoyant,
            queue_order=queue_order,
        )
        # trace source: a synthetic spec, or a pool of fixed traces
        self._synthetic: dict[str, Any] | None = None
        self._pool: list[Trace] = []
        if isinstance(trace, Mapping):
            spec = dict(trace)
            spec.setdefault("max_gpus", self.cluster.num_gpus)
            spec.pop("seed", None)  # drawn per episode
            self._synthetic = spec
        else:
            items = (
                list(trace)
                if isinstance(trace, Sequence) and not isinstance(trace, (str, bytes))
                else [trace]
            )
            if not items:
                raise ValueError("empty trace pool")
            self._pool = [_as_trace(t, self.cluster) for t in items]
            for t in self._pool:
                check_fits(t, self.cluster.num_gpus)
                if len(t) == 0:
                    raise ValueError(f"trace {t.name!r} has no jobs")
        self._engines: dict[int, Engine] = {}  # whole pool traces, reused

        c = self.cluster
        n_actions = 1 + 3 * self.K + self.M
        self.action_space = spaces.Discrete(n_actions)

        def box(*shape: int) -> spaces.Box:
            return spaces.Box(0.0, 1.0, shape=shape, dtype=np.float32)

        self.observation_space = spaces.Dict(
            {
                "servers": box(c.num_servers),
                "racks": box(c.racks, len(RACK_FIELDS)),
                "pending": box(self.K, len(PENDING_FIELDS)),
                "running": box(self.M, len(RUNNING_FIELDS)),
                "global": box(len(GLOBAL_FIELDS)),
            }
        )
        self.engine: Engine | None = None
        self._obs: ObsBuilder | None = None
        self._view: EngineView | None = None
        self._steps = 0
        self._start = 0.0
        self._inv_ideal: list[float] = []

    # -- episode setup -----------------------------------------------------
    def _next_engine(self) -> Engine:
        rng = self.np_random
        if self._synthetic is not None:
            for _ in range(100):
                seed = int(rng.integers(2**31 - 1))
                trace = synthetic_trace(seed=seed, **self._synthetic)
                if len(trace):
                    return Engine(trace, self.cluster, **self._engine_kwargs)
            raise ValueError("the synthetic spec produces no jobs")
        i = int(rng.integers(len(self._pool))) if len(self._pool) > 1 else 0
        base = self._pool[i]
        if self.window_s is None:
            engine = self._engines.get(i)
            if engine is None:
                engine = self._engines[i] = Engine(base, self.cluster, **self._engine_kwargs)
            else:
                engine.reset()
            return engine
        arrivals = base.jobs["arrival_s"].to_numpy()
        lo, hi = float(arrivals.min()), float(arrivals.max())
        for _ in range(100):
            start = lo + float(rng.random()) * max(0.0, hi - lo - self.window_s)
            part = window(base, start, start + self.window_s)
            if len(part):
                return Engine(part, self.cluster, **self._engine_kwargs)
        raise ValueError(f"no window of {self.window_s} s of trace {base.name!r} holds a job")

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        engine = self._next_engine()
        self.engine = engine
        self._view = EngineView(engine)
        self._obs = ObsBuilder(engine, self._obs_cfg)
        self._steps = 0
        self._start = engine.now
        if self.reward_kind == "slowdown":
            self._inv_ideal = [1.0 / max(j.work / j.gpus, 10.0) for j in engine.jobs]
        self._obs.update()
        reward = self._skip_trivial()
        info: dict[str, Any] = {"action_mask": self._obs.mask.copy(), "time_s": engine.now}
        if reward:
            info["skipped_reward"] = reward
        return self._obs.observation(), info

    # -- stepping ----------------------------------------------------------
    def _advance(self) -> float:
        """WAIT: move to the next event instant; returns the reward for it."""
        e = self.engine
        t0 = e.now
        kind = self.reward_kind
        if kind == "jct":
            weight = len(e.pending) + len(e.running)
        elif kind == "slowdown":
            inv = self._inv_ideal
            weight = sum(inv[j.index] for j in e.pending) + sum(inv[i] for i in e.running)
        elif kind == "comm":
            running = list(e.running.values())
        e.advance()
        dt = e.now - t0
        if dt <= 0:
            return 0.0
        if kind == "makespan":
            loss = dt
        elif kind == "comm":
            loss = 0.0
            for j in running:
                busy = max(0.0, min(e.now, j.busy_until) - t0)
                loss += j.gpus * (dt - busy) * j.exposed / j.t_iter
        else:
            loss = weight * dt
        if kind != "slowdown":
            loss /= self.time_scale_s
        return -loss * self.reward_scale

    def _skip_trivial(self) -> float:
        """Advance through instants where WAIT is the only valid action."""
        obs = self._obs
        e = self.engine
        reward = 0.0
        while not e.done and not obs.has_choice:
            reward += self._advance()
            obs.update()
        return reward

    def step(
        self, action: int | np.integer
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        if self.engine is None:
            raise RuntimeError("call reset() before step()")
        e = self.engine
        obs = self._obs
        self._steps += 1
        info: dict[str, Any] = {}
        reward = 0.0
        a = int(action)
        if 0 <= a < obs.n_actions and obs.mask[a] and not e.done:
            if a == 0:
                reward = self._advance()
                obs.update()
            else:
                try:
                    e.apply(self._decode(a))
                except InvalidAction as err:  # mask and engine disagree: stay safe
                    info["invalid"] = str(err)
                else:
                    obs.update()
            if "invalid" not in info:
                reward += self._skip_trivial()
        else:
            info["invalid"] = self._why_invalid(a)
        terminated = e.done
        elapsed = e.now - self._start
        truncated = not terminated and (
            (self.max_steps is not None and self._steps >= self.max_steps)
            or (self.max_time_s is not None and elapsed >= self.max_time_s)
        )
        info["action_mask"] = obs.mask.copy()
        info["time_s"] = e.now
        if terminated or truncated:
            info["summary"] = e.result().summary
        observation = obs.observation()
        if "invalid" in info:  # same state: fresh copies, never the same objects twice
            observation = {key: value.copy() for key, value in observation.items()}
        return observation, float(reward), terminated, truncated, info

    def _decode(self, a: int) -> Action:
        K = self.K
        if a == 0:
            return WAIT
        if a <= 3 * K:
            k, level = divmod(a - 1, 3)
            return Place(self._obs.win_pending[k].index, LEVELS[level])
        return Preempt(self._obs.win_running[a - 1 - 3 * K].index)

    def _why_invalid(self, a: int) -> str:
        obs = self._obs
        e = self.engine
        if e.done:
            return "the episode is over: every job is done"
        if not 0 <= a < obs.n_actions:
            return f"action {a} is outside Discrete({obs.n_actions})"
        K = self.K
        if a == 0:
            return (
                f"WAIT would stall at t={e.now:.6g}s: nothing runs, {len(e.pending)} job(s) "
                "wait and no event is due; place a job"
            )
        if a <= 3 * K:
            k, level = divmod(a - 1, 3)
            if k >= len(obs.win_pending):
                return f"pending slot {k} is empty ({len(obs.win_pending)} job(s) in the window)"
            return e.check(Place(obs.win_pending[k].index, LEVELS[level])) or "invalid"
        j = a - 1 - 3 * K
        if j < len(obs.win_running):
            job = obs.win_running[j]
            return f"job {job.job_id} started at this instant; it cannot be preempted now"
        return f"running slot {j} is empty ({len(obs.win_running)} job(s) in the window)"

    # -- masks, view and action translation ------------------------------
    def action_masks(self) -> np.ndarray:
        """Valid actions now (bool array of ``action_space.n``)."""
        if self._obs is None:
            raise RuntimeError("call reset() before action_masks()")
        return self._obs.mask.copy()

    @property
    def view(self) -> EngineView:
        """Read-only engine state, for heuristics acting on the env."""
        if self._view is None:
            raise RuntimeError("call reset() before using the view")
        return self._view

    def action_index(self, action: Action) -> int:
        """The discrete action that performs engine ``action`` now.

        Raises ``ValueError`` if it is outside the windows (a pending job past
        the K-th in queue order, a running job past the M-th).
        """
        obs = self._obs
        if isinstance(action, Wait):
            return 0
        if isinstance(action, Place):
            for k, job in enumerate(obs.win_pending):
                if job.index == action.job:
                    return 1 + 3 * k + int(Level(action.level))
            raise ValueError(f"{action}: job {action.job} is not in the pending window")
        if isinstance(action, Preempt):
            for j, job in enumerate(obs.win_running):
                if job.index == action.job:
                    return 1 + 3 * self.K + j
            raise ValueError(f"{action}: job {action.job} is not in the running window")
        raise ValueError(f"not an action: {action!r}")

    def engine_action(self, index: int) -> Action:
        """The engine action discrete action ``index`` stands for now."""
        a = int(index)
        if not 0 <= a < self._obs.n_actions:
            raise ValueError(f"action {a} is outside Discrete({self._obs.n_actions})")
        if 1 <= a <= 3 * self.K and (a - 1) // 3 >= len(self._obs.win_pending):
            raise ValueError(f"action {a}: pending slot {(a - 1) // 3} is empty")
        if a > 3 * self.K and a - 1 - 3 * self.K >= len(self._obs.win_running):
            raise ValueError(f"action {a}: running slot {a - 1 - 3 * self.K} is empty")
        return self._decode(a)

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self.engine is None:
            return None
        e = self.engine
        c = self.cluster
        return (
            f"t={e.now:.1f}s used={c.num_gpus - e.total_free}/{c.num_gpus} GPUs "
            f"pending={len(e.pending)} running={len(e.running)} done={e.n_done}/{len(e.jobs)}"
        )


def heuristic_rollout(
    env: gym.Env, policy, seed: int | None = None, max_steps: int = 10_000_000
) -> tuple[float, dict[str, Any]]:
    """Run a heuristic ``policy`` (``reset(view)``, ``act(view)``) through
    ``env`` with ``env.view`` and ``action_index``; returns the return and the
    final info. Useful to compare heuristics and agents step for step."""
    _, info = env.reset(seed=seed)
    base: ClusterEnv = env.unwrapped  # type: ignore[assignment]
    policy.reset(base.view, seed=seed)
    total = 0.0
    for _ in range(max_steps):
        a = base.action_index(policy.act(base.view))
        _, r, terminated, truncated, info = env.step(a)
        if "invalid" in info:
            raise RuntimeError(f"policy chose an invalid action: {info['invalid']}")
        total += r
        if terminated or truncated:
            break
    return total, info
