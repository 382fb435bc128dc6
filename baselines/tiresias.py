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

from ddl_gym.engine import Action, EngineView, Job, Place, Preempt, Status, Wait
from ddl_gym.perf import Level

from .common import BasePolicy, PriorityPreemptive, WakeUps, size_level

HOUR = 3600.0


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

    def clear(self) -> None:
        for q in self.queues:
            q.clear()
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
        self._schedule(job, q, now)

    def remove(self, index: int) -> None:
        entry = self.where.pop(index, None)
        if entry is not None:
            q, arrival, _ = entry
            lst = self.queues[q]
            del lst[bisect_right(lst, (arrival, index)) - 1]

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
                self.remove(index)
                self.where[index] = (q, job.arrival, started)
                insort(self.queues[q], (job.arrival, index))
            self._schedule(job, q, now)

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
    # it runs or is promoted): sorted ``(((queue, arrival), index), job)``
    # (indices are unique: jobs are never compared) and each member's key
    _pend: list[tuple[tuple[tuple[int, float], int], Job]] = field(default_factory=list, repr=False)
    _pend_entry: dict[int, tuple[tuple[int, float], int]] = field(default_factory=dict, repr=False)
    # preempted waiting jobs: (starve time, index, queued_since) by starve time,
    # and those preempted since the last ask for wake-ups
    _starve: list[tuple[float, int, float]] = field(default_factory=list, repr=False)
    _new_preempted: list[int] = field(default_factory=list, repr=False)
    _levels: dict[tuple[str, int], Level] = field(default_factory=dict, repr=False)
    # waiting jobs per level and GPU demand (``_pending_sizes``), and each one's
    _pend_sizes: dict[Level, dict[int, int]] = field(default_factory=dict, repr=False)
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
        self._keys.clear()
        self._promoted_at = -1.0
        self._run = RunningOrder(self._edges, self._offset)
        self._joining.clear()
        self._leaving.clear()
        self._synced_instant = -1
        self._pend.clear()
        self._pend_entry.clear()
        self._starve.clear()
        self._new_preempted.clear()
        self._levels.clear()
        self._pend_sizes.clear()
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
        if self._synced_instant != view.instant:
            self._synced_instant = view.instant
            for kind, index in view.events:
                if kind == "completion":
                    run.remove(index)
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
        if len(self._pend) != len(view.pending):
            self._pend.clear()
            self._pend_entry.clear()
            self._pend_sizes.clear()
            self._pend_lg.clear()
            for job in view.pending:
                self._pend_add(view, job)

    def _pend_add(self, view: EngineView, job: Job) -> None:
        if job.status != Status.PENDING or job.index in self._pend_entry:
            return
        entry = (self.key(view, job), job.index)
        self._pend_entry[job.index] = entry
        insort(self._pend, (entry, job))
        lg = (self.level_of(view, job), job.gpus)
        self._pend_lg[job.index] = lg
        counts = self._pend_sizes.setdefault(lg[0], {})
        counts[lg[1]] = counts.get(lg[1], 0) + 1

    def _pend_remove(self, index: int) -> None:
        entry = self._pend_entry.pop(index, None)
        if entry is not None:
            # (entry,) sorts just before (entry, job): bisect_left finds it
            del self._pend[bisect_left(self._pend, (entry,))]
            level, gpus = self._pend_lg.pop(index)
            counts = self._pend_sizes[level]
            if counts[gpus] == 1:
                del counts[gpus]
                if not counts:
                    del self._pend_sizes[level]
            else:
                counts[gpus] -= 1

    def _pending_sizes(self, view: EngineView) -> dict[Level, int] | None:
        return {level: min(counts) for level, counts in self._pend_sizes.items()}

    def _pending_order(self, view: EngineView) -> Iterable[tuple[Any, Job]]:
        return self._pend  # read only by ``schedule`` (which never changes it)

    def _worse_than(self, view: EngineView) -> Callable[[Any], Iterable[Job]]:
        # the incremental running order (the default sorts every running job)
        run = self._run
        run.refresh(view)
        return lambda pkey: run.worse_than(view, pkey)

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
