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
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from ddl_gym.engine import Action, EngineView, Job, Place, Preempt, Status, Wait
from ddl_gym.perf import Level

from .common import BasePolicy, PriorityPreemptive, WakeUps, size_level

HOUR = 3600.0


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
    # re-asks due (time, job), jobs placed since the last ask, and the waiting
    # jobs this policy preempted (the only ones that can starve)
    _asked_run: dict[int, tuple[tuple[float, float], float]] = field(
        default_factory=dict, repr=False
    )
    _due: list[tuple[float, int]] = field(default_factory=list, repr=False)
    _placed: list[int] = field(default_factory=list, repr=False)
    _preempted: set[int] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        self._edges = [t - 1e-6 * t for t in self.thresholds_gpu_s]

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        self._edges = [t - 1e-6 * t for t in self.thresholds_gpu_s]
        self._asked_run.clear()
        self._due.clear()
        self._placed.clear()
        self._preempted.clear()
        self._offset.clear()
        self._sensitive.clear()
        self._wake.clear()
        self._keys.clear()
        self._promoted_at = -1.0

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

    def starve_at(self, job: Job) -> float:
        return job.queued_since + max(self.starve_min_s, self.starve_factor * job.run_time)

    def _waiting_preempted(self, view: EngineView) -> list[Job]:
        """Waiting jobs with a preemption behind them (in index order)."""
        jobs = [view.job(i) for i in sorted(self._preempted)]
        return [job for job in jobs if job.status == Status.PENDING and job.preemptions]

    def _promote_starving(self, view: EngineView) -> None:
        for job in self._waiting_preempted(view):
            if view.now >= self.starve_at(job) - 1e-9:
                if self.service(view, job) > 0:
                    self._offset[job.index] = job.attained

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
        for job in self._waiting_preempted(view):
            if self.service(view, job) > 0:
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
        if size_level(view.cluster, job.gpus) < Level.NETWORK and self.sensitive(view, job):
            return Level.RACK
        return Level.NETWORK

    def act(self, view: EngineView) -> Action:
        if self._promoted_at != view.now:  # promotions are due at instants
            self._promoted_at = view.now
            self._promote_starving(view)
        action = self.schedule(view)
        if isinstance(action, Place):
            self._placed.append(action.job)
            self._preempted.discard(action.job)
        elif isinstance(action, Preempt):
            self._preempted.add(action.job)
        elif isinstance(action, Wait):
            self._ask_wakeups(view)
        return action
