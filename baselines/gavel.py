"""Gavel-like heterogeneity-aware scheduling: rounds, throughput-normalised
max-min fairness by a greedy rule (issue 53).

Source: Narayanan et al., "Heterogeneity-Aware Cluster Scheduling Policies
for Deep Learning Workloads", OSDI'20 (Gavel). Gavel solves a linear program
for each job's share of time on each GPU type (e.g. max-min fairness over
*effective throughput*, each job's throughput normalised by what it would get
alone) and realises it in rounds (6 minutes by default) by giving each round
to the jobs furthest behind their share. **This is not Gavel's LP**: it is a
simple greedy approximation of its max-min fairness, stated here:

* **normalised throughput**: a job's throughput on type ``k`` divided by its
  throughput on its fastest accepted type, ``view.type_speed(job, k) / max``
  (1 on its best type; a mixed placement counts at its slowest member).
* **fairness over rounds**: each job's *normalised service* is the sum of
  ``gpus x normalised throughput x seconds`` it has run; its *rate* is that
  service over ``gpus x seconds since arrival``, the fraction of its ideal
  (all the time on its best type) it got. Max-min fairness raises the least
  rate first: jobs are served in ascending rate (ties: earlier arrival, lower
  index); a new job has rate 0.
* **a round** (every ``round_s`` seconds, 360 by default as Gavel's, at
  multiples of it, by the policy's own wake-ups): in that order each job
  (running or waiting) takes the type of highest normalised throughput that
  still has room for it in the round's plan (GPU counts per type; types
  whose capacity is below its demand are skipped); a job that fits no type
  sits the round out. Every running job whose planned type differs from the
  one it runs on (or that sits out) is preempted at the round's start (1 s
  per GPU checkpoint, the engine's ``restore_s_per_gpu``), then the planned
  jobs start on their types, so a job moves to its fast type in the first
  round where it is among those owed it. Placement ignores locality as Gavel
  does (``Level.NETWORK``: the engine's packer takes the tightest free
  placement on the type, and at that level counts alone decide a fit, so the
  plan always fits).
* **between rounds** (arrivals, completions) nobody is preempted; waiting jobs
  start in the same order on the best type with room (work-conserving).
* ``mix_types`` clusters: a job larger than every single accepted type is
  planned over several (its GPUs counted off its types in normalised order)
  and placed with the engine's mixed rule; the plan may then be off by the
  engine's choice of servers (those jobs start when they fit).

On an untyped cluster every job has one type at normalised throughput 1:
the policy is round-based least-attained-service per GPU and time in system.
Deterministic: every order ends in the job index.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ddl_gym.engine import WAIT, Action, EngineView, Job, Place, Preempt, Status
from ddl_gym.perf import Level

from .common import EPS, BasePolicy, WakeUps

MIXED = -1  # a planned mixed placement (``mix_types`` clusters)


@dataclass
class GavelPolicy(BasePolicy):
    """Round-based, throughput-normalised max-min fairness (greedy); see the
    module docstring."""

    # places on GPU types itself: run_policy holds it to every action (no
    # type-blind leniency, ``ddl_gym.engine.simulate.run_policy``)
    type_aware = True

    round_s: float = 360.0
    name: str = "gavel"
    _wake: WakeUps = field(default_factory=WakeUps, repr=False)
    _typed: bool = field(default=False, repr=False)
    _capacity: list[int] = field(default_factory=list, repr=False)
    # per (model, accepted types, GPUs): ((type, normalised throughput), ...),
    # best first (untyped: one pseudo-type 0 at 1.0)
    _options: dict[tuple[str, tuple[int, ...], int], tuple[tuple[int, float], ...]] = field(
        default_factory=dict, repr=False
    )
    _best: dict[tuple[str, tuple[int, ...]], float] = field(default_factory=dict, repr=False)
    # normalised GPU-seconds of each job's finished runs
    _service: dict[int, float] = field(default_factory=dict, repr=False)
    _next_round: float = field(default=0.0, repr=False)
    # this round: the preemptions still to make, and the planned type per job
    _evict: list[int] = field(default_factory=list, repr=False)
    _plan: dict[int, int] = field(default_factory=dict, repr=False)
    _round_instant: int = field(default=-1, repr=False)
    # the jobs in priority order as of one instant (keys do not move within
    # an instant): computed once per instant, not per action
    _order_at: int = field(default=-1, repr=False)
    _order: list[Job] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if not self.round_s > 0:
            raise ValueError(f"gavel: round_s must be positive, got {self.round_s}")

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        self._wake.clear()
        self._typed = view.cluster.typed
        self._capacity = view.cluster.type_capacities()
        self._options.clear()
        self._best.clear()
        self._service.clear()
        self._next_round = 0.0
        self._evict = []
        self._plan = {}
        self._round_instant = -1
        self._order_at = -1
        self._order = []

    # -- normalised throughput --------------------------------------------------
    def options(self, view: EngineView, job: Job) -> tuple[tuple[int, float], ...]:
        """The job's types able to hold it with their normalised throughput,
        best first (ties to the lower type index)."""
        key = (job.model, job.accepts, job.gpus)
        got = self._options.get(key)
        if got is None:
            if not self._typed:
                got = ((0, 1.0),)
            else:
                best = self.best_speed(view, job)
                got = tuple(
                    sorted(
                        (
                            (k, view.type_speed(job, k) / best)
                            for k in job.accepts
                            if self._capacity[k] >= job.gpus
                        ),
                        key=lambda kv: (-kv[1], kv[0]),
                    )
                )
            self._options[key] = got
        return got

    def best_speed(self, view: EngineView, job: Job) -> float:
        key = (job.model, job.accepts)
        best = self._best.get(key)
        if best is None:
            best = self._best[key] = max(view.type_speed(job, k) for k in job.accepts)
        return best

    def normalised_now(self, view: EngineView, job: Job) -> float:
        """Normalised throughput of the placement ``job`` runs on."""
        if not self._typed:
            return 1.0
        return (1.0 / job.tfac) / self.best_speed(view, job)

    def service(self, view: EngineView, job: Job) -> float:
        """Normalised GPU-seconds the job has had, as of now."""
        s = self._service.get(job.index, 0.0)
        if job.status == Status.RUNNING:
            s += job.gpus * self.normalised_now(view, job) * (view.now - job.started_at)
        return s

    def key(self, view: EngineView, job: Job) -> tuple[float, float, int]:
        """Ascending: the least rate (share of its ideal) first."""
        age = view.now - job.arrival
        rate = self.service(view, job) / (job.gpus * age) if age > EPS else 0.0
        return (rate, job.arrival, job.index)

    # -- the round's plan ------------------------------------------------------
    def _plan_round(self, view: EngineView) -> None:
        active = [*view.running, *view.pending]
        active.sort(key=lambda j: self.key(view, j))
        room = list(self._capacity)
        plan: dict[int, int] = {}
        mix = view.cluster.mix_types
        for job in active:
            options = self.options(view, job)
            for k, _ in options:
                if room[k] >= job.gpus:
                    room[k] -= job.gpus
                    plan[job.index] = k
                    break
            else:
                if mix and not options:  # larger than every single type
                    accepts = sorted(job.accepts, key=lambda k: -view.type_speed(job, k))
                    if sum(room[k] for k in accepts) >= job.gpus:
                        need = job.gpus
                        for k in accepts:
                            take = min(need, room[k])
                            room[k] -= take
                            need -= take
                        plan[job.index] = MIXED
        self._plan = plan
        self._order_at = view.instant
        self._order = active
        self._evict = [job.index for job in view.running if plan.get(job.index) != self._slot(job)]

    def _ordered(self, view: EngineView) -> list[Job]:
        """The waiting (and, at a round, running) jobs in priority order as
        of this instant; callers skip those no longer waiting."""
        if self._order_at != view.instant:
            self._order_at = view.instant
            self._order = [j for _, j in sorted((self.key(view, j), j) for j in view.pending)]
        return self._order

    def _slot(self, job: Job) -> int:
        """The plan's type of the placement a running job has."""
        return job.kind if self._typed else 0

    # -- placing ----------------------------------------------------------------
    def _place(self, view: EngineView, job: Job, k: int) -> Action | None:
        """``Place`` on type ``k`` (the plan's pseudo-types: 0 untyped, MIXED)
        if it fits now, else None."""
        level = Level.NETWORK
        if not self._typed:
            return Place(job.index, level) if view.can_place(job, level) else None
        if k == MIXED:
            return Place(job.index, level) if view.can_place(job, level) else None
        if view.free_per_type[k] >= job.gpus and view.can_place(job, level, k):
            return Place(job.index, level, k)
        return None

    def _fill(self, view: EngineView) -> Action | None:
        """Work-conserving: the first waiting job (least rate first) on its
        best type with room now."""
        free = view.total_free
        demands = view.pending_demands()
        if not demands:
            return None
        if min(demands) > (free if view.cluster.mix_types else max(view.free_per_type)):
            return None  # no waiting job fits any one type: no need to order them
        pending = Status.PENDING
        for job in self._ordered(view):
            if job.status != pending or job.gpus > free:
                continue
            options = self.options(view, job)
            for k, _ in options:
                action = self._place(view, job, k)
                if action is not None:
                    return action
            if not options and view.cluster.mix_types:
                action = self._place(view, job, MIXED)
                if action is not None:
                    return action
        return None

    def act(self, view: EngineView) -> Action:
        now = view.now
        if now >= self._next_round - EPS and self._round_instant != view.instant:
            self._round_instant = view.instant
            self._next_round = (math.floor(now / self.round_s + EPS) + 1) * self.round_s
            self._plan_round(view)
        action = self._round_step(view) if self._round_instant == view.instant else None
        if action is None:
            action = self._fill(view)
        if isinstance(action, Preempt):
            job = view.job(action.job)
            self._service[job.index] = self.service(view, job)
        elif action is None:
            if view.pending or view.n_running:
                self._wake.at(view, self._next_round)
            return WAIT
        return action

    def _round_step(self, view: EngineView) -> Action | None:
        """The round's next move: a preemption, then a planned job's start."""
        while self._evict:
            index = self._evict.pop(0)
            if view.job(index).status == Status.RUNNING:
                return Preempt(index)
        free = view.total_free
        plan = self._plan
        pending = Status.PENDING
        for job in self._ordered(view):
            if job.status != pending or job.gpus > free or job.index not in plan:
                continue
            action = self._place(view, job, self._plan[job.index])
            if action is not None:
                return action
        return None
