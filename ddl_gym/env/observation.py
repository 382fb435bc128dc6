"""Observation, action window and mask of ``ClusterEnv`` (see ``ddl_gym.env``).

``ObsBuilder`` turns the engine's state into fixed-shape float32 arrays in
[0, 1] and computes which discrete actions are valid. It is rebuilt for every
engine (one per trace or window) and called once per env step, so it keeps
per-job static features in preallocated tables and decides placement
feasibility from free-GPU counts alone:

* ``Place(job, machine)`` is possible iff the job fits one server and some
  server has that many GPUs free;
* ``Place(job, rack)`` iff some rack has that many GPUs free (the packer then
  finds servers in it; a job that fits one server lies in one rack too);
* ``Place(job, network)`` iff the cluster has that many GPUs free.

These are exactly the conditions under which ``ddl_gym.engine.packer`` finds a
placement, so the mask equals ``Engine.check`` without building placements.
On a typed cluster the same conditions hold per GPU type, on each type's own
free counts (``typed_obs.TypeFeasibility``); the typed layout adds the typed
keys and place actions of ``typed_obs``.

Every value is squashed into [0, 1]: counts ``n`` as ``n / (n + c)``, times
``t`` as ``t / (t + T)`` with the env's time scale ``T``, slowdowns ``s >= 1``
as ``1 - 1 / s`` (0 = no slowdown, 1 = never finishes).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from itertools import islice
from typing import Any

import numpy as np

from ddl_gym.engine import Engine, Job
from ddl_gym.env.typed_obs import (
    MAX_TYPES,
    TYPE_GLOBAL_FIELDS,
    TYPE_PENDING_FIELDS,
    TYPE_RUNNING_FIELDS,
    TypeFeasibility,
    TypeFeatures,
)
from ddl_gym.perf import Level
from ddl_gym.profiles import bucket_sizes, get_profile
from ddl_gym.topology import Fabric

LEVELS = (Level.MACHINE, Level.RACK, Level.NETWORK)
QUEUE_ORDERS = ("arrival", "small_first", "las")

# Column names of the per-job and global arrays, in order (documented in
# ``ClusterEnv``'s docstring).
PENDING_FIELDS = (
    "present",
    "gpus",
    "has_machine",
    "has_rack",
    "has_network",
    "log_grad_bytes",
    "log_buckets",
    "backward_share",
    "log_iter_time",
    "slowdown_machine",
    "slowdown_rack",
    "slowdown_network",
    "feasible_machine",
    "feasible_rack",
    "feasible_network",
    "waited",
    "age",
    "preemptions",
    "attained",
    "progress",
    "remaining",
)
RUNNING_FIELDS = (
    "present",
    "gpus",
    "log_grad_bytes",
    "log_buckets",
    "backward_share",
    "log_iter_time",
    "level_machine",
    "level_rack",
    "level_network",
    "slowdown",
    "efficiency",
    "running_for",
    "restoring",
    "lease_expired",
    "preemptions",
    "attained",
    "progress",
    "remaining",
)
GLOBAL_FIELDS = (
    "used",
    "background",
    "queue",
    "queue_gpus",
    "running",
    "done",
    "time",
    "time_of_day",
    "max_server_free",
    "max_rack_free",
    "lease_expired",
)
RACK_FIELDS = ("free", "uplink_jobs")


@dataclass(frozen=True)
class ObsConfig:
    """What the builder needs of the env's arguments."""

    K: int
    M: int
    time_scale_s: float
    horizon_s: float
    clairvoyant: bool
    queue_order: str
    typed: bool = False  # the typed layout: typed keys and place actions (typed_obs)


def _model_features(model: str, fabric: Fabric) -> tuple[float, float, float]:
    """Static, policy-relevant traits of a model: size and number of the
    gradient messages (bandwidth vs latency sensitivity) and how much of an
    iteration communication can hide behind. The bytes are those the model
    moves on this fabric (a fitted fabric may scale the catalogue's)."""
    p = get_profile(model)
    grad = max(1.0, float(p.total_grad_bytes) * fabric.comm_scale_of(model))
    buckets = len(bucket_sizes(model, fabric.bucket_bytes))
    return (
        min(1.0, math.log10(grad) / 10.0),  # 10 GB -> 1
        min(1.0, math.log1p(buckets) / math.log1p(1000.0)),
        p.backward_share,
    )


def slowdown_above(encoded: Any, factor: float) -> Any:
    """Where an observed slowdown (held as ``1 - 1 / s``) is above ``factor``;
    ``encoded`` a number or an array (the margin absorbs float32 rounding)."""
    return encoded > 1.0 - 1.0 / factor + 1e-6


class LevelSlowdowns:
    """The ``slowdown_machine|rack|network`` features of a job (``1 - 1/s``,
    1 where no shape of the level exists), shared by the observation builders.

    Predicted slowdowns depend only on the background traffic between
    decisions, so they are filled lazily per job and dropped when the
    background changes.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._cache: dict[int, tuple[float, float, float]] = {}
        self._bg = engine.background

    def __call__(self, job: Job) -> tuple[float, float, float]:
        engine = self._engine
        bg = engine.background
        if bg != self._bg:
            self._cache.clear()
            self._bg = bg
        s = self._cache.get(job.index)
        if s is None:
            perf = engine.perf
            vals = []
            for lv in LEVELS:
                x = perf.slowdown(job.model, job.gpus, lv, bg, job.t_compute)
                # None: no shape of this level exists (flagged by has_*)
                vals.append(1.0 if x is None else 1.0 - 1.0 / x)
            s = self._cache[job.index] = (vals[0], vals[1], vals[2])
        return s


class ObsBuilder:
    """Observation arrays, action windows and mask for one engine."""

    def __init__(self, engine: Engine, cfg: ObsConfig) -> None:
        self.engine = engine
        self.cfg = cfg
        c = engine.cluster
        self.G = c.gpus_per_server
        T = MAX_TYPES if cfg.typed else 0
        self.n_actions = 1 + 3 * cfg.K + cfg.M + 3 * T * cfg.K
        self.start = engine.now
        # per-type feasibility: typed engines (the mask) and the typed layout
        self._feas = TypeFeasibility(engine) if engine.types is not None or cfg.typed else None
        self._typed = TypeFeatures(engine, self._feas) if cfg.typed and self._feas else None
        jobs = engine.jobs
        log_n = math.log1p(c.num_gpus)
        # Static parts of every job's rows, computed once per engine; rows
        # are assembled from tuples and converted once per step (much faster
        # than writing numpy rows field by field).
        self._static_p: list[tuple[float, ...]] = []  # present .. log_iter_time
        self._static_r: list[tuple[float, ...]] = []  # present .. log_iter_time
        per_model: dict[str, tuple[float, float, float]] = {}
        has_level: dict[int, tuple[float, ...]] = {}
        perf = engine.perf
        for j in jobs:
            feats = per_model.get(j.model)
            if feats is None:
                feats = per_model[j.model] = _model_features(j.model, c.fabric)
            has = has_level.get(j.gpus)
            if has is None:
                has = has_level[j.gpus] = tuple(
                    float(perf.tightest_shape(j.gpus, lv) is not None) for lv in LEVELS
                )
            log_t = min(1.0, max(0.0, (math.log10(max(j.t_compute, 1e-9)) + 5.0) / 6.0))
            head = (1.0, math.log1p(j.gpus) / log_n)
            self._static_p.append((*head, *has, *feats, log_t))
            self._static_r.append((*head, *feats, log_t))
        self._slowdowns = LevelSlowdowns(engine)
        self._zero_p = (0.0,) * len(PENDING_FIELDS)
        self._zero_r = (0.0,) * len(RUNNING_FIELDS)
        self._inv_g = 1.0 / c.gpus_per_server
        self._inv_rack = 1.0 / c.gpus_per_rack
        self._inv_n = 1.0 / c.num_gpus
        # one flat buffer per step, cut into the Dict's arrays (views)
        self._layout: list[tuple[str, int, int, tuple[int, ...]]] = []
        at = 0
        keys: list[tuple[str, tuple[int, ...]]] = [
            ("servers", (c.num_servers,)),
            ("racks", (c.racks, len(RACK_FIELDS))),
            ("pending", (cfg.K, len(PENDING_FIELDS))),
            ("running", (cfg.M, len(RUNNING_FIELDS))),
            ("global", (len(GLOBAL_FIELDS),)),
        ]
        if cfg.typed:
            keys += typed_keys(cfg.K, cfg.M)
        for key, shape in keys:
            size = math.prod(shape)
            self._layout.append((key, at, at + size, shape))
            at += size
        self._size = at
        self._server_frac = [f / c.gpus_per_server for f in range(c.gpus_per_server + 1)]
        self._rack_frac = [f / c.gpus_per_rack for f in range(c.gpus_per_rack + 1)]
        # a cross-rack job holds >= 1 GPU of each rack it spans: <= gpus_per_rack jobs
        self._uplink_frac = [u / (u + 1.0) for u in range(c.gpus_per_rack + 1)]
        # Filled by update():
        self.win_pending: list[Job] = []
        self.win_running: list[Job] = []
        self.wait_ok = True
        self.mask = np.zeros(self.n_actions, dtype=bool)
        self.has_choice = False  # some action other than WAIT is valid
        self.obs: dict[str, np.ndarray] = {}

    # -- windows -----------------------------------------------------------
    def _pending_window(self) -> list[Job]:
        pending = self.engine.pending
        K = self.cfg.K
        order = self.cfg.queue_order
        if order == "arrival":
            return pending[:K]
        # sorted() and nsmallest() are stable: ties keep arrival order
        if order == "small_first":
            key = _gpus_key
        else:  # "las": least attained service first
            key = _attained_key
        if len(pending) <= K:
            return sorted(pending, key=key)
        return heapq.nsmallest(K, pending, key=key)

    def _wait_would_stall(self) -> bool:
        """WAIT is refused while the cluster idles with a queue and no tick
        is coming. Deliberately not "no event is due": whether an arrival is
        still due is future information a real scheduler does not have (it
        would tell the agent that the trace is over)."""
        e = self.engine
        return not e.running and bool(e.pending) and e.tick_s is None

    # -- the per-step update -----------------------------------------------
    def update(self) -> None:
        """Recompute windows, mask and observation from the engine.

        New arrays every time (never mutated afterwards), so observations and
        masks handed out earlier stay valid.
        """
        e = self.engine
        cfg = self.cfg
        K, M = cfg.K, cfg.M
        now = e.now
        T = cfg.time_scale_s
        clair = cfg.clairvoyant
        G = self.G
        free = e.free
        rack_free = e.rack_free
        max_free = max(free)
        max_rack = max(rack_free)
        total = e.total_free
        done = e.done
        self.wait_ok = done or not self._wait_would_stall()
        m: list[bool] = [self.wait_ok]
        inv_rack = self._inv_rack
        feas, typed = self._feas, self._typed
        if feas is not None:
            feas.refresh()
        typed_m: list[bool] = []  # typed place actions, after the preemptions
        typed_p: list[float] = []  # typed pending rows, after the global fields

        # servers and racks first: the flat buffer follows self._layout
        # floats only: ints and bools make numpy's conversion much slower
        buf: list[float] = list(map(self._server_frac.__getitem__, free))
        rack_frac, share = self._rack_frac, self._uplink_frac
        for rf, users in zip(rack_free, e.uplink_jobs, strict=True):
            buf += (rack_frac[rf], share[len(users)])

        # pending window: static | slowdowns | feasible, dynamic
        pending = e.pending
        win = self._pending_window() if pending else []
        self.win_pending = win
        static_p = self._static_p
        for job in win:
            g = job.gpus
            if feas is None:
                fm = g <= G and g <= max_free
                fr = g <= max_rack
                fn = g <= total
            else:  # typed: on the job's accepted types
                fm, fr, fn = feas.pending(job, typed, typed_m, typed_p)
            m += (fm, fr, fn)
            waited = now - job.queued_since
            age = now - job.arrival
            att = job.attained
            npre = job.preemptions
            if clair:
                it = job.iterations
                prog = job.progress / it if it > 0 else 1.0
                rem = (it - job.progress) * job.t_compute / g
                rem = rem / (rem + T)
            else:
                prog = rem = 0.0
            buf += static_p[job.index]
            buf += self._slowdowns(job)
            buf += (
                _F[fm],
                _F[fr],
                _F[fn],
                waited / (waited + T),
                age / (age + T),
                npre / (npre + 1.0),
                att / (att + T),
                prog,
                rem,
            )
        for _ in range(K - len(win)):
            buf += self._zero_p
            m += (False, False, False)

        # running window (start order): static | level | dynamic
        running = list(islice(e.running.values(), M)) if M else []
        self.win_running = running
        static_r = self._static_r
        expired = {j.index for j in e.lease_expired} if e.lease_expired else ()
        for job in running:
            i = job.index
            ran = now - job.started_at
            ct = job.compute_time
            busy = ct + job.comm_time
            npre = job.preemptions
            att = e.attained_service(job)
            if clair:
                left = e.remaining_iterations(job)
                it = job.iterations
                prog = 1.0 - left / it if it > 0 else 1.0
                # (its time on its GPU type; x 1.0 untyped keeps every bit)
                rem = left * job.t_compute * job.tfac / job.gpus
                rem = rem / (rem + T)
            else:
                prog = rem = 0.0
            buf += static_r[i]
            buf += _ONE_HOT[job.level]  # pyright: ignore[reportCallIssue, reportArgumentType]
            buf += (
                1.0 - job.t_compute * job.tfac / job.t_iter,
                ct / busy if busy > 0 else 0.0,
                ran / (ran + T),
                _F[job.busy_until > now],
                _F[i in expired],
                npre / (npre + 1.0),
                att / (att + T),
                prog,
                rem,
            )
        n_run = len(running)
        for _ in range(M - n_run):
            buf += self._zero_r
        # A job started at this instant cannot be preempted at it: that only
        # pays the checkpoint and would let a policy loop place/preempt
        # forever without time passing.
        m += [job.started_at < now for job in running]
        m += [False] * (M - n_run)
        if done:
            m[0] = True
        if typed is None:
            self.mask = np.fromiter(m, dtype=bool, count=self.n_actions)
        else:  # typed place actions after the untyped ones; empty rows False
            mask = np.zeros(self.n_actions, dtype=bool)
            mask[: len(m)] = m
            mask[len(m) : len(m) + len(typed_m)] = typed_m
            self.mask = mask
        self.has_choice = any(m[1:])

        # global
        n_pending = len(pending)
        n_all = len(e.running)
        # jobs seen so far (done, running or waiting): never the episode's total,
        # which would count jobs that have not arrived yet
        n_seen = e.n_done + n_pending + n_all
        queue_gpus = sum(j.gpus for j in pending) if n_pending else 0
        num_gpus = e.cluster.num_gpus
        elapsed = now - self.start
        H = cfg.horizon_s
        buf += (
            1.0 - total * self._inv_n,
            e.background,
            n_pending / (n_pending + K),
            queue_gpus / (queue_gpus + num_gpus),
            n_all / (n_all + max(1, M)),
            e.n_done / n_seen if n_seen else 1.0,
            elapsed / (elapsed + H),
            (now % 86400.0) / 86400.0,
            max_free * self._inv_g,
            max_rack * inv_rack,
            1.0 if e.lease_expired else 0.0,
        )
        if typed is None:
            flat = np.fromiter(buf, dtype=np.float32, count=self._size)
        else:
            base = np.fromiter(buf, dtype=np.float32, count=len(buf))
            flat = np.concatenate((base, typed.block(typed_p, running, K, M)))
        self.obs = {key: flat[a:b].reshape(shape) for key, a, b, shape in self._layout}

    def observation(self) -> dict[str, np.ndarray]:
        return self.obs


def typed_keys(K: int, M: int) -> list[tuple[str, tuple[int, ...]]]:
    """The Dict observation's typed keys and shapes (the typed layout)."""
    return [
        ("pending_types", (K, MAX_TYPES, len(TYPE_PENDING_FIELDS))),
        ("running_types", (M, len(TYPE_RUNNING_FIELDS))),
        ("types", (MAX_TYPES, len(TYPE_GLOBAL_FIELDS))),
    ]


_ONE_HOT = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
_F = (0.0, 1.0)  # bool -> float


def _gpus_key(job: Job) -> int:
    return job.gpus


def _attained_key(job: Job) -> float:
    return job.attained
