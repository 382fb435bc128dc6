"""Exact event-driven simulation of a GPU cluster running DDL jobs.

Time is continuous (seconds); nothing happens between events. Events, in the
order they are handled when they fall at the same instant:

``COMPLETION`` < ``CONGESTION`` (background traffic changes) < ``ARRIVAL`` <
``LEASE`` (a running job's lease expires) < ``WAKE`` (a policy's timer) <
``TICK`` (periodic, while jobs wait).

After all events of an instant are handled the engine stops at a *decision
point*: a policy applies actions (``place``, ``preempt``) one at a time, then
``advance()`` (the ``Wait`` action) moves time to the next event. A policy
may ``hint`` (``LeaseHints``, ``engine/hints.py``) which wake-ups and, with
lazy leases, which lease boundaries can change nothing for it: those make no
decision point. The engine asks the hints' tests without knowing what they
mean; the lease side lives in ``engine/leases.py`` (``LeaseSkipper``).

A running job makes ``gpus / t_iter`` iterations of single-GPU work per second
(linear scaling, as in the seed), where ``t_iter`` comes from the performance
model and changes only at events: when a job that crosses racks starts or
stops, the jobs sharing its rack uplinks are re-rated, and when the
background congestion changes, every cross-rack job is. A preempted job pays
``restore_s_per_gpu * gpus`` seconds without progress when it next starts
(checkpoint and restore; the seed charges 1 s per GPU).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from ddl_gym.engine.actions import Action, InvalidAction, Place, Preempt, Wait
from ddl_gym.engine.gcpause import cyclic_gc_paused
from ddl_gym.engine.hints import NO_HINTS, LeaseHints, asked_at
from ddl_gym.engine.job import Job, Status
from ddl_gym.engine.leases import LeaseSkipper
from ddl_gym.engine.metrics import Result, build_result
from ddl_gym.engine.packer import FreeIndex, find_placement_units
from ddl_gym.engine.pending import PendingQueue
from ddl_gym.engine.perf_source import SlowdownSource, check_perf_source
from ddl_gym.engine.typed import TypePools
from ddl_gym.perf import Level, PerfModel, Shape, shape_of
from ddl_gym.profiles import get_profile
from ddl_gym.topology import Cluster, Congestion, get_cluster, get_congestion
from ddl_gym.traces import Trace, check_fits, validate

if TYPE_CHECKING:
    from ddl_gym.llm.engine_model import LLMPerf
    from ddl_gym.llm.layout import Layout

COMPLETION, CONGESTION, ARRIVAL, LEASE, WAKE, TICK = range(6)
# (module constants: an enum member's lookup costs more in the hot loops)
_PENDING, _RUNNING = Status.PENDING, Status.RUNNING
EVENT_NAMES = ("completion", "congestion", "arrival", "lease", "wake", "tick")


def later(t: float, dt: float) -> float:
    """``t + dt``, but strictly after ``t`` even when ``dt`` is below the
    resolution of ``t`` (a tiny lease late in a long run): a timer that
    re-arms itself at the same instant would loop for ever."""
    out = t + dt
    return out if out > t else math.nextafter(t, math.inf)


class StalledError(RuntimeError):
    """Jobs wait but nothing can ever happen again (the policy never places)."""


def as_trace(trace: Trace | pd.DataFrame) -> Trace:
    """A ``Trace``; a bare DataFrame is validated against the schema first."""
    if isinstance(trace, Trace):
        return trace
    if isinstance(trace, pd.DataFrame):
        return Trace(name="dataframe", jobs=validate(trace, "<DataFrame>"))
    raise TypeError(f"expected a Trace or a DataFrame, got {type(trace).__name__}")


def _strings(column: pd.Series) -> list[str]:
    """The column as Python strings (``tolist`` of a string column is one C
    call; iterating an Arrow-backed one is element by element)."""
    values = column.tolist()
    if all(type(x) is str for x in values):
        return values
    return [str(x) for x in values]


class Engine:
    """The simulator. Build one per run; ``reset()`` starts it over.

    Args:
        trace: a ``Trace`` or a DataFrame in the trace schema.
        cluster: a ``Cluster`` or the name of a cluster preset.
        congestion: background traffic on rack uplinks: a preset name
            (``none``, ``moderate``, ``heavy``, ``diurnal``), a fraction or a
            ``Congestion``.
        lease_s: GPU lease length; each running job's lease expires every
            ``lease_s`` seconds of running, a decision point at which policies
            may preempt it (``None``: no leases).
        tick_s: a decision point every ``tick_s`` seconds while jobs wait
            (``None``: only at events).
        restore_s_per_gpu: preemption cost, paid at the next start.
        clairvoyant: whether policies may read remaining work (default False:
            what a real scheduler knows; the oracle SJF/SRTF ask for it).
        record_series: keep the cluster time series (utilisation, queue):
            one row per decision point.
        record_placements: keep the placement history (one row per server
            of every finished placement). Turn both off for long runs whose
            summary and per-job table are all that is needed.
        lazy_leases: report a lease expiry only at an instant where, after
            the instant's other events, some job waits; instants where only
            leases expire and nobody waits are skipped. For policies that act on
            an expiry only when a job waits (Dally): same results, a fraction
            of the events; such a policy may also ``hint`` (``LeaseHints``)
            which boundaries can matter to it (``engine/leases.py``'s
            ``LeaseSkipper`` passes over the rest). Off by default: a policy
            may act on any expiry.
        perf_source: ``closed_form`` (our ``PerfModel``, with contention and
            congestion) or a per-placement slowdown table
            (:class:`~ddl_gym.engine.perf_source.SlowdownSource`, e.g. the
            seed authors' ``ddl_gym.seed.SlowdownTable.load()``; no
            contention, and slots filled whole since the engine tracks GPU
            counts, not GPUs).
        contention: cross-rack jobs share rack uplinks (False: each job
            sees a whole uplink, as in the seed's model).
        llm_split_tp: let an LLM job's TP group span servers (default
            False: every server's share of an LLM job is a multiple of its
            TP size, ``packer.find_placement_units``).
        llm_gpu: the GPUs of an untyped cluster as the LLM model sees them
            (a ``ddl_gym.llm.PEAK_FLOPS`` name; default the calibrated A100).

    LLM jobs (a trace's ``layout`` column, docs/llm.md) run ``iterations``
    training iterations of their layout; their iteration time comes from
    ``ddl_gym.llm`` under the placement's shape (``llm/engine_model.py``),
    their ``iter_time_s`` is not read. Jobs without a layout are unchanged.

    On a typed cluster (``Cluster.gpu_kinds``) jobs run on the GPU types
    they accept, at each type's speed (``engine/typed.py``); ``Place`` may
    name the type. An untyped cluster ignores the trace's ``gpu_types``.
    """

    def __init__(
        self,
        trace,
        cluster: Cluster | str = "seed64",
        *,
        congestion: str | float | Congestion = "none",
        lease_s: float | None = None,
        tick_s: float | None = None,
        restore_s_per_gpu: float = 1.0,
        clairvoyant: bool = False,
        record_series: bool = True,
        perf_source: str | SlowdownSource = "closed_form",
        contention: bool = True,
        record_placements: bool = True,
        lazy_leases: bool = False,
        llm_split_tp: bool = False,
        llm_gpu: str = "A100-80GB",
    ) -> None:
        self.cluster = get_cluster(cluster)
        self.congestion = get_congestion(congestion)
        for name, value in (("lease_s", lease_s), ("tick_s", tick_s)):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive or None, got {value}")
        if restore_s_per_gpu < 0:
            raise ValueError(f"restore_s_per_gpu must be >= 0, got {restore_s_per_gpu}")
        self.lease_s = lease_s
        self.tick_s = tick_s
        self.restore_s_per_gpu = restore_s_per_gpu
        self.clairvoyant = clairvoyant
        self.record_series = record_series
        self.record_placements = record_placements
        self.lazy_leases = lazy_leases
        self.perf = PerfModel(self.cluster)
        self.contention = contention
        self.slowdown_source = check_perf_source(perf_source)
        self.trace = as_trace(trace)
        check_fits(self.trace, self.cluster.num_gpus)
        jobs = self.trace.jobs
        for model in set(jobs["model"]):
            get_profile(model)  # unknown models fail here, before the run
        self.types: TypePools | None = None
        if self.cluster.typed:
            if self.slowdown_source is not None:
                raise ValueError(
                    "a per-placement slowdown table (perf_source) knows no GPU types: "
                    "use the closed form on a typed cluster"
                )
            self.types = TypePools(self.cluster, self.perf, self.trace)
        # LLM jobs (docs/llm.md): each job's layout (None: data-parallel) and
        # the model of their iteration times; None when the trace has none
        self.llm_split_tp = llm_split_tp
        self.llm: LLMPerf | None = None
        self._layouts: list[Layout | None] | None = None
        if "layout" in jobs.columns and bool((jobs["layout"].astype(str) != "").any()):
            self._setup_llm(jobs, llm_gpu)
        # plain lists: the hot loop stays free of pandas
        self._columns = (
            _strings(jobs["job_id"]),
            jobs["arrival_s"].astype(float).tolist(),
            jobs["gpus"].astype(int).tolist(),
            _strings(jobs["model"]),
            jobs["iterations"].astype(float).tolist(),
            jobs["iter_time_s"].astype(float).tolist(),
        )
        self.reset()

    def _setup_llm(self, jobs: pd.DataFrame, gpu: str) -> None:
        from ddl_gym.llm.engine_model import LLMPerf
        from ddl_gym.llm.layout import parse_layout
        from ddl_gym.llm.shapes import SHAPES

        if self.cluster.typed:
            raise ValueError(
                "LLM jobs (a trace's layout column) on a typed cluster are not modelled yet: "
                "use an untyped cluster (its GPUs: the engine's llm_gpu)"
            )
        if self.slowdown_source is not None:
            raise ValueError("a per-placement slowdown table knows no LLM layouts (layout column)")
        layouts: list[Layout | None] = []
        for i, (job_id, model, gpus, text) in enumerate(
            zip(
                jobs["job_id"], jobs["model"], jobs["gpus"], jobs["layout"].astype(str), strict=True
            )
        ):
            if not text:
                layouts.append(None)
                continue
            if model not in SHAPES:
                raise ValueError(
                    f"job {job_id!r} (row {i + 1}): layout {text!r} needs a transformer of "
                    f"ddl_gym.llm.SHAPES, got model {model!r}"
                )
            try:
                layout = parse_layout(text, int(gpus))
            except ValueError as err:
                raise ValueError(f"job {job_id!r} (row {i + 1}): {err}") from None
            G = self.cluster.gpus_per_server
            if not self.llm_split_tp and (layout.tp > G or G % layout.tp):
                raise ValueError(
                    f"job {job_id!r} (row {i + 1}): layout {text!r}: a TP group of "
                    f"{layout.tp} GPUs does not fit whole in servers of {G} GPUs "
                    "(allow split TP groups with llm_split_tp=True)"
                )
            layouts.append(layout)
        self._layouts = layouts
        self.llm = LLMPerf(self.cluster, gpu)

    def _setup_llm_jobs(self) -> None:
        """LLM jobs' layout, placement unit, compute per iteration and work
        (``iterations`` training iterations = ``iterations * gpus`` of the
        engine's single-GPU units)."""
        llm = self.llm
        assert llm is not None and self._layouts is not None
        for job, layout in zip(self.jobs, self._layouts, strict=True):
            if layout is None:
                continue
            job.layout = layout
            job.unit = 1 if self.llm_split_tp else layout.tp
            job.t_compute = job.t_iter = llm.compute(job.model, layout)
            job.iterations = job.iterations * job.gpus

    # -- lifecycle ---------------------------------------------------------
    def reset(self) -> None:
        c = self.cluster
        ids, arrivals, gpus, models, iterations, t_compute = self._columns
        with cyclic_gc_paused():
            self.jobs: list[Job] = [
                Job(i, ids[i], arrivals[i], gpus[i], models[i], iterations[i], t_compute[i])
                for i in range(len(ids))
            ]
        if self._layouts is not None:
            self._setup_llm_jobs()
        self.now = min(arrivals) if arrivals else 0.0
        self.free = c.capacities()
        self.rack_free = c.rack_capacities()
        types = self.types
        if types is not None:
            types.setup_jobs(self.jobs)
            types.reset(self.free)
        self.total_free = c.num_gpus
        # the packer's index over ``free``/``rack_free`` (kept in step by _start/_stop)
        self.free_index = FreeIndex(
            self.free, self.rack_free, c.servers_per_rack, c.gpus_per_server
        )
        self.uplink_jobs: list[set[int]] = [set() for _ in range(c.racks)]
        # GPU moves so far (``_start``/``_stop``), and the last placement
        # ``placement_for`` found, with the move count it holds for
        self._moves = 0
        self._found: tuple[int, int, Level, tuple[tuple[int, int], ...]] | None = None
        # one-server shape and level per size (Shape is frozen: jobs share it)
        self._one_server_shapes: dict[int, tuple[Shape, Level]] = {}
        self.pending = PendingQueue()  # ordered by (arrival, index)
        self.running: dict[int, Job] = {}
        self.n_done = 0
        # placements a forgiven policy asked for and could not get (``forgives``)
        self.deferred = 0
        self.background = self.congestion.at(self.now)
        self._uplink_alpha = self.perf.uplink_latency(self.background)
        self._heap: list[tuple[float, int, int, int, int]] = []
        self._seq = 0
        self._compact_at = 4096
        # live completion events per time: a re-rate that leaves a job's
        # finish time as it was keeps its event unless another job's is due
        # at that very time (their order, by push, could then change)
        self._finishing: dict[float, int] = {}
        self._tick_at: float | None = None
        # the policy's hints (``hint``): its wake-up test, and the lease
        # boundaries the skipper passes over
        self.hints = NO_HINTS
        self.instant = 0  # counts event instants handled (decision points)
        self.lease_expired: list[Job] = []
        self._skipper = (
            LeaseSkipper(self.lease_s, self) if self.lazy_leases and self.lease_s else None
        )
        self.events_now: list[tuple[str, int]] = []
        self.series: list[tuple[float, int, int, int, float]] = []
        # (job index, server, GPUs, start, end) of every finished placement
        self.segments: list[tuple[int, int, int, float, float]] = []
        # Arrivals are fed to the heap one at a time, in the order they pop
        # (``_feed_arrival``): job i's entry is (arrival, ARRIVAL, i + 1, i, 0)
        # as if all had been pushed first, and the next one is in the heap
        # whenever any is left, so the heap's least entry is the least of all
        # and the events come in the same order, from a heap of live events
        # only (not one entry per job of the trace).
        self._arrival_order = sorted(range(len(arrivals)), key=lambda i: (arrivals[i], i))
        self._next_arrival = 0
        self._seq = len(self.jobs)
        self._feed_arrival()
        change = self.congestion.next_change(self.now)
        if change is not None:
            self._push(change, CONGESTION, -1)
        self._process_next_instant()

    def layout_of(self, job: Job) -> Layout | None:
        """``job``'s TP x PP x DP layout (None: data-parallel)."""
        layouts = self._layouts
        return None if layouts is None else layouts[job.index]

    def forgives(self, policy: object) -> bool:
        """Whether the run loops (``run_policy``, the env's heuristic
        rollout) let ``policy``'s placements this engine cannot make end its
        turn instead of failing: the engine has constraints free GPU counts
        do not show (GPU types; LLM jobs' whole TP groups per server) and the
        policy does not declare it knows them (a true ``type_aware``)."""
        constrained = self.types is not None or (self.llm is not None and not self.llm_split_tp)
        return constrained and not getattr(policy, "type_aware", False)

    @property
    def done(self) -> bool:
        return self.n_done == len(self.jobs)

    # -- events ------------------------------------------------------------
    def _feed_arrival(self) -> None:
        """Push the next arrival's entry, if any is left (see ``reset``)."""
        k = self._next_arrival
        order = self._arrival_order
        if k < len(order):
            j = order[k]
            self._next_arrival = k + 1
            heapq.heappush(self._heap, (self.jobs[j].arrival, ARRIVAL, j + 1, j, 0))

    def _push(self, t: float, kind: int, job: int, version: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, job, version))
        if len(self._heap) > self._compact_at:
            self._compact()

    def _stale(self, kind: int, t: float, j: int, version: int) -> bool:
        """Whether a heap entry can no longer make an event (the test of
        ``_drop_stale`` and of the instant loop): a completion or lease of a
        job re-rated, stopped or re-leased since (versions only grow), or a
        tick replaced. Congestion changes and wake-ups always count."""
        if kind == COMPLETION or kind == LEASE:
            job = self.jobs[j]
            current = job.version if kind == COMPLETION else job.lease_version
            return job.status != _RUNNING or version != current
        if kind == TICK:
            return t != self._tick_at
        return False

    def _compact(self) -> None:
        """Drop the stale entries from the event heap (every re-rate leaves
        one behind; at scale they outnumber the live ones and slow every
        push and pop). The entries are totally ordered (unique sequence
        numbers), so the events come in the same order as before."""
        stale = self._stale
        heap = self._heap  # in place: the instant loop holds this list
        heap[:] = [e for e in heap if not stale(e[1], e[0], e[3], e[4])]
        heapq.heapify(heap)
        self._compact_at = max(4096, 2 * len(heap))

    def next_event_time(self) -> float | None:
        self._drop_stale()
        t = self._heap[0][0] if self._heap else None
        if self._skipper is not None and self.pending:
            lease_t = self._skipper.next_after(self.now)
            if lease_t is not None and (t is None or lease_t < t):
                t = lease_t
        return t

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap:
            t, kind, _, j, version = heap[0]
            if kind == COMPLETION or kind == LEASE:
                job = self.jobs[j]
                current = job.version if kind == COMPLETION else job.lease_version
                if job.status != _RUNNING or version != current:
                    heapq.heappop(heap)
                    continue
            elif kind == TICK and t != self._tick_at:
                heapq.heappop(heap)
                continue
            elif kind == CONGESTION and self.done:
                heapq.heappop(heap)
                continue
            break

    def advance(self) -> bool:
        """The ``Wait`` action: handle every event of the next instant.

        Returns False when nothing is left to happen (all jobs done). Raises
        ``StalledError`` when jobs wait and no event can ever come.
        """
        if self.done:
            return False
        self._drop_stale()
        if not self._heap:
            if self.tick_s is None:
                raise StalledError(
                    f"t={self.now:.6g}s: {len(self.pending)} job(s) wait, none runs and no "
                    "event is due: the policy waited where it had to place"
                )
            self._schedule_tick(force=True)
        self._process_next_instant()
        return True

    def _process_next_instant(self) -> None:
        self.lease_expired = []
        self.events_now = []
        self.instant += 1
        skipper = self._skipper
        heap = self._heap
        while True:
            self._drop_stale()
            heap_t = heap[0][0] if heap else math.inf
            lease_t = None
            if skipper and self.pending:
                # the decision point is over: the policy's hints and the free
                # count hold until the next other event
                lease_t = skipper.next_after(self.now, heap_t)
            if not heap and lease_t is None:
                return
            t = heap_t
            if lease_t is not None and lease_t < t:
                t = lease_t
            if t < self.now:
                raise AssertionError(f"time went back: {t} < {self.now}")
            if not (self.hints.wake_matters and heap_t == t and self._skip_wakes(t)):
                break
        self.now = t
        while heap and heap[0][0] == t:
            _, kind, seq, j, version = heapq.heappop(heap)
            if kind == COMPLETION:
                job = self.jobs[j]
                if job.status == _RUNNING and version == job.version:
                    self._complete(job)
            elif kind == ARRIVAL:
                job = self.jobs[j]
                job.status = _PENDING
                job.queued_since = t
                self._enqueue(job)
                self.events_now.append(("arrival", j))
                self._feed_arrival()
            elif kind == LEASE:
                job = self.jobs[j]
                if job.status == _RUNNING and version == job.lease_version:
                    self.lease_expired.append(job)
                    self.events_now.append(("lease", j))
                    job.lease_version += 1
                    # (lease events exist only with lease_s set)
                    self._push(later(t, self.lease_s), LEASE, j, job.lease_version)  # pyright: ignore[reportArgumentType]
            elif kind == CONGESTION:
                self._set_background(self.congestion.at(t))
                change = self.congestion.next_change(t)
                if change is not None:
                    self._push(change, CONGESTION, -1)
                self.events_now.append(("congestion", -1))
            elif kind == WAKE:
                self.events_now.append(("wake", j))
            elif kind == TICK:
                if t == self._tick_at:
                    self._tick_at = None
                    self.events_now.append(("tick", -1))
        if skipper and self.pending:
            self._report_lazy_leases(t)
        self._schedule_tick()
        if self.record_series:
            self._record()

    def _report_lazy_leases(self, t: float) -> None:
        """Lazy leases: the expiries at ``t``, a job waiting; their events go
        where the eager engine puts them (after arrivals, before wake-ups)."""
        # (called only with a skipper)
        expired = self._skipper.expire_at(t)  # pyright: ignore[reportOptionalMemberAccess]
        if not expired:
            return
        self.lease_expired = expired
        events = self.events_now
        at = len(events)
        while at and events[at - 1][0] in ("wake", "tick"):
            at -= 1
        events[at:at] = [("lease", job.index) for job in expired]

    def _schedule_tick(self, force: bool = False) -> None:
        if self.tick_s is None or self._tick_at is not None:
            return
        if self.pending or force:
            self._tick_at = later(self.now, self.tick_s)
            self._push(self._tick_at, TICK, -1)

    def wake_at(self, t: float) -> None:
        """Ask for a decision point at time ``t`` (a policy's timer; the
        hints' ``wake_matters`` may drop it, see ``_skip_wakes``)."""
        if not t > self.now:
            raise InvalidAction(f"wake-up time {t} is not after now ({self.now})")
        self._push(t, WAKE, -1)

    def hint(self, hints: LeaseHints) -> None:
        """The policy's ``LeaseHints``, until its next: the wake-up test, and
        (with lazy leases) the lease boundaries the skipper passes over."""
        self.hints = hints
        if self._skipper is not None:
            self._skipper.hint(hints)

    def _skip_wakes(self, t: float) -> bool:
        """Whether the next instant, at ``t``, holds only wake-ups, no lease
        boundary the skipper keeps, and the hints' ``wake_matters``, asked at
        ``t``, says they change nothing; then they are dropped and time moves
        to ``t`` without an instant."""
        heap = self._heap
        if heap[0][1] != WAKE:
            return False  # (the common case, an arrival or completion: no pop)
        entries = []
        while heap and heap[0][0] == t:
            entry = heapq.heappop(heap)
            entries.append(entry)
            if entry[1] != WAKE:
                for e in entries:
                    heapq.heappush(heap, e)
                return False
        # every lease boundary at ``t`` (kept by the hints or not: an instant
        # reports them all) must be one the hints pass over
        skipper = self._skipper
        # (called only when the hints have a ``wake_matters``)
        if (skipper and self.pending and not skipper.passes_over(t)) or asked_at(
            self,
            t,
            self.hints.wake_matters,  # pyright: ignore[reportArgumentType]
        ):
            for e in entries:
                heapq.heappush(heap, e)
            return False
        return True

    def _record(self) -> None:
        used = self.cluster.num_gpus - self.total_free
        self.series.append((self.now, used, len(self.pending), len(self.running), self.background))

    # -- queue -------------------------------------------------------------
    def _enqueue(self, job: Job) -> None:
        self.pending.add(job)

    def _dequeue(self, job: Job) -> None:
        self.pending.remove(job)

    # -- progress and rates ------------------------------------------------
    def _settle(self, job: Job) -> None:
        """Bring a running job's progress and accounting up to now."""
        now = self.now
        start = job.last_update
        if job.busy_until > start:
            upto = min(now, job.busy_until)
            job.overhead_time += upto - start
            start = upto
        dt = now - start
        if dt > 0:
            job.progress = min(job.iterations, job.progress + job.rate * dt)
            # (x * 1.0 is x: untyped runs keep every bit)
            job.compute_time += dt * job.t_compute * job.tfac / job.t_iter
            job.comm_time += dt * job.exposed / job.t_iter
        job.last_update = now

    def _rate(self, job: Job) -> None:
        """Recompute a running job's iteration time and its completion event."""
        if job.layout is not None:
            self._rate_llm(job)
            return
        shape: Shape = job.shape  # pyright: ignore[reportAssignmentType]  (running: has a shape)
        perf = job.perf or self.perf  # (typed clusters: the GPU link of its type)
        t_compute = job.t_compute * job.tfac  # (its time on its GPU type; x 1.0 untyped)
        if self.slowdown_source is not None:
            ar = 0.0  # unused: the table gives the slowdown directly
        elif shape.r > 1:
            job.uplink = bw, alpha = self._uplink(job)
            ar = perf.allreduce_time(job.model, shape, bw, alpha)
        else:
            ar = perf.allreduce_time(job.model, shape)
        if self.slowdown_source is not None:
            exposed = t_compute * (self._table_slowdown(job) - 1.0)
        else:
            exposed = perf.exposed_comm(job.model, t_compute, ar)
        job.exposed = exposed
        job.t_iter = t_compute * job.straggle + exposed
        job.rate = job.gpus / job.t_iter
        self._renew(job)

    def _rate_llm(self, job: Job) -> None:
        """``_rate`` of an LLM job: its exposed communication from the LLM
        model on its placement's shape and uplink share."""
        shape: Shape = job.shape  # pyright: ignore[reportAssignmentType]  (running: has a shape)
        llm: LLMPerf = self.llm  # pyright: ignore[reportAssignmentType]  (a layout: a model)
        layout: Layout = job.layout  # pyright: ignore[reportAssignmentType]
        if shape.r > 1:
            job.uplink = bw, alpha = self._uplink(job)
            exposed = llm.exposed(job.model, layout, shape, bw, alpha)
        else:
            exposed = llm.exposed(job.model, layout, shape)
        job.exposed = exposed
        job.t_iter = job.t_compute * job.straggle + exposed
        job.rate = job.gpus / job.t_iter
        self._renew(job)

    def _uplink(self, job: Job) -> tuple[float, float]:
        """(bandwidth, latency) a cross-rack job gets on its uplinks now."""
        busiest = 1
        if self.contention:
            # the share falls with the count: the busiest uplink's is the least
            uplinks = self.uplink_jobs
            for r in job.racks:
                n = len(uplinks[r])
                if n > busiest:
                    busiest = n
        return self.perf.uplink_share(self.background, busiest), self._uplink_alpha

    def _renew(self, job: Job) -> None:
        """A running job's completion event (and efficiency bound) from its
        iteration time and its progress settled to now. The event stands if
        its time did not move (most re-rates of an unchanged rate) and no
        other job's is due at that very time; else a new one replaces it."""
        if self._skipper is not None:
            self._skipper.rated(job)
        begin = max(self.now, job.busy_until)
        finish = begin + (job.iterations - job.progress) / job.rate
        if finish != job.finish or self._finishing[finish] != 1:
            self._push_finish(job, finish)

    def _push_finish(self, job: Job, finish: float) -> None:
        """A fresh completion event of a running job at ``finish`` (its
        older one goes stale)."""
        if finish != job.finish:
            if job.finish == job.finish:  # (not nan: it had one)
                self._uncount_finish(job.finish)
            self._finishing[finish] = self._finishing.get(finish, 0) + 1
            job.finish = finish
        job.version += 1
        self._push(finish, COMPLETION, job.index, job.version)

    def _drop_finish(self, job: Job) -> None:
        """The job stopped: its completion event goes stale."""
        job.version += 1
        self._uncount_finish(job.finish)
        job.finish = math.nan

    def _uncount_finish(self, t: float) -> None:
        """One live completion event at ``t`` fewer."""
        n = self._finishing[t]
        if n == 1:
            del self._finishing[t]
        else:
            self._finishing[t] = n - 1

    def _table_slowdown(self, job: Job) -> float:
        source = self.slowdown_source
        # (called only with a slowdown table)
        return source.placement_slowdown(  # pyright: ignore[reportOptionalMemberAccess]
            job.model, job.placement, self.cluster.servers_per_rack
        )

    def _rerate_uplinks(self, racks: Sequence[int], skip: int = -1) -> None:
        """Re-rate the cross-rack jobs on ``racks``' uplinks (one started or
        stopped there). Every one is settled and its finish time computed
        again (a new event only if that moved, see ``_renew``); only one whose
        uplink bandwidth or latency changed has its iteration time recomputed
        (with the seed's table it never depends on them). The uplink test is
        ``_uplink`` inlined, the share computed once per busiest-uplink count:
        at scale this loop is a large part of every policy's run."""
        uplink_jobs = self.uplink_jobs
        affected: set[int] = set()
        for r in racks:
            affected |= uplink_jobs[r]
        affected.discard(skip)
        if not affected:
            return
        jobs = self.jobs
        table = self.slowdown_source is not None
        contention = self.contention
        share = self.perf.uplink_share
        background = self.background
        alpha = self._uplink_alpha
        share_of: dict[int, float] = {}  # busiest-uplink count -> bandwidth
        now = self.now
        skipper = self._skipper
        finishing = self._finishing
        for j in sorted(affected):  # sorted: same event order on every run
            job = jobs[j]
            # ``_settle`` inlined (the same float operations): at scale a
            # start across racks re-rates hundreds of jobs
            start = job.last_update
            busy = job.busy_until
            if busy > start:
                upto = min(now, busy)
                job.overhead_time += upto - start
                start = upto
            dt = now - start
            if dt > 0:
                job.progress = min(job.iterations, job.progress + job.rate * dt)
                job.compute_time += dt * job.t_compute * job.tfac / job.t_iter
                job.comm_time += dt * job.exposed / job.t_iter
            job.last_update = now
            if not table:
                # the uplink it gets now (as ``_uplink``, the share cached)
                busiest = 1
                if contention:
                    for r in job.racks:
                        n = len(uplink_jobs[r])
                        if n > busiest:
                            busiest = n
                bw = share_of.get(busiest)
                if bw is None:
                    bw = share_of[busiest] = share(background, busiest)
                uplink = job.uplink
                if uplink is None or uplink[0] != bw or uplink[1] != alpha:
                    self._rate(job)
                    continue
            # same iteration time: ``_renew`` inlined
            if skipper is not None:
                skipper.rated(job)
            busy = job.busy_until
            finish = (now if now >= busy else busy) + (job.iterations - job.progress) / job.rate
            if finish != job.finish or finishing[finish] != 1:
                self._push_finish(job, finish)

    def _set_background(self, fraction: float) -> None:
        if fraction == self.background:
            return
        for j in sorted(self.running):
            job = self.jobs[j]
            if job.shape.r > 1:  # pyright: ignore[reportOptionalMemberAccess]  (running: has a shape)
                self._settle(job)
        self.background = fraction
        self._uplink_alpha = self.perf.uplink_latency(fraction)
        for j in sorted(self.running):
            job = self.jobs[j]
            if job.shape.r > 1:  # pyright: ignore[reportOptionalMemberAccess]  (running: has a shape)
                self._rate(job)

    # -- actions -----------------------------------------------------------
    def placement_for(
        self, job: Job, level: Level, gpu_type: int | None = None
    ) -> list[tuple[int, int]] | None:
        """The placement ``place`` would give ``job`` within ``level`` (on GPU
        type ``gpu_type``, an index into ``cluster.gpu_kinds``; None: the
        engine's choice), or None."""
        if job.gpus > self.total_free:
            return None
        types = self.types
        if types is None:
            if gpu_type is not None:
                raise ValueError(f"gpu_type {gpu_type!r} given on an untyped cluster")
            if job.unit > 1:  # an LLM job: whole TP groups per server (not cached)
                c = self.cluster
                return find_placement_units(
                    self.free, c.servers_per_rack, c.gpus_per_server, job.gpus, level, job.unit
                )
            placement = self.free_index.find(job.gpus, level)
            if placement is not None:
                # a policy places what it just looked up: ``place`` takes it from
                # here while no GPU moved (a copy: the caller owns the list)
                self._found = (self._moves, job.gpus, level, tuple(placement))
            return placement
        if gpu_type is not None and types.why_not_kind(job, gpu_type) is not None:
            return None
        return types.find(job, level, gpu_type, self.free_index)

    def _why_not_place(
        self, index: int, level, gpu_type: int | None = None
    ) -> tuple[str | None, Sequence[tuple[int, int]] | None]:
        """(reason it is invalid or None, the placement it would get): one
        of the two is None."""
        if not 0 <= index < len(self.jobs):
            return f"no job {index}", None
        job = self.jobs[index]
        if job.status != _PENDING:
            return f"job {job.job_id} is {job.status.name.lower()}, not pending", None
        if type(level) is not Level:  # (the enum's call costs more than the test)
            try:
                level = Level(level)
            except ValueError:
                return f"unknown level {level!r}", None
        types = self.types
        if types is not None:
            if gpu_type is not None:
                reason = types.why_not_kind(job, gpu_type)
                if reason is not None:
                    return reason, None
            placement = self.placement_for(job, level, gpu_type)
            if placement is None:
                on = f" on {types.names[gpu_type]}" if gpu_type is not None else ""
                return (
                    f"no free placement for job {job.job_id} ({job.gpus} GPUs){on} within "
                    f"one {level.name.lower()}"
                ), None
            return None, placement
        if gpu_type is not None:
            return f"gpu_type {gpu_type!r} given on an untyped cluster", None
        found = self._found
        if (
            found is not None
            and found[0] == self._moves
            and found[1] == job.gpus
            and found[2] == level
            and job.unit == 1
        ):
            return None, found[3]
        placement = self.placement_for(job, level)
        if placement is None:
            return (
                f"no free placement for job {job.job_id} ({job.gpus} GPUs) within one "
                f"{level.name.lower()}"
            ), None
        return None, placement

    def _why_not_preempt(self, index: int) -> str | None:
        if not 0 <= index < len(self.jobs):
            return f"no job {index}"
        job = self.jobs[index]
        if job.status != _RUNNING:
            return f"job {job.job_id} is {job.status.name.lower()}, not running"
        return None

    def check(self, action: Action) -> str | None:
        """Why ``action`` is invalid now, or None if it is valid."""
        if isinstance(action, Wait):
            return None
        if isinstance(action, Place):
            return self._why_not_place(action.job, action.level, action.gpu_type)[0]
        if isinstance(action, Preempt):
            return self._why_not_preempt(action.job)
        return f"not an action: {action!r}"

    def apply(self, action: Action) -> None:
        """Apply one action; raise ``InvalidAction`` (state untouched) if invalid.

        ``Wait`` is ``advance()``.
        """
        if isinstance(action, Wait):
            self.advance()
        elif isinstance(action, Place):
            self.place(action.job, action.level, action.gpu_type)
        elif isinstance(action, Preempt):
            self.preempt(action.job)
        else:
            raise InvalidAction(f"not an action: {action!r}")

    def place(
        self, index: int, level: Level = Level.NETWORK, gpu_type: int | None = None
    ) -> tuple[tuple[int, int], ...]:
        """Start pending job ``index`` within ``level`` (on GPU type index
        ``gpu_type`` of a typed cluster; None: the engine's choice); returns
        its placement."""
        reason, placement = self._why_not_place(index, level, gpu_type)
        if placement is None:  # (exactly when there is a reason)
            raise InvalidAction(reason)
        job = self.jobs[index]
        self._start(job, tuple(placement))
        return job.placement

    def _start(self, job: Job, placement: tuple[tuple[int, int], ...]) -> None:
        c = self.cluster
        now = self.now
        S = c.servers_per_rack
        free = self.free
        move = self.free_index.move
        types = self.types
        for server, g in placement:
            move(server, free[server], free[server] - g)
            if types is not None:
                types.moved(server, free[server], free[server] - g)
            free[server] -= g
            self.rack_free[server // S] -= g
        self._moves += 1
        self.total_free -= job.gpus
        self._dequeue(job)
        job.status = _RUNNING
        job.placement = placement
        if len(placement) == 1:  # one server (most starts): its shape by size
            server, g = placement[0]
            known = self._one_server_shapes.get(g)
            if known is None:
                shape = shape_of(placement, S)
                known = self._one_server_shapes[g] = (shape, shape.level)
            shape, level = known
            job.racks = (server // S,)
        else:
            shape = shape_of(placement, S)
            level = shape.level
            job.racks = tuple(sorted({s // S for s, _ in placement}))
        job.shape = shape
        job.level = level
        job.queued_time += now - job.queued_since
        if math.isnan(job.first_start):
            job.first_start = now
        job.started_at = now
        job.last_update = now
        job.busy_until = now + job.restore_debt
        job.restore_debt = 0.0
        job.starts_per_level[level] += 1
        if types is not None:
            types.started(job, placement)
        stragglers = c.stragglers
        if stragglers.enabled:
            job.straggle = stragglers.gang_factor(job.gpus, job.index, sum(job.starts_per_level))
        self.running[job.index] = job
        if shape.r > 1:
            for r in job.racks:
                self.uplink_jobs[r].add(job.index)
            self._rerate_uplinks(job.racks, skip=job.index)
        self._rate(job)
        if self.lease_s is not None:
            job.lease_version += 1
            if self._skipper is not None:
                self._skipper.start(job, now)
            else:
                self._push(later(now, self.lease_s), LEASE, job.index, job.lease_version)

    def _stop(self, job: Job) -> None:
        self._settle(job)
        S = self.cluster.servers_per_rack
        free = self.free
        move = self.free_index.move
        types = self.types
        for server, g in job.placement:
            move(server, free[server], free[server] + g)
            if types is not None:
                types.moved(server, free[server], free[server] + g)
            free[server] += g
            self.rack_free[server // S] += g
        self._moves += 1
        self.total_free += job.gpus
        held = self.now - job.started_at
        if types is not None:
            types.stopped(job, held)
        if self.record_placements:
            for server, g in job.placement:
                self.segments.append((job.index, server, g, job.started_at, self.now))
        job.run_time += held
        job.attained += held * job.gpus
        del self.running[job.index]
        self._drop_finish(job)
        job.lease_version += 1
        if self._skipper is not None:
            self._skipper.stop(job)
        if job.shape.r > 1:  # pyright: ignore[reportOptionalMemberAccess]  (it ran: has a shape)
            for r in job.racks:
                self.uplink_jobs[r].discard(job.index)
            self._rerate_uplinks(job.racks)

    def preempt(self, index: int) -> None:
        """Checkpoint running job ``index`` and put it back in the queue."""
        reason = self._why_not_preempt(index)
        if reason is not None:
            raise InvalidAction(reason)
        job = self.jobs[index]
        self._stop(job)
        # a restore debt not yet paid is still owed, on top of this checkpoint
        unpaid = max(0.0, job.busy_until - self.now)
        job.restore_debt = unpaid + self.restore_s_per_gpu * job.gpus
        job.status = _PENDING
        job.queued_since = self.now
        job.preemptions += 1
        job.placement = ()
        job.rate = 0.0
        self._enqueue(job)

    def _complete(self, job: Job) -> None:
        self._stop(job)
        job.progress = job.iterations
        job.status = Status.DONE
        job.end = self.now
        self.n_done += 1
        self.events_now.append(("completion", job.index))

    # -- queries -----------------------------------------------------------
    def remaining_iterations(self, job: Job) -> float:
        """Iterations left, as of now."""
        if job.status == _RUNNING:
            start = max(job.last_update, job.busy_until)
            return max(0.0, job.iterations - job.progress - job.rate * max(0.0, self.now - start))
        return job.iterations - job.progress

    def attained_service(self, job: Job) -> float:
        """GPU-seconds the job has held so far, its running segment included."""
        if job.status == _RUNNING:
            return job.attained + job.gpus * (self.now - job.started_at)
        return job.attained

    def efficiency(self, job: Job) -> float:
        """``job.efficiency`` as of now: time-averaged compute / (compute +
        exposed communication), the unsettled running segment included; 0 for
        a job that never computed (new jobs come first, as in the seed)."""
        return self.efficiencies((job,))[0]

    def efficiencies(self, jobs: Iterable[Job]) -> list[float]:
        """``efficiency`` of each of ``jobs``, in order (one call for the
        several jobs a re-offer ranks)."""
        now = self.now
        out = []
        for job in jobs:
            compute = job.compute_time
            comm = job.comm_time
            if job.status == _RUNNING:
                last = job.last_update
                busy = job.busy_until
                dt = now - (busy if busy > last else last)
                if dt > 0:
                    compute += dt * job.t_compute * job.tfac / job.t_iter
                    comm += dt * job.exposed / job.t_iter
            busy = compute + comm
            out.append(compute / busy if busy > 0 else 0.0)
        return out

    def result(self) -> Result:
        with cyclic_gc_paused():
            return build_result(self)
