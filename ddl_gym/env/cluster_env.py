"""Gymnasium environment over the ddl-gym engine.

``gymnasium.make("ddl_gym/Cluster-v0", trace=..., cluster=..., ...)``; the
variants registered on ``import ddl_gym`` are listed in
``ddl_gym.ENV_VARIANTS`` (kept there so registering does not import the
engine). The env
drives an ``Engine`` with the same actions heuristics use (``Place``,
``Preempt``, ``Wait``), so ``env.view`` lets a heuristic act on the env and
``action_index`` / ``engine_action`` translate between the two action forms.

Design notes (why, beyond docs/design.md section 5):

* Non-WAIT actions act at the current instant, so one instant may see many
  steps; only WAIT moves time and therefore only WAIT earns a non-zero reward.
* Instants at which WAIT is the only valid action (empty queue and nothing to
  preempt) are skipped inside the step: the agent has no choice there and
  skipping them keeps episodes short. This never changes what a policy can do.
* WAIT is masked (and refused) when the cluster idles with a queue: nothing
  runs, jobs wait and there is no periodic tick. Not "no event is due": that
  would reveal whether more jobs will arrive. Some placement is then always
  possible (every job fits the empty cluster), so the agent must place and an
  episode can never deadlock.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ddl_gym.engine import Action, Engine, EngineView, InvalidAction
from ddl_gym.env.actions import ActionCodec
from ddl_gym.env.observation import (
    GLOBAL_FIELDS,
    PENDING_FIELDS,
    QUEUE_ORDERS,
    RACK_FIELDS,
    RUNNING_FIELDS,
    ObsBuilder,
    ObsConfig,
    typed_keys,
)
from ddl_gym.env.sources import EpisodeSource
from ddl_gym.env.typed_obs import MAX_TYPES, check_type_count
from ddl_gym.topology import Cluster, Congestion, get_cluster, get_congestion

REWARDS = ("jct", "makespan", "comm", "slowdown")


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

    **GPU types** (a typed cluster, ``Cluster.gpu_kinds``; see ``typed``).
    The typed layout has ``Discrete(1 + 3K + M + 3TK)``, ``T = MAX_TYPES = 8``
    type slots (``ddl_gym.env.typed_obs``; the cluster's types in
    ``gpu_kinds`` order; more types is an error naming the limit):

    * ``1 + 3K + M + 3(kT + t) + l``: ``Place`` the k-th pending job at level
      ``l`` on GPU type slot ``t`` (``Place(job, level, gpu_type=t)``);
    * ``1 + 3k + l`` stays the engine's choice of type (``gpu_type=None``:
      the tightest level over the job's accepted types, ties to the type
      listed first), so a type-blind policy acts unchanged.

    The mask refuses a type the job does not accept (its trace's
    ``gpu_types``, and ``gpu_mem_gib`` against the type's memory), an empty
    type slot, and a type with no free placement at that level. Whatever the
    layout, the mask of ``1 + 3k + l`` on a typed cluster follows the job's
    accepted types and each type's own free GPUs, so it equals the engine's
    check. On an untyped cluster (the default ``typed=None``) nothing of this
    exists: spaces, observations and results are as before.

    ``action_masks()`` (sb3-contrib's convention, reachable through wrappers
    with ``get_wrapper_attr`` and through vector envs with ``call`` /
    ``env_method``) and ``info["action_mask"]`` give the valid actions. WAIT
    is invalid only when the cluster idles with a queue (nothing runs, jobs
    wait, no tick): then the agent must place. The mask never depends on
    whether more jobs will arrive.

    An invalid action (an index outside ``Discrete(1 + 3K + M)``, a masked
    index, or any action once the episode is over) is, by default, a no-op:
    simulated time does not move, no job or GPU changes, the reward is 0.0,
    ``terminated`` / ``truncated`` are as before (the step still counts
    toward ``max_steps``), the observation is an equal fresh copy, and
    ``info["invalid"]`` holds the reason in words. With ``strict=True`` the
    same action raises ``ValueError`` naming the action and the reason,
    instead (for debugging a policy that should only pick masked-in actions).

    ## Observation Space

    ``Dict`` of float32 arrays, every value in [0, 1]. Counts ``n`` are shown
    as ``n / (n + c)``, durations ``t`` as ``t / (t + time_scale_s)``,
    slowdowns ``s = t_iter / t_compute >= 1`` as ``1 - 1/s``.

    * ``servers`` (servers,): free GPUs of each server / GPUs per server.
    * ``racks`` (racks, 2): ``free``: free GPUs / GPUs per rack;
      ``uplink_jobs``: cross-rack jobs using the rack's uplink, ``n/(n+1)``.
    * ``pending`` (K, 21), one row per job of the queue window (zeros when
      the slot is empty), columns in this order (``ddl_gym.env.observation.PENDING_FIELDS``):
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
      (``ddl_gym.env.observation.RUNNING_FIELDS``): ``present``; ``gpus``; the four model
      features; ``level_machine|rack|network`` (one-hot span of its
      placement); ``slowdown`` (current, including contention);
      ``efficiency`` (time-averaged compute / (compute + exposed
      communication), as in the seed's re-offers); ``running_for`` (since
      its start); ``restoring`` (paying its checkpoint-restore cost);
      ``lease_expired`` (at this instant); ``preemptions``; ``attained``;
      ``progress`` and ``remaining`` (only when ``clairvoyant``: progress
      reveals the job's total size).
    * ``global`` (11,) (``ddl_gym.env.observation.GLOBAL_FIELDS``): ``used`` GPU fraction;
      ``background`` uplink traffic fraction; ``queue`` length
      (``n/(n+K)``); ``queue_gpus`` (GPUs asked by the whole queue,
      ``x/(x + cluster GPUs)``); ``running`` jobs (``n/(n+M)``); ``done``
      fraction of the jobs arrived so far (never of the episode's total,
      which would reveal future arrivals); ``time`` since the episode start
      (``t/(t + horizon)``, horizon = ``max_time_s`` or a day);
      ``time_of_day``; ``max_server_free`` and ``max_rack_free`` (largest
      holes); ``lease_expired`` (any lease expired now).

    In the typed layout three more keys (``ddl_gym.env.typed_obs``'s fields;
    ``T = MAX_TYPES`` slots, unused slots zeros):

    * ``pending_types`` (K, T, 4), per pending row and type slot: ``speed``
      (the job's predicted compute speed on the type, ``view.type_speed``, /
      its speed on its best accepted type; 0 for a type it does not accept),
      ``feasible_machine|rack|network`` (the typed place actions' mask).
    * ``running_types`` (M, 2 + T): ``speed`` on the type it runs on (same
      normalisation), ``mixed`` (a placement over several types, only with
      ``mix_types``), ``on_type_0..7`` (one-hot of its type).
    * ``types`` (T, 4), per type slot: ``present``, ``free`` (fraction of
      the type's GPUs free), ``share`` (its GPUs / the cluster's),
      ``max_server_free`` (largest free block on one of its servers / GPUs
      per server).

    On a typed cluster the base fields keep their meaning, with two
    precisions: ``slowdown`` (running) is ``t_iter`` over the job's compute
    time on its own type (communication only; the type's speed is in
    ``running_types``), and a pending job's ``slowdown_*`` and ``remaining``
    are at the trace's (V100-referenced) compute time, its type not chosen yet.

    ``wrappers.FlattenClusterObs`` flattens it for MLP policies.
    ``set_env.SetClusterEnv`` is this env with a size-free observation (a
    padded set of candidate jobs whose shape does not depend on the cluster),
    a preemption budget per instant and periodic ticks, for policies that must
    run on any cluster.

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
    queueing, communication, utilisation, preemptions, allocations per level;
    on a typed cluster also ``gpu_h_<type>``, the GPU-hours each type gave).

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
    * ``lease_s``, ``tick_s``, ``restore_s_per_gpu``: engine arguments;
      ``lazy_leases``: report a lease expiry only at an instant where a job
      waits (what Dally's ``engine_kwargs()`` asks for; off by default, since
      an agent may want to act on every expiry).
    * ``reward``: ``"jct"``, ``"makespan"``, ``"comm"`` or ``"slowdown"``;
      ``reward_scale``; ``time_scale_s`` (3600): time unit of rewards and
      observations.
    * ``max_steps``, ``max_time_s``: truncation limits (None: whole trace).
    * ``window_s``: episode = a window of this many seconds of a pool trace.
    * ``queue_order``: ``"arrival"``, ``"small_first"`` (fewest GPUs first)
      or ``"las"`` (least attained service first); ties by arrival.
    * ``clairvoyant``: whether remaining work is observable.
    * ``strict``: an invalid action raises ``ValueError`` instead of being a
      no-op with ``info["invalid"]``.
    * ``typed``: the typed layout (typed keys and place actions, above).
      ``None`` (default): whether the cluster has GPU types. ``True`` on an
      untyped cluster shows it as one type in slot 0 (speed 1), so one
      typed agent acts on both; ``False`` on a typed cluster gives the
      untyped layout (a type-blind agent; masks still follow the types).

    Every argument is checked here, in the constructor (so ``gym.make``
    fails, not the first ``reset()``): unknown names, out-of-range numbers,
    an unreadable trace or a synthetic spec that ``synthetic_trace`` rejects.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        trace: Any = "default",
        cluster: Cluster | str = "seed64",
        fabric: str | None = None,
        congestion: str | float | Congestion = "none",
        K: int = 8,
        M: int = 8,
        lease_s: float | None = None,
        lazy_leases: bool = False,
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
        strict: bool = False,
        typed: bool | None = None,
    ) -> None:
        congestion = get_congestion(congestion)  # unknown name / fraction outside [0, 1)
        for name, value in (
            ("lease_s", lease_s),
            ("tick_s", tick_s),
            ("max_time_s", max_time_s),
        ):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive or None, got {value}")
        if max_steps is not None and not max_steps >= 1:
            raise ValueError(f"max_steps must be >= 1 or None, got {max_steps}")
        if not restore_s_per_gpu >= 0:
            raise ValueError(f"restore_s_per_gpu must be >= 0, got {restore_s_per_gpu}")
        if not math.isfinite(reward_scale):
            raise ValueError(f"reward_scale must be finite, got {reward_scale}")
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
            raise ValueError(
                f"unsupported render_mode {render_mode!r}; "
                f"supported: {', '.join(self.metadata['render_modes'])}"
            )
        self.render_mode = render_mode
        self.cluster = get_cluster(cluster, fabric)
        # the typed layout (typed keys, typed place actions): typed clusters by default
        self.typed = self.cluster.typed if typed is None else bool(typed)
        if self.typed:
            check_type_count(self.cluster)  # more types than MAX_TYPES slots: error
        self.K, self.M = int(K), int(M)
        self.reward_kind = reward
        self.reward_scale = float(reward_scale)
        self.time_scale_s = float(time_scale_s)
        self.max_steps = max_steps
        self.max_time_s = max_time_s
        self.window_s = window_s
        self.clairvoyant = clairvoyant
        self.strict = bool(strict)
        self._engine_kwargs = {
            "congestion": congestion,
            "lease_s": lease_s,
            "lazy_leases": lazy_leases,
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
            typed=self.typed,
        )
        self._source = EpisodeSource(trace, self.cluster, self._engine_kwargs, window_s)
        self._codec = ActionCodec(self.K, self.M, MAX_TYPES if self.typed else 0)

        c = self.cluster
        self.action_space = spaces.Discrete(self._codec.n)

        def box(*shape: int) -> spaces.Box:
            return spaces.Box(0.0, 1.0, shape=shape, dtype=np.float32)

        keys: dict[str, spaces.Space] = {
            "servers": box(c.num_servers),
            "racks": box(c.racks, len(RACK_FIELDS)),
            "pending": box(self.K, len(PENDING_FIELDS)),
            "running": box(self.M, len(RUNNING_FIELDS)),
            "global": box(len(GLOBAL_FIELDS)),
        }
        if self.typed:
            keys.update({key: box(*shape) for key, shape in typed_keys(self.K, self.M)})
        self.observation_space = spaces.Dict(keys)
        self.engine: Engine | None = None
        self._obs: ObsBuilder | None = None
        self._view: EngineView | None = None
        self._steps = 0
        self._start = 0.0
        self._inv_ideal: list[float] = []

    # -- episode setup -----------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        engine = self._source.next_engine(self.np_random)
        self.engine = engine
        self._view = EngineView(engine)
        self._obs = self._make_obs_builder(engine)
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

    def _make_obs_builder(self, engine: Engine) -> ObsBuilder:
        """The observation builder of a new episode (``set_env`` overrides it)."""
        return ObsBuilder(engine, self._obs_cfg)

    # -- stepping ----------------------------------------------------------
    def _live(self, what: str) -> tuple[Engine, ObsBuilder]:
        """The episode's engine and observation builder (``reset()`` first)."""
        if self.engine is None or self._obs is None:
            raise RuntimeError(f"call reset() before {what}")
        return self.engine, self._obs

    def _advance(self) -> float:
        """WAIT: move to the next event instant; returns the reward for it."""
        e, _ = self._live("step()")
        t0 = e.now
        kind = self.reward_kind
        if kind == "jct":
            weight = len(e.pending) + len(e.running)
        elif kind == "slowdown":
            inv = self._inv_ideal
            weight = sum(inv[j.index] for j in e.pending) + sum(inv[i] for i in e.running)
        elif kind == "comm":
            # rates as they are now, during the interval: the events that end
            # it re-rate jobs, and those new rates belong to the next interval
            running = [(j.gpus, j.busy_until, j.exposed / j.t_iter) for j in e.running.values()]
        e.advance()
        dt = e.now - t0
        if dt <= 0:
            return 0.0
        if kind == "makespan":
            loss = dt
        elif kind == "comm":
            loss = 0.0
            for gpus, busy_until, comm_share in running:
                busy = max(0.0, min(e.now, busy_until) - t0)
                loss += gpus * (dt - busy) * comm_share
        else:
            loss = weight * dt
        if kind != "slowdown":
            loss /= self.time_scale_s
        return -loss * self.reward_scale

    def _skip_trivial(self) -> float:
        """Advance through instants where WAIT is the only valid action."""
        e, obs = self._live("step()")
        reward = 0.0
        while not e.done and not obs.has_choice:
            reward += self._advance()
            obs.update()
        return reward

    def step(
        self, action: int | np.integer
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        e, obs = self._live("step()")
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
                    e.apply(self._codec.decode(a, obs))
                except InvalidAction as err:  # mask and engine disagree: stay safe
                    info["invalid"] = str(err)
                else:
                    obs.update()
            if "invalid" not in info:
                reward += self._skip_trivial()
        else:
            info["invalid"] = self._codec.why_invalid(a, obs, e)
        if self.strict and "invalid" in info:
            raise ValueError(f"invalid action {a}: {info['invalid']}")
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
            if isinstance(observation, dict):
                observation = {key: value.copy() for key, value in observation.items()}
            else:  # a flat observation (set_env)
                observation = observation.copy()
        return observation, float(reward), terminated, truncated, info

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
        return self._codec.index(action, self._live("action_index()")[1])

    def engine_action(self, index: int) -> Action:
        """The engine action discrete action ``index`` stands for now."""
        return self._codec.engine_action(index, self._live("engine_action()")[1])

    def render(self) -> str | np.ndarray | None:
        """Gymnasium's render API (the mode is fixed at construction):

        * ``"rgb_array"``: an ``(H, W, 3)`` uint8 frame, one row of GPU cells
          per server grouped by rack, each busy GPU in its job's colour, with
          bars of GPUs in use and GPUs asked by the queue
          (``ddl_gym.env.render.rgb_frame``); what SB3's ``make_vec_env``
          asks for and video recorders save;
        * ``"ansi"``: the same state as text (time, counts, one line per server);
        * ``None``: nothing.

        Before ``reset()`` there is no cluster state: returns None.
        """
        if self.render_mode is None or self.engine is None:
            return None
        from ddl_gym.env.render import ansi_text, rgb_frame

        if self.render_mode == "rgb_array":
            return rgb_frame(self.engine)
        return ansi_text(self.engine)


def heuristic_rollout(
    env: gym.Env, policy, seed: int | None = None, max_steps: int = 10_000_000
) -> tuple[float, dict[str, Any]]:
    """Run a heuristic ``policy`` (``reset(view)``, ``act(view)``) through
    ``env`` with ``env.view`` and ``action_index``; returns the return and the
    final info. Useful to compare heuristics and agents step for step.

    The env's engine settings are fixed when it is made, so make it with the
    policy's (``gym.make(id, **policy.engine_kwargs())``); settings that
    differ give a ``PolicyEngineWarning``, as in ``simulate()``.

    On a typed cluster a type-blind policy (no true ``type_aware``
    attribute) may ask for a placement no accepted type can hold (or, with
    LLM jobs, one that splits a TP group; ``Engine.forgives``); as in
    ``simulate()`` (``engine/simulate.py``, ``run_policy``) that attempt
    ends its turn (a WAIT) and counts in ``engine.deferred``, so the two
    give the same results."""
    from ddl_gym.engine.simulate import merge_engine_kwargs

    base: ClusterEnv = env.unwrapped  # type: ignore[assignment]
    merge_engine_kwargs(policy, base._engine_kwargs, stacklevel=3)
    _, info = env.reset(seed=seed)
    policy.reset(base.view, seed=seed)
    engine = base.engine
    assert engine is not None
    type_blind = engine.forgives(policy)
    total = 0.0
    for _ in range(max_steps):
        a = base.action_index(policy.act(base.view))
        if type_blind and a != 0 and not base.action_masks()[a]:
            engine.deferred += 1  # simulate()'s rule: the attempt ends the turn
            a = 0
        _, r, terminated, truncated, info = env.step(a)
        if "invalid" in info:
            raise RuntimeError(f"policy chose an invalid action: {info['invalid']}")
        total += float(r)
        if terminated or truncated:
            break
    return total, info
