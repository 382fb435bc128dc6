"""A lookahead planner: which heuristic to follow, chosen by rollouts on
sampled futures of the simulator itself.

At every decision point the planner asks its candidate heuristics (live
instances that follow the run, whoever acts; their wake-ups are the
planner's too) what they would do, and does what the leading one says. If
they differ, at the first call of that instant and at least ``hold_s``
after its last plan, it *plans*: for each of ``futures`` sampled futures it
forks the cluster into a fresh :class:`~ddl_gym.engine.Engine` and lets
each candidate run it for ``horizon_s`` seconds; the candidate with the
lowest mean cost (jobs' time in the system within the horizon, plus the
ideal remaining run time of the jobs left at its end, ``terminal``) leads
from then on (unless beaten by less than ``margin``). Every candidate sees
the same futures (common random numbers), so differences come from the
policies, not the draws. A leader that would preempt a job it started at
the same instant gets ``Wait`` instead (two heuristics' states mixed can
cycle).

A sampled future holds (all of it from the view, nothing else):

* the jobs in the system now, each with a total size drawn from the
  Kaplan-Meier estimate of job sizes (single-GPU seconds of work) above the
  work it has done: finished jobs give sizes, every unfinished one a size
  known to exceed its done work; the mass beyond the largest finished size
  draws twice the larger of that size and the job's done work
  (``prior_work_s`` stands in while no job has finished);
* arrivals over the horizon: Poisson at the rate of the last
  ``window_jobs`` arrivals, each a copy of one of those jobs (GPUs, model,
  compute time) with a size drawn from the same estimate.

**Non-clairvoyant by construction.** The planner reads the view through
:func:`observe` only, which copies what a real scheduler knows: the jobs that
have arrived (never a ``FUTURE`` one), the sizes of finished jobs, the work
done (progress) and the history of unfinished ones, never their sizes, and
the cluster. The candidates act on the view itself, whose remaining-work
call refuses unless the scenario is clairvoyant (the planner never asks for
it). Per-decision random draws are seeded by ``(seed, view.instant)``, so a
decision depends on the observed state alone: changing unfinished jobs'
sizes or future arrivals changes none (``tests/test_planner.py``).

**The fork.** The engine's public API places jobs by level, not on given
servers, so the fork is approximate: the running jobs start again in their
start order at their current level (the packer chooses the servers, so the
free-GPU layout may differ from the real one), and the history a policy
reads (attained service, compute and communication time, preemptions, time
waited, restore still owed) is written onto the fork's own fresh jobs
before its first decision (fields the engine only accumulates). Congestion
is the current background, constant over the horizon; leases and restore
cost are the real engine's.

Cost: a planned instant runs ``len(candidates) x futures`` rollouts; the
policy counts them (``stats``). It is slow, so it is not in
``baselines.POLICY_NAMES`` (every comparison iterates those): build it with
``make_policy("planner", ...)`` or ``--policy ddl_gym.baselines.planner:make``
(``:quick`` for :data:`QUICK`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ddl_gym.engine import WAIT, Action, Engine, EngineView, Job, Place, Preempt, Status, Wait
from ddl_gym.engine.engine import StalledError
from ddl_gym.perf import Level
from ddl_gym.traces import Trace

from .common import BasePolicy

# the heuristics that win v3's train and validation cases between them
# (docs/benchmark.md), both usable under one engine setting (no leases)
DEFAULT_CANDIDATES: tuple[str, ...] = ("tiresias-c1", "gandiva")
#: the settings of a quick planner (tests, ``--quick`` runs): 2 futures, 2 h
QUICK: dict[str, Any] = {"futures": 2, "horizon_s": 7200.0}


# -- what the planner may see ------------------------------------------------------
@dataclass(frozen=True)
class SeenJob:
    """An arrived, unfinished job as a scheduler sees it (no size)."""

    index: int
    job_id: str
    arrival: float
    gpus: int
    model: str
    t_compute: float
    running: bool
    level: Level | None  # its placement's level while it runs
    done_iterations: float  # single-GPU iterations completed so far
    attained: float  # GPU-seconds held so far
    compute_time: float
    comm_time: float
    preemptions: int
    queued_since: float
    restore_owed_s: float  # restore time still to pay (seconds without progress)


@dataclass(frozen=True)
class Observation:
    """What the planner plans from: the time, the background traffic, the
    unfinished jobs (running ones in start order, then the waiting ones in
    queue order), the finished jobs' sizes (single-GPU seconds) and the
    recent arrivals' bodies ``(arrival, gpus, model, t_compute)``."""

    now: float
    background: float
    unfinished: tuple[SeenJob, ...]
    finished_work_s: np.ndarray
    recent: tuple[tuple[float, int, str, float], ...]


def _done_iterations(view: EngineView, job: Job) -> float:
    if job.status == Status.RUNNING:
        start = max(job.last_update, job.busy_until)
        return job.progress + job.rate * max(0.0, view.now - start)
    return job.progress


def _seen(view: EngineView, job: Job, running: bool) -> SeenJob:
    owed = max(0.0, job.busy_until - view.now) if running else job.restore_debt
    return SeenJob(
        job.index,
        job.job_id,
        job.arrival,
        job.gpus,
        job.model,
        job.t_compute,
        running,
        job.level if running else None,
        _done_iterations(view, job),
        view.attained(job),
        job.compute_time,
        job.comm_time,
        job.preemptions,
        job.queued_since,
        owed,
    )


def observe(view: EngineView, window_jobs: int) -> Observation:
    """The observable state: everything the planner reads (module docstring)."""
    now = view.now
    unfinished = [_seen(view, j, True) for j in view.running]
    unfinished += [_seen(view, j, False) for j in view.pending]
    finished: list[float] = []
    arrived: list[Job] = []
    for j in view.jobs:
        if j.status == Status.FUTURE:
            continue
        arrived.append(j)
        if j.status == Status.DONE:
            finished.append(j.iterations * j.t_compute)  # a finished job's size is known
    arrived.sort(key=lambda j: (j.arrival, j.index))
    recent = tuple((j.arrival, j.gpus, j.model, j.t_compute) for j in arrived[-window_jobs:])
    return Observation(now, view.background, tuple(unfinished), np.sort(np.array(finished)), recent)


# -- job sizes ----------------------------------------------------------------------
@dataclass(frozen=True)
class SizeDistribution:
    """Job sizes (single-GPU seconds) as point masses at ``values``
    (increasing) with ``masses``, and ``tail``, the mass beyond the largest
    size seen to end (Kaplan-Meier with right-censoring)."""

    values: np.ndarray
    masses: np.ndarray
    tail: float
    prior_s: float  # stands in for the largest size while nothing has ended

    @classmethod
    def estimate(cls, ended: np.ndarray, exceeded: np.ndarray, prior_s: float) -> SizeDistribution:
        """From sizes seen to end and sizes known only to exceed a value
        (the work done by jobs still in the system)."""
        ended, exceeded = np.sort(ended), np.sort(exceeded)
        values, ends = np.unique(ended, return_counts=True)
        # at risk at v: every size that ended at or after v, every job that has done >= v
        at_risk = (len(ended) - np.searchsorted(ended, values, side="left")) + (
            len(exceeded) - np.searchsorted(exceeded, values, side="left")
        )
        survival = np.cumprod(1.0 - ends / at_risk)
        before = np.concatenate([[1.0], survival[:-1]])
        tail = float(survival[-1]) if len(survival) else 1.0
        return cls(values, before - survival, tail, prior_s)

    def draw_above(self, done: float, rng: np.random.Generator) -> float:
        """A size given it exceeds ``done``; the tail draws twice the larger
        of ``done`` and the largest size seen to end."""
        largest = float(self.values[-1]) if len(self.values) else self.prior_s
        beyond = 2.0 * max(done, largest)
        first = int(np.searchsorted(self.values, done, side="right"))
        weights = np.append(self.masses[first:], self.tail)
        total = float(weights.sum())
        if total <= 0.0:
            return beyond
        pick = int(rng.choice(len(weights), p=weights / total))
        return beyond if pick == len(weights) - 1 else float(self.values[first + pick])


# -- one sampled future ----------------------------------------------------------
_COLUMNS = ["job_id", "arrival_s", "gpus", "model", "iterations", "iter_time_s"]


def sample_future(
    obs: Observation, horizon_s: float, window_jobs: int, prior_s: float, rng: np.random.Generator
) -> Trace:
    """A trace to fork: the unfinished jobs (arriving now, in the order of
    ``obs.unfinished``, each with its drawn remaining iterations) and the
    sampled arrivals of the horizon."""
    done_s = np.array([j.done_iterations * j.t_compute for j in obs.unfinished])
    sizes = SizeDistribution.estimate(obs.finished_work_s, done_s, prior_s)
    rows: list[tuple[str, float, int, str, float, float]] = []
    for j, done in zip(obs.unfinished, done_s, strict=True):
        total_s = sizes.draw_above(float(done), rng)
        # the work left, plus the restore still owed (the fork's jobs owe none)
        left = max(1.0, total_s / j.t_compute - j.done_iterations)
        rows.append((j.job_id, obs.now, j.gpus, j.model, math.ceil(left), j.t_compute))
    recent = obs.recent[-window_jobs:]
    if len(recent) >= 2 and recent[-1][0] > recent[0][0]:
        rate = (len(recent) - 1) / (recent[-1][0] - recent[0][0])
        t = obs.now
        n = 0
        while True:
            t += float(rng.exponential(1.0 / rate))
            if t >= obs.now + horizon_s:
                break
            _, gpus, model, t_compute = recent[int(rng.integers(len(recent)))]
            work = sizes.draw_above(0.0, rng)
            iterations = math.ceil(max(1.0, work / t_compute))
            rows.append((f"~future{n}", t, gpus, model, iterations, t_compute))
            n += 1
    return Trace("planner-future", pd.DataFrame(rows, columns=_COLUMNS))


def fork(
    obs: Observation, trace: Trace, cluster: Any, lease_s: float | None, restore_s: float
) -> Engine:
    """A fresh engine at ``obs.now`` holding ``trace``'s jobs, the running
    ones started again at their level (in start order) and the history a
    policy reads copied onto the fork's jobs (module docstring)."""
    engine = Engine(
        trace,
        cluster,
        congestion=obs.background,
        lease_s=lease_s,
        restore_s_per_gpu=restore_s,
        record_series=False,
        record_placements=False,
    )
    # the engine's first instant (handled on construction): the unfinished jobs arrive
    for seen, job in zip(obs.unfinished, engine.jobs, strict=False):
        job.attained = seen.attained
        job.compute_time = seen.compute_time
        job.comm_time = seen.comm_time
        job.preemptions = seen.preemptions
        job.restore_debt = seen.restore_owed_s
        if not seen.running:
            job.queued_since = seen.queued_since
            continue
        level = seen.level if seen.level is not None else Level.NETWORK
        for lv in range(level, Level.NETWORK + 1):  # the packer may not find its level
            if engine.placement_for(job, Level(lv)) is not None:
                engine.place(job.index, Level(lv))
                break
    return engine


def rollout_cost(
    engine: Engine, policy: Any, now: float, horizon_s: float, terminal: float
) -> float:
    """Run ``policy`` on the fork until ``now + horizon_s``; its cost: the
    jobs' time in the system within the horizon (s) plus ``terminal`` times
    the ideal remaining run time (s) of those still there at its end."""
    end = now + horizon_s
    policy.reset(EngineView(engine), seed=0)
    view = EngineView(engine)
    try:
        while not engine.done and engine.now < end:
            for _ in range(10_000):
                action = policy.act(view)
                if action is WAIT or isinstance(action, Wait):
                    break
                engine.apply(action)
            engine.advance()
    except StalledError:  # waits with an idle cluster: nothing more will happen
        pass
    stop = min(engine.now, end)
    cost = 0.0
    for job in engine.jobs:
        if job.status == Status.FUTURE:
            continue
        if job.status == Status.DONE:
            cost += min(job.end, end) - job.arrival
            continue
        cost += stop - job.arrival
        cost += terminal * engine.remaining_iterations(job) * job.t_compute / job.gpus
    return cost


# -- the policy ------------------------------------------------------------------
@dataclass
class PlannerStats:
    """What the planning cost: decisions (``act`` calls), planned instants,
    rollouts run and the CPU seconds spent planning."""

    decisions: int = 0
    planned: int = 0
    rollouts: int = 0
    cpu_s: float = 0.0


@dataclass
class PlannerPolicy(BasePolicy):
    """Follow, per instant, the candidate heuristic whose rollouts on sampled
    futures cost least (module docstring). Settings: ``candidates``
    (heuristic names for ``make_policy``), ``horizon_s``, ``futures``,
    ``seed`` (of the draws), ``terminal`` (weight of the remaining work at
    the horizon), ``window_jobs`` (arrivals the arrival model reads),
    ``prior_work_s`` (job size assumed while none has finished), ``margin``
    (another candidate takes the lead only when its cost is below
    ``1 - margin`` times the leader's), ``hold_s`` (after a plan the leader
    leads at least this long: no plan before)."""

    candidates: Sequence[str] = DEFAULT_CANDIDATES
    # 4 h and 1 h: on a quick and a validation case (docs/planner.md) a 1 h
    # horizon, planning at every disagreement, switched to Gandiva's order
    # where it starves long jobs for days
    horizon_s: float = 4 * 3600.0
    futures: int = 4
    seed: int = 0
    terminal: float = 1.0
    window_jobs: int = 200
    prior_work_s: float = 3600.0
    margin: float = 0.0
    hold_s: float = 3600.0
    name: str = "planner"
    stats: PlannerStats = field(default_factory=PlannerStats, repr=False)

    def __post_init__(self) -> None:
        from . import make_policy

        self.candidates = tuple(self.candidates)
        if not self.candidates:
            raise ValueError("planner: candidates must name at least one heuristic")
        if len(set(self.candidates)) != len(self.candidates):
            raise ValueError(f"planner: a candidate is repeated in {list(self.candidates)}")
        for key in ("futures", "window_jobs"):
            if getattr(self, key) < 1:
                raise ValueError(f"planner: {key} must be >= 1, got {getattr(self, key)}")
        for key in ("horizon_s", "prior_work_s"):
            if not getattr(self, key) > 0:
                raise ValueError(f"planner: {key} must be > 0, got {getattr(self, key)}")
        if not self.hold_s >= 0:
            raise ValueError(f"planner: hold_s must be >= 0, got {self.hold_s}")
        if not 0.0 <= self.margin < 1.0:
            raise ValueError(f"planner: margin must be in [0, 1), got {self.margin}")
        if not self.terminal >= 0:
            raise ValueError(f"planner: terminal must be >= 0, got {self.terminal}")
        self._make = make_policy
        self._live = {n: make_policy(n) for n in self.candidates}
        for n, p in self._live.items():
            if p.engine_kwargs().get("lease_s") or p.engine_kwargs().get("clairvoyant"):
                raise ValueError(f"planner: candidate {n!r} needs leases or clairvoyance")
        self._leader = self.candidates[0]
        self._instant = -1
        self._placed_now = set()
        self._hold_until = -math.inf

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        for policy in self._live.values():
            policy.reset(view, seed=seed)
        self._leader = self.candidates[0]
        self._instant = -1
        self._placed_now: set[int] = set()
        self._hold_until = -math.inf
        self.stats = PlannerStats()

    def act(self, view: EngineView) -> Action:
        self.stats.decisions += 1
        # every candidate acts at every call, so its own state follows the run
        proposals = {n: p.act(view) for n, p in self._live.items()}
        if view.instant != self._instant:
            self._instant = view.instant
            self._placed_now = set()
            if len(set(proposals.values())) > 1 and view.now >= self._hold_until:
                self._hold_until = view.now + self.hold_s
                leader = self.plan(view)
                if leader != self._leader:
                    # a heuristic's own state assumes its own past actions:
                    # rebuilt from the view when it takes over (as a portfolio does)
                    self._leader = leader
                    self._live[leader].reset(view, seed=self.seed)
                    proposals[leader] = self._live[leader].act(view)
        action = proposals[self._leader]
        if isinstance(action, Preempt) and action.job in self._placed_now:
            return WAIT  # undoing a start of this instant: a cycle, not a decision
        if isinstance(action, Place):
            self._placed_now.add(action.job)
        return action

    def plan(self, view: EngineView) -> str:
        """The candidate to follow now: the least mean rollout cost, ties to
        the earlier candidate."""
        cpu0 = time.process_time()
        obs = observe(view, self.window_jobs)
        rng = np.random.default_rng([self.seed, view.instant])
        costs = dict.fromkeys(self.candidates, 0.0)
        for _ in range(self.futures):
            trace = sample_future(obs, self.horizon_s, self.window_jobs, self.prior_work_s, rng)
            for name in self.candidates:
                engine = fork(obs, trace, view.cluster, view.lease_s, view.restore_s_per_gpu)
                costs[name] += rollout_cost(
                    engine, self._make(name), obs.now, self.horizon_s, self.terminal
                )
                self.stats.rollouts += 1
        self.stats.planned += 1
        self.stats.cpu_s += time.process_time() - cpu0
        best = min(self.candidates, key=lambda n: (costs[n], self.candidates.index(n)))
        # the leader keeps leading unless beaten by the margin: a switch on
        # noise costs (the new leader starts from the view, without its state)
        if costs[best] < (1.0 - self.margin) * costs[self._leader]:
            return best
        return self._leader


def make() -> PlannerPolicy:
    """A planner with the default settings (``--policy ddl_gym.baselines.planner:make``;
    a zero-argument factory, as the benchmark wants)."""
    return PlannerPolicy()


def quick() -> PlannerPolicy:
    """A planner with the :data:`QUICK` settings (``--policy ddl_gym.baselines.planner:quick``)."""
    return PlannerPolicy(**QUICK)
