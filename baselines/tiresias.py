"""Tiresias: discretised two-dimensional least-attained-service (2D-LAS).

Sources: Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep
Learning", NSDI'19 (2D-LAS, discretised priority queues, FIFO inside a
queue, starvation promotion), and the seed paper's use of it as a baseline
(models classed as consolidation-sensitive or not; sensitive ones never
placed across racks unless larger than a rack). Our choices where those
leave a number open:

* scheduling: a job's attained service is GPUs x time held (2D). Queue ``k``
  holds jobs whose attained service (since their last promotion) lies in
  ``[thresholds[k-1], thresholds[k])``; defaults 1 and 10 GPU-hours (three
  queues, a decade apart). Lower queue first, arrival order inside a queue.
  A running job crossing a threshold is demoted at that instant (the policy
  asks for a wake-up there) and may be preempted by a waiting job of a
  higher queue, as Tiresias does.
* starvation: a preempted job that has waited ``starve_factor`` times its
  executed time (at least ``starve_min_s``) is promoted to the top queue
  (its attained-service count restarts from there). Defaults 2x and 1 h.
* placement: a model is *consolidation-sensitive* for a job size when the
  performance model predicts it runs more than ``sensitivity`` (default
  2.0) times slower across racks than at its tightest level (uncongested
  network, i.e. a property of the model as in the seed, not of the moment).
  On the seed fabric this classes ResNet50 and VGG11 (1.6x across racks) as
  insensitive and ResNet18, MobileNetV3, BERT and AlexNet as sensitive, the
  split the seed's calibration numbers suggest.
  Sensitive jobs accept at most a one-rack placement unless larger than a
  rack; insensitive jobs take the tightest placement at any level.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ddl_gym.engine import WAIT, Action, EngineView, Job, Place, Preempt, Status, Wait
from ddl_gym.perf import Level

from .common import EPS, BasePolicy, PriorityPreemptive, WakeUps, size_level, victims_for

HOUR = 3600.0
_INF_KEY = (math.inf, 0.0)  # ``RackReach``: the rack holds the demand as it is


class RackReach:
    """Which racks a waiting job could empty enough by preempting, per rack
    and without looking at every worse running job.

    ``victims_for`` at rack level finds victims exactly when some rack ``r``
    holds the job's demand ``g`` once every running job worse than it gave
    its GPUs back (it then takes worse jobs until one such rack does, with at
    least as many GPUs in all); otherwise it looks at every worse running job
    before it answers None: thousands at scale, at every pass. This answers
    the same question from per-rack tables, kept up to date as jobs start,
    stop and move queue (``add``, ``remove``, ``move``).

    A waiting job of queue ``pq`` and (arrival, index) ``p`` is worse than
    every running job of the queues below ``pq`` and than those of its own
    queue that come after ``p``. For a rack ``r``, let ``A`` be its free GPUs
    plus those of the running jobs of queues below ``pq`` on it, and walk
    its jobs of queue ``pq`` from the latest key back, adding their GPUs on
    ``r`` to ``A``: ``K(pq, g, r)`` is the key at which the sum first reaches
    ``g`` (+inf if ``A`` alone does; none if it never does). Rack ``r`` can
    hold ``g`` for the waiting job iff ``p < K``; some rack can iff ``p`` is
    below the largest ``K`` over the racks, read from a heap per ``(pq, g)``
    (entries of racks recomputed since go stale by stamp). Racks touched by a
    change are logged; a question about ``(pq, g)`` first recomputes the racks
    logged since that pair's last question (``_catch_up``, from the engine's
    live free counts, once every start and stop of the instant has been
    applied), so a pair nobody asks about costs nothing. A log longer than a
    few times the racks is dropped, and the pairs behind it recompute every
    rack at their next question (amortised over as many changes).
    """

    def __init__(self, n_queues: int) -> None:
        self.nq = n_queues
        self.S = 1
        self.n_racks = 0
        self.rack_free: list[int] | None = None  # the engine's live list (bound at ``bind``)
        # member -> (queue, its GPUs per rack)
        self.racks_of: dict[int, tuple[int, tuple[tuple[int, int], ...]]] = {}
        self.held: list[list[int]] = []  # [queue][rack]: GPUs of its members there
        self.on: list[
            list[list[tuple[float, int, int]]]
        ] = []  # [queue][rack]: sorted (arrival, index, gpus)
        self.demands: list[int] = []  # the demands asked about, ascending
        # per (queue, demand), flat ``q * len(demands) + i``: each rack's K, and
        # the heap of (negated K, rack, stamp) with the rack's stamp then
        self.k: list[list[tuple[float, float] | None]] = []
        self.stamp: list[list[int]] = []
        self.heaps: list[list[tuple[tuple[float, float], int, int]]] = []
        # racks changed, in order; per pair, how much of the log it has seen
        # (-1: every rack to recompute)
        self.log: list[int] = []
        self.seen: list[int] = []

    def bind(self, view: EngineView) -> None:
        """Start empty on ``view``'s cluster."""
        cluster = view.cluster
        self.S = cluster.servers_per_rack
        self.n_racks = n = cluster.racks
        self.rack_free = view.free_per_rack  # type: ignore[assignment]
        self.racks_of.clear()
        self.held = [[0] * n for _ in range(self.nq)]
        self.on = [[[] for _ in range(n)] for _ in range(self.nq)]
        self.demands = []
        self.k, self.stamp, self.heaps, self.seen = [], [], [], []
        self.log = []

    def add(
        self, index: int, q: int, arrival: float, placement: tuple[tuple[int, int], ...]
    ) -> None:
        per_rack: dict[int, int] = {}
        S = self.S
        for server, g in placement:
            per_rack[server // S] = per_rack.get(server // S, 0) + g
        racks = tuple(per_rack.items())
        self.racks_of[index] = (q, racks)
        self._enter(index, q, arrival, racks)

    def _enter(
        self, index: int, q: int, arrival: float, racks: tuple[tuple[int, int], ...]
    ) -> None:
        held, on = self.held[q], self.on[q]
        for r, g in racks:
            held[r] += g
            insort(on[r], (arrival, index, g))
            self.log.append(r)

    def _leave(
        self, index: int, q: int, arrival: float, racks: tuple[tuple[int, int], ...]
    ) -> None:
        held, on = self.held[q], self.on[q]
        for r, g in racks:
            held[r] -= g
            lst = on[r]
            del lst[bisect_left(lst, (arrival, index))]
            self.log.append(r)

    def remove(self, index: int, arrival: float) -> None:
        entry = self.racks_of.pop(index, None)
        if entry is not None:
            self._leave(index, entry[0], arrival, entry[1])

    def move(self, index: int, q: int, arrival: float) -> None:
        old, racks = self.racks_of[index]
        self.racks_of[index] = (q, racks)
        self._leave(index, old, arrival, racks)
        self._enter(index, q, arrival, racks)

    def _recompute(self, flat: int, pq: int, g: int, racks: Iterable[int]) -> None:
        """``K(pq, g, r)`` anew for ``racks`` (heap entries of those that moved)."""
        rack_free = self.rack_free
        assert rack_free is not None
        ks, stamps, heap = self.k[flat], self.stamp[flat], self.heaps[flat]
        below = self.held[pq + 1 :]
        on = self.on[pq]
        for r in racks:
            total = rack_free[r]
            for held in below:
                total += held[r]
            key: tuple[float, float] | None = _INF_KEY
            if total < g:
                members = on[r]
                i = len(members)
                key = None
                while i:
                    i -= 1
                    arrival, index, h = members[i]
                    total += h
                    if total >= g:
                        key = (arrival, float(index))
                        break
            if ks[r] != key:
                ks[r] = key
                stamps[r] += 1
                if key is not None:
                    heapq.heappush(heap, ((-key[0], -key[1]), r, stamps[r]))
        if len(heap) > 4 * self.n_racks + 64:
            self._compact(flat)

    def _compact(self, flat: int) -> None:
        ks, stamps = self.k[flat], self.stamp[flat]
        self.heaps[flat] = [
            ((-key[0], -key[1]), r, stamps[r]) for r, key in enumerate(ks) if key is not None
        ]
        heapq.heapify(self.heaps[flat])

    def _track(self, g: int) -> None:
        """Start answering for demand ``g`` (every pair recomputed)."""
        self.demands.append(g)
        self.demands.sort()
        nd, n = len(self.demands), self.n_racks
        self.k = [[None] * n for _ in range(self.nq * nd)]
        self.stamp = [[0] * n for _ in range(self.nq * nd)]
        self.heaps = [[] for _ in range(self.nq * nd)]
        self.seen = [-1] * (self.nq * nd)

    def may_fit(self, pq: int, after: tuple[float, int], g: int) -> bool:
        """Whether some rack could hold ``g`` GPUs once every running job
        worse than a waiting job of queue ``pq`` and (arrival, index)
        ``after`` gave its GPUs back."""
        if g not in self.demands:
            self._track(g)
        flat = pq * len(self.demands) + self.demands.index(g)
        log = self.log
        seen = self.seen[flat]
        if seen < 0:
            self._recompute(flat, pq, g, range(self.n_racks))
        elif seen < len(log):
            self._recompute(flat, pq, g, set(log[seen:]))
        self.seen[flat] = len(log)
        if len(log) > 4 * self.n_racks + 4096:
            # the pairs behind recompute every rack when next asked
            self.seen = [-1 if at < len(log) else 0 for at in self.seen]
            log.clear()
        heap, stamps = self.heaps[flat], self.stamp[flat]
        while heap and heap[0][2] != stamps[heap[0][1]]:
            heapq.heappop(heap)
        if not heap:
            return False
        neg = heap[0][0]
        return after < (-neg[0], -neg[1])


class RunningOrder:
    """The running jobs in Tiresias' priority order, kept up to date on events.

    A running job's key is ``((queue, arrival), index)``; its queue only
    changes when its attained service crosses a threshold, at a time known
    from its start (attained service and offset are fixed during a run), so
    instead of re-keying and sorting thousands of running jobs whenever a
    waiting job does not fit (the cost of Tiresias at scale), the order is:

    * ``queues[q]``: the running jobs of queue ``q`` as sorted
      ``(arrival, index)`` (concatenated by queue they are the priority order);
    * ``where[index]``: ``(queue, arrival, started_at)`` of each member;
    * ``recheck``: a heap of ``(time, index, started_at)``: when a member's
      service may reach its next threshold. The time is a little *before* the
      predicted crossing (a relative 1e-9 margin, far above the float error),
      and the queue is then recomputed with the very float operations of
      ``TiresiasPolicy.key``; if it has not moved yet the job is checked again
      at the next use. So every key read is the one a full re-keying would give.
    """

    def __init__(self, edges: list[float], offsets: dict[int, float]) -> None:
        self.edges = edges
        self.offsets = offsets  # the policy's own dict (a running job's entry never changes)
        self.queues: list[list[tuple[float, int]]] = [[] for _ in range(len(edges) + 1)]
        self.where: dict[int, tuple[int, float, float]] = {}
        self.recheck: list[tuple[float, int, float]] = []
        self.reach = RackReach(len(edges) + 1)  # (bound to the cluster by ``bind``)

    def bind(self, view: EngineView) -> None:
        """Start empty on ``view``'s cluster."""
        self.clear()
        self.reach.bind(view)

    def clear(self) -> None:
        for q in self.queues:
            q.clear()
        for index, (_, arrival, _) in self.where.items():
            self.reach.remove(index, arrival)
        self.where.clear()
        self.recheck.clear()

    def _queue(self, job: Job, now: float) -> int:
        # exactly TiresiasPolicy.key for a running job (same float operations)
        attained = job.attained + job.gpus * (now - job.started_at)
        s = attained - self.offsets.get(job.index, 0.0)
        return bisect_right(self.edges, s)

    def _schedule(self, job: Job, q: int, now: float) -> None:
        """Push the time to recompute the queue of ``job`` (now in ``q``)."""
        if q >= len(self.edges):
            return  # bottom queue: never moves again during this run
        edge = self.edges[q]
        base = job.attained - self.offsets.get(job.index, 0.0)
        cross = job.started_at + (edge - base) / job.gpus
        margin = 1e-9 * (abs(cross) + (abs(job.attained) + abs(base) + abs(edge)) / job.gpus + 1.0)
        at = max(cross - margin, math.nextafter(now, math.inf))
        heapq.heappush(self.recheck, (at, job.index, job.started_at))

    def add(self, job: Job, now: float) -> None:
        q = self._queue(job, now)
        self.where[job.index] = (q, job.arrival, job.started_at)
        insort(self.queues[q], (job.arrival, job.index))
        self.reach.add(job.index, q, job.arrival, job.placement)
        self._schedule(job, q, now)

    def remove(self, index: int) -> None:
        entry = self.where.pop(index, None)
        if entry is not None:
            q, arrival, _ = entry
            lst = self.queues[q]
            del lst[bisect_right(lst, (arrival, index)) - 1]
            self.reach.remove(index, arrival)

    def refresh(self, view: EngineView) -> None:
        """Bring every member's queue up to ``view.now``."""
        now = view.now
        heap = self.recheck
        while heap and heap[0][0] <= now:
            _, index, started = heapq.heappop(heap)
            entry = self.where.get(index)
            if entry is None or entry[2] != started:
                continue  # stopped (or restarted: its own entry is in the heap)
            job = view.job(index)
            q = self._queue(job, now)
            if q != entry[0]:
                lst = self.queues[entry[0]]
                del lst[bisect_right(lst, (job.arrival, index)) - 1]
                self.where[index] = (q, job.arrival, started)
                insort(self.queues[q], (job.arrival, index))
                self.reach.move(index, q, job.arrival)
            self._schedule(job, q, now)

    def may_fit(self, pkey: Any, gpus: int) -> bool:
        """``RackReach.may_fit`` for a waiting job of key ``pkey``."""
        (pq, parrival), pindex = pkey
        return self.reach.may_fit(pq, (parrival, pindex), gpus)

    def worse_than(self, view: EngineView, pkey: Any) -> Iterable[Job]:
        """The members whose key is strictly worse than ``pkey``, worst first."""
        return _Worse(self.queues, pkey, view.jobs)


class _Worse:
    """Lazy, re-iterable: members after ``pkey`` in the order, worst first
    (``victims_for`` usually needs only the first few of thousands)."""

    __slots__ = ("queues", "pkey", "jobs")

    def __init__(self, queues: list[list[tuple[float, int]]], pkey: Any, jobs) -> None:
        self.queues = queues
        self.pkey = pkey
        self.jobs = jobs

    def __iter__(self) -> Iterator[Job]:
        (pq, parrival), pindex = self.pkey
        jobs = self.jobs
        for q in range(len(self.queues) - 1, pq, -1):
            for _, index in reversed(self.queues[q]):
                yield jobs[index]
        lst = self.queues[pq]
        cut = bisect_right(lst, (parrival, pindex))  # entries after it are worse
        for i in range(len(lst) - 1, cut - 1, -1):
            yield jobs[lst[i][1]]


def first_rack_victim(view: EngineView, job: Job, candidates: Iterable[Job]) -> Job | None:
    """``victims_for(view, job, Level.RACK, candidates)[0]`` (None where it
    returns None): the same walk over the candidates, but the unneeded victims
    are dropped with per-rack sums kept as they go (a rack that reaches the
    demand is noted), not by re-summing the rest for each of them, and only
    up to the first victim kept, the only one a pass preempts. The victims
    taken grow with the racks they spread over; re-summing made the drop
    quadratic in them."""
    gpus = job.gpus
    need = gpus - view.total_free
    if need > 0:
        for c in candidates:
            need -= c.gpus
            if need <= 0:
                break
        else:
            return None
    rack_base = view.free_per_rack
    fit0 = max(rack_base) >= gpus
    S = view.cluster.servers_per_rack
    chosen: list[Job] = []
    shares: list[dict[int, int]] = []  # each victim's GPUs per rack
    total = view.total_free
    extra: dict[int, int] = {}
    for victim in candidates:
        chosen.append(victim)
        total += victim.gpus
        fit = fit0
        share: dict[int, int] = {}
        for server, g in victim.placement:
            r = server // S
            share[r] = share.get(r, 0) + g
            f = extra[r] = extra.get(r, 0) + g
            if rack_base[r] + f >= gpus:
                fit = True
        shares.append(share)
        if total >= gpus and fit:
            break
    else:
        return None
    if fit0:
        return chosen[-1]  # the rest fit without any of the others: all dropped
    # drop victims in order while the others still make some rack fit
    good = {r for r, f in extra.items() if rack_base[r] + f >= gpus}
    for victim, share in zip(chosen[:-1], shares, strict=False):
        lost = [r for r, g in share.items() if r in good and rack_base[r] + extra[r] - g < gpus]
        if len(lost) == len(good):
            return victim  # needed: the first victim kept
        for r, g in share.items():
            extra[r] -= g
        good.difference_update(lost)
    return chosen[-1]


@dataclass
class TiresiasPolicy(PriorityPreemptive, BasePolicy):
    thresholds_gpu_s: tuple[float, ...] = (1 * HOUR, 10 * HOUR)
    starve_factor: float = 2.0
    starve_min_s: float = 1 * HOUR
    sensitivity: float = 2.0
    name: str = "tiresias"
    _offset: dict[int, float] = field(default_factory=dict, repr=False)
    _sensitive: dict[tuple[str, int], bool] = field(default_factory=dict, repr=False)
    _wake: WakeUps = field(default_factory=WakeUps, repr=False)
    _keys: dict[int, tuple] = field(default_factory=dict, repr=False)
    _wake_prune_at: int = field(default=4096, repr=False)
    _promoted_at: float = field(default=-1.0, repr=False)
    # incremental state: when each running job's next threshold is asked for,
    # re-asks due (time, job), jobs placed since the last ask
    _asked_run: dict[int, tuple[tuple[float, float], float]] = field(
        default_factory=dict, repr=False
    )
    _due: list[tuple[float, int]] = field(default_factory=list, repr=False)
    _placed: list[int] = field(default_factory=list, repr=False)
    # the running order, and what changed it since the last sync: jobs this
    # policy placed or preempted, and the instant whose completions are applied
    _joining: list[int] = field(default_factory=list, repr=False)
    _leaving: list[int] = field(default_factory=list, repr=False)
    _synced_instant: int = field(default=-1, repr=False)
    # the waiting jobs in priority order (a waiting job's key is frozen until
    # it runs or is promoted), one sorted list per class (level, GPU demand)
    # of ``(((queue, arrival), index), job)`` (indices are unique: jobs are
    # never compared), and each member's entry. A pass of ``schedule`` only
    # ever tries the first job of a class (see ``_pending_order``).
    _pend_cls: dict[tuple[Level, int], list[tuple[tuple[tuple[int, float], int], Job]]] = field(
        default_factory=dict, repr=False
    )
    _pend_entry: dict[int, tuple[tuple[int, float], int]] = field(default_factory=dict, repr=False)
    # preempted waiting jobs: (starve time, index, queued_since) by starve time,
    # and those preempted since the last ask for wake-ups
    _starve: list[tuple[float, int, float]] = field(default_factory=list, repr=False)
    _new_preempted: list[int] = field(default_factory=list, repr=False)
    _levels: dict[tuple[str, int], Level] = field(default_factory=dict, repr=False)
    # each waiting job's class (level, GPU demand)
    _pend_lg: dict[int, tuple[Level, int]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._edges = [t - 1e-6 * t for t in self.thresholds_gpu_s]
        self._run = RunningOrder(self._edges, self._offset)

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        self._edges = [t - 1e-6 * t for t in self.thresholds_gpu_s]
        self._asked_run.clear()
        self._due.clear()
        self._placed.clear()
        self._offset.clear()
        self._sensitive.clear()
        self._wake.clear()
        self._wake_prune_at = 4096
        self._keys.clear()
        self._promoted_at = -1.0
        self._run = RunningOrder(self._edges, self._offset)
        self._joining.clear()
        self._leaving.clear()
        self._synced_instant = -1
        self._pend_cls.clear()
        self._pend_entry.clear()
        self._starve.clear()
        self._new_preempted.clear()
        self._levels.clear()
        self._pend_lg.clear()

    # -- scheduling --------------------------------------------------------
    def service(self, view: EngineView, job: Job) -> float:
        """Attained GPU-service counted since the job's last promotion."""
        return view.attained(job) - self._offset.get(job.index, 0.0)

    def queue_of(self, view: EngineView, job: Job) -> int:
        # a hair of tolerance: at the wake-up the crossing is exact
        return bisect_right(self._edges, self.service(view, job))

    def key(self, view: EngineView, job: Job) -> tuple:
        if job.status != Status.PENDING:
            return (self.queue_of(view, job), job.arrival)
        # a waiting job's key is frozen until it runs or is promoted: cache it
        offset = self._offset.get(job.index, 0.0)
        cached = self._keys.get(job.index)
        if cached is None or cached[0] != (job.attained, offset):
            cached = ((job.attained, offset), (self.queue_of(view, job), job.arrival))
            self._keys[job.index] = cached
        return cached[1]

    def _running_order(self, view: EngineView) -> list[tuple[Any, Job]]:
        # ``key`` inlined for the running jobs (thousands at scale): the same
        # float operations as ``view.attained`` and ``service``, so the same keys
        now = view.now
        edges = self._edges
        offsets = self._offset
        keyed = []
        for job in view.running:
            attained = job.attained + job.gpus * (now - job.started_at)
            s = attained - offsets.get(job.index, 0.0)
            keyed.append(((bisect_right(edges, s), job.arrival), job.index, job))
        keyed.sort(key=lambda item: (item[0], item[1]))
        return [((k, index), job) for k, index, job in keyed]

    def _sync_running(self, view: EngineView) -> None:
        """Apply the running set's changes since the last call to the order:
        this instant's completions, and the jobs this policy placed or
        preempted (``run_policy`` calls ``act`` at every instant and after
        every action). Rebuilt from the view if the count disagrees."""
        run = self._run
        if run.reach.rack_free is not view.free_per_rack:
            run.bind(view)  # a new engine: start over (rebuilt below)
        if self._synced_instant != view.instant:
            self._synced_instant = view.instant
            for kind, index in view.events:
                if kind == "completion":
                    run.remove(index)
                    self._asked_run.pop(index, None)  # (done: never asked again)
                elif kind == "arrival":
                    self._pend_add(view, view.job(index))
        now = view.now
        for index in self._leaving:
            run.remove(index)
            job = view.job(index)
            if job.status == Status.PENDING:
                self._pend_add(view, job)
                heapq.heappush(self._starve, (self.starve_at(job), index, job.queued_since))
        self._leaving.clear()
        for index in self._joining:
            job = view.job(index)
            self._pend_remove(index)
            if job.status == Status.RUNNING:
                run.remove(index)
                run.add(job, now)
        self._joining.clear()
        if len(run.where) != view.n_running:
            run.clear()
            for job in view.running:
                run.add(job, now)
        if len(self._pend_entry) != len(view.pending):
            self._pend_cls.clear()
            self._pend_entry.clear()
            self._pend_lg.clear()
            for job in view.pending:
                self._pend_add(view, job)

    def _pend_add(self, view: EngineView, job: Job) -> None:
        if job.status != Status.PENDING or job.index in self._pend_entry:
            return
        entry = (self.key(view, job), job.index)
        self._pend_entry[job.index] = entry
        lg = (self.level_of(view, job), job.gpus)
        self._pend_lg[job.index] = lg
        insort(self._pend_cls.setdefault(lg, []), (entry, job))

    def _pend_remove(self, index: int) -> None:
        entry = self._pend_entry.pop(index, None)
        if entry is not None:
            # its cached key is stale from now on (it runs, or its offset
            # changed): dropped, so the cache holds the waiting jobs only
            self._keys.pop(index, None)
            lg = self._pend_lg.pop(index)
            members = self._pend_cls[lg]
            if len(members) == 1:
                del self._pend_cls[lg]
            else:
                # (entry,) sorts just before (entry, job): bisect_left finds it
                del members[bisect_left(members, (entry,))]

    def _pending_sizes(self, view: EngineView) -> dict[Level, int] | None:
        sizes: dict[Level, int] = {}
        for level, gpus in self._pend_cls:
            if gpus < sizes.get(level, 1 << 62):
                sizes[level] = gpus
        return sizes

    def _pending_order(self, view: EngineView) -> Iterable[tuple[Any, Job]]:
        """The first waiting job of each class (level, GPU demand), in
        priority order: all that a pass of ``schedule`` can try. A later job
        of a class is always skipped there: when the pass reached the class's
        first job, either ``cover`` already held its level and demand (it only
        tightens during a pass), or the job was tried, and a failed try sets
        it (a success ends the pass). So the pass over these few jobs takes the
        very decisions of the pass over the whole queue, at a cost independent
        of the queue's length."""
        return sorted(members[0] for members in self._pend_cls.values())

    def _worse_than(self, view: EngineView) -> Callable[[Any], Iterable[Job]]:
        # the incremental running order (the default sorts every running job)
        run = self._run
        run.refresh(view)
        return lambda pkey: run.worse_than(view, pkey)

    def schedule(self, view: EngineView) -> Action:
        """``PriorityPreemptive.schedule``, with the rack-level victim search
        skipped when ``RunningOrder.may_fit`` says it would find none (it
        would look at every worse running job first: thousands at scale)."""
        if not view.pending:
            return WAIT
        pending = self._pending_order(view)
        worse_than: Callable[[Any], Iterable[Job]] | None = None
        cover = [math.inf] * (Level.NETWORK + 1)  # as in the shared pass
        sizes = self._pending_sizes(view)
        free = view.total_free
        run = self._run
        for pkey, job in pending:
            level = self.level_of(view, job)
            if cover[level] <= job.gpus:
                continue
            if job.gpus <= free and view.can_place(job, level):
                return Place(job.index, level)
            if worse_than is None:
                worse_than = self._worse_than(view)
            if level != Level.RACK:
                victims = victims_for(view, job, level, worse_than(pkey))
                if victims:
                    return Preempt(victims[0].index)
            elif run.may_fit(pkey, job.gpus):
                victim = first_rack_victim(view, job, worse_than(pkey))
                if victim is not None:
                    return Preempt(victim.index)
            for narrower in range(level + 1):
                if job.gpus < cover[narrower]:
                    cover[narrower] = job.gpus
            if sizes is not None and all(cover[lv] <= g for lv, g in sizes.items()):
                break
        return WAIT

    def starve_at(self, job: Job) -> float:
        return job.queued_since + max(self.starve_min_s, self.starve_factor * job.run_time)

    def _promote_starving(self, view: EngineView) -> None:
        # A waiting preempted job's starve time and service are frozen while
        # it waits, so each waiting period is looked at once, when due.
        now = view.now
        heap = self._starve
        while heap and now >= heap[0][0] - 1e-9:
            _, index, since = heapq.heappop(heap)
            job = view.job(index)
            if job.status != Status.PENDING or job.queued_since != since:
                continue  # placed since (a new wait pushes its own entry)
            if self.service(view, job) > 0:
                self._pend_remove(index)
                self._offset[index] = job.attained
                self._pend_add(view, job)

    def _ask_wakeups(self, view: EngineView) -> None:
        # A running job's next threshold crossing is fixed from its start (or
        # its last promotion) on: asked once per run, not at every instant.
        # Only jobs placed since the last ask, and jobs whose asked crossing
        # has come, need a (new) ask: the others' stamps and times still hold.
        asked = self._asked_run
        now = view.now
        wakes = self._wake
        if len(wakes.asked) > self._wake_prune_at:
            # times at or before now can never be asked again (``WakeUps.at``
            # asks only later ones): a million jobs' worth would stay
            wakes.asked = {t for t in wakes.asked if t > now + EPS}
            self._wake_prune_at = 2 * len(wakes.asked) + 4096
        todo, self._placed = self._placed, []
        due = self._due
        while due and due[0][0] <= now:
            todo.append(heapq.heappop(due)[1])
        for index in todo:
            job = view.job(index)
            if job.status != Status.RUNNING:
                continue
            stamp = (job.started_at, self._offset.get(index, 0.0))
            last = asked.get(index)
            if last is not None and last[0] == stamp and now < last[1]:
                continue
            s = self.service(view, job)
            wake = math.inf
            for t in self.thresholds_gpu_s:
                if s < t - 1e-6 * t:
                    wake = now + (t - s) / job.gpus
                    self._wake.at(view, wake)
                    heapq.heappush(due, (wake, index))
                    break
            asked[index] = (stamp, wake)
        # a waiting preempted job's starve time is fixed while it waits: one
        # ask, at the first wait after its preemption (later asks repeated it)
        todo, self._new_preempted = self._new_preempted, []
        for index in todo:
            job = view.job(index)
            if job.status == Status.PENDING and self.service(view, job) > 0:
                self._wake.at(view, self.starve_at(job))

    # -- placement ---------------------------------------------------------
    def sensitive(self, view: EngineView, job: Job) -> bool:
        key = (job.model, job.gpus)
        if key not in self._sensitive:
            perf = view.perf
            tight = perf.slowdown(job.model, job.gpus, size_level(view.cluster, job.gpus))
            wide = perf.slowdown(job.model, job.gpus, Level.NETWORK)
            self._sensitive[key] = (
                tight is not None and wide is not None and wide > self.sensitivity * tight
            )
        return self._sensitive[key]

    def level_of(self, view: EngineView, job: Job) -> Level:
        key = (job.model, job.gpus)
        level = self._levels.get(key)
        if level is None:
            level = Level.NETWORK
            if size_level(view.cluster, job.gpus) < Level.NETWORK and self.sensitive(view, job):
                level = Level.RACK
            self._levels[key] = level
        return level

    def act(self, view: EngineView) -> Action:
        self._sync_running(view)
        if self._promoted_at != view.now:  # promotions are due at instants
            self._promoted_at = view.now
            self._promote_starving(view)
        action = self.schedule(view)
        if isinstance(action, Place):
            self._placed.append(action.job)
            self._joining.append(action.job)
        elif isinstance(action, Preempt):
            self._leaving.append(action.job)
            self._new_preempted.append(action.job)
        elif isinstance(action, Wait):
            self._ask_wakeups(view)
        return action
