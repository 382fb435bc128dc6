"""A portfolio scheduler: the learned agent and heuristics, one at a time,
chosen online by replaying the cluster's own recent jobs.

No single policy is best on every job population: the shipped agent beats
every heuristic on the seed's, Philly's and Alibaba's traces but loses to
Tiresias on small clusters of short jobs (Pollux at 64 GPUs, Tiresias' own
60-job trace) and to Gandiva on one Pollux trace (docs/agents_log.md). Which
regime a cluster is in shows in its jobs, so the portfolio asks the
workload itself:

* after the first ``warmup_jobs`` arrivals (the agent acts before that),
  and then after max(``every_jobs``, ``growth`` - 1 times the arrivals so
  far) more (at most ``max_every_jobs``, 40), it builds a *replay*:
  the last ``window_jobs`` jobs that arrived plus every job still in the
  system, at their true arrival times, on the same cluster, congestion and
  engine settings;
* it runs each candidate on that replay from an empty cluster and scores
  it twice: the replayed jobs' mean time in the system up to the present,
  and their mean JCT once all are done; it switches to a candidate only if
  it beats the active policy by ``margin`` on both (up to the present alone
  favours Tiresias' least-attained-service order, whose cost in starved
  long jobs shows later; the full replay alone rests on drawn sizes);
* it stays non-clairvoyant: a job that has finished replays its known size;
  one still in the system replays a size larger than the work it has done
  so far, drawn from the Kaplan-Meier estimate of job sizes that counts the
  finished jobs and every unfinished one as a size known to exceed its done
  work (its mass beyond the largest size seen to end draws twice the larger
  of that size and the job's done work), with a random generator seeded by
  the policy's seed (``sizes="finished"``: from the finished jobs' sizes
  alone, which are biased short).
  Future arrivals are never read (``future="repeat"`` stands the window's
  jobs in for them once more, as load: a replay that drains flatters a
  policy that defers long jobs).

A candidate that takes over mid-run is ``reset`` on the current state (the
heuristics rebuild their view of the running and waiting jobs from it).

``make()``'s Tiresias keeps every job that fits in one rack inside one
(``sensitivity=1``; the registered baseline classes a model as needing that
only when it runs over 2x slower across racks on an idle network): on a
congested 2-rack cluster the baseline's cross-rack starts of 8-GPU jobs
tripled their run time, and a switch to it cost the portfolio 2.7x Gandiva's
mean JCT (docs/agents_log.md, "A consolidating Tiresias in the portfolio").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ddl_gym.engine import Action, EngineView, Job, Status
from ddl_gym.engine.engine import Engine
from ddl_gym.engine.simulate import run_policy
from ddl_gym.traces import Trace

# the settings of make()'s heuristic candidates (chosen on validation: the module docstring)
SHIPPED_HEURISTIC_OPTIONS: dict[str, dict[str, Any]] = {"tiresias": {"sensitivity": 1.0}}

if TYPE_CHECKING:
    from ddl_gym.agents.policy import AgentPolicy

Factory = Callable[[], Any]
CRITERIA = ("so_far", "full", "both")
SIZE_MODELS = ("finished", "km")
FUTURE_MODELS = ("none", "repeat")
# the job-id suffix of a replayed job's stand-in for a future arrival
NEXT = "~next"


@dataclass
class Choice:
    """One selection: when, after how many arrivals, over how many replayed
    jobs, every candidate's replay scores (``ReplayScore``'s two, s) and
    the one chosen."""

    time: float
    arrivals: int
    jobs: int
    so_far_s: dict[str, float]
    full_s: dict[str, float]
    chosen: str


def done_iterations(view: EngineView, job: Job) -> float:
    """Iterations ``job`` has completed by now (what anyone watching the
    cluster knows; not its total)."""
    if job.status == Status.RUNNING:
        start = max(job.last_update, job.busy_until)
        return job.progress + job.rate * max(0.0, view.now - start)
    return job.progress


@dataclass
class ReplayPortfolio:
    """Switch among ``candidates`` (name -> factory of a fresh policy) by
    replaying recent jobs; ``first`` acts until the first selection."""

    candidates: dict[str, Factory]
    first: str
    engine_settings: dict[str, Any]
    warmup_jobs: int = 20
    every_jobs: int = 20
    # the next selection after max(every_jobs, (growth - 1) x arrivals so
    # far) more arrivals: replays cost about the jobs they hold, so a
    # geometric schedule keeps the total linear in the trace's length
    growth: float = 1.25
    # at most this many arrivals between selections (None: no cap). The
    # geometric schedule alone stops looking late in a trace: on a trace
    # whose last 14 % of arrivals bring 43 % of its work (philly-val@pcie16)
    # the last selection came before them. 40 with sizes="km" chosen on
    # fresh validation seeds (docs/agents_log.md, "A confirmation on fresh
    # validation seeds")
    max_every_jobs: int | None = 40
    window_jobs: int = 400
    # switch only to a candidate whose replay scores are this much (relative)
    # below the active one's: equal scores on a light replay are no reason
    # to change policy. 0.10 chosen over 0.05 on validation (10 seeds per
    # case) and train (docs/agents_log.md, "A replay portfolio")
    margin: float = 0.10
    # what a candidate must beat the active policy on, by the margin:
    # "so_far", the replayed jobs' mean time in the system up to the present
    # (no guess of how unfinished jobs end, but blind to whom a policy
    # starves: Tiresias' least-attained-service order looks best early);
    # "full", their mean JCT with the drawn sizes; "both" (default): both
    criterion: str = "both"
    # how many replays per selection, each with its own draw of the
    # unfinished jobs' sizes (the finished jobs and arrival times the same):
    # a candidate must beat the active policy by the margin in every draw,
    # so a switch needs evidence that holds whatever the unknown sizes are
    draws: int = 1
    # where an unfinished job's size is drawn from, above the work it has
    # done: "finished", the finished jobs' sizes (uniform); "km", the
    # Kaplan-Meier estimate that also counts the unfinished jobs as sizes
    # known to exceed their done work. Finished jobs are biased short (a
    # long job is still running when short ones that arrived with it are
    # done): on the train split "finished" draws came out at 0.29-0.86x the
    # true sizes (geometric mean per case), "km" at 0.46-1.36x with 7 of 12
    # cases within 20 % (python -m research.size_bias). "km" alone chose
    # no better (docs/agents_log.md, "Replay fidelity"); with the cap above it
    # keeps a switch to Tiresias from starving a long job whose size the
    # finished jobs understate (docs/agents_log.md, "The cap with Kaplan-Meier sizes")
    sizes: str = "km"
    # what arrives after the present in a replay: "none" (the replay drains,
    # which flatters a policy that defers long jobs: with no new short jobs
    # they run anyway); "repeat": the window's jobs once more, shifted to
    # arrive from the present on, as load only (the scores are of the
    # replayed jobs that did arrive)
    future: str = "none"
    name: str = "portfolio"
    choices: list[Choice] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if self.first not in self.candidates:
            raise ValueError(f"first={self.first!r} is not a candidate: {sorted(self.candidates)}")
        for key in ("warmup_jobs", "every_jobs", "window_jobs", "draws"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be >= 1, got {getattr(self, key)}")
        if self.max_every_jobs is not None and self.max_every_jobs < self.every_jobs:
            raise ValueError(
                f"max_every_jobs must be >= every_jobs ({self.every_jobs}), "
                f"got {self.max_every_jobs}"
            )
        if not self.growth >= 1.0:
            raise ValueError(f"growth must be >= 1, got {self.growth}")
        if self.future not in FUTURE_MODELS:
            raise ValueError(f"future must be one of {FUTURE_MODELS}, got {self.future!r}")
        if self.sizes not in SIZE_MODELS:
            raise ValueError(f"sizes must be one of {SIZE_MODELS}, got {self.sizes!r}")
        if self.criterion not in CRITERIA:
            raise ValueError(f"criterion must be one of {CRITERIA}, got {self.criterion!r}")
        if not 0.0 <= self.margin < 1.0:
            raise ValueError(f"margin must be in [0, 1), got {self.margin}")
        self._live = {n: f() for n, f in self.candidates.items()}
        self._active = self.first
        self._arrived = 0
        self._next_at = self.warmup_jobs
        self._rng = np.random.default_rng(0)
        self._instant = -1

    def engine_kwargs(self) -> dict[str, Any]:
        """One engine for every candidate: the settings they are compared under."""
        return dict(self.engine_settings)

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        self._active = self.first
        self._live[self.first].reset(view, seed=seed)
        self._arrived = sum(1 for j in view.jobs if j.status != Status.FUTURE)
        self._next_at = self.warmup_jobs
        self._rng = np.random.default_rng(seed)
        self._instant = view.instant
        self.choices = []

    @property
    def active(self) -> str:
        return self._active

    def act(self, view: EngineView) -> Action:
        if view.instant != self._instant:  # first call of this instant
            self._instant = view.instant
            self._arrived += sum(1 for kind, _ in view.events if kind == "arrival")
            if self._arrived >= self._next_at:
                self._next_at = self._arrived + self._gap()
                self._select(view)
        return self._live[self._active].act(view)

    def _gap(self) -> int:
        """Arrivals until the next selection."""
        gap = max(self.every_jobs, math.ceil(self._arrived * self.growth) - self._arrived)
        return gap if self.max_every_jobs is None else min(gap, self.max_every_jobs)

    # -- selection -------------------------------------------------------------
    def _select(self, view: EngineView) -> None:
        traces = [self.replay_trace(view) for _ in range(self.draws)]
        engine = view._engine  # noqa: SLF001 (its scenario: cluster, congestion, perf model)
        scores = {
            name: [
                replay_scores(trace, engine, factory(), self.engine_settings, view.now)
                for trace in traces
            ]
            for name, factory in self.candidates.items()
        }
        best = self._better_than_active(scores)
        self.choices.append(
            Choice(
                view.now,
                self._arrived,
                len(traces[0]),
                {n: float(np.mean([d.so_far_s for d in s])) for n, s in scores.items()},
                {n: float(np.mean([d.full_s for d in s])) for n, s in scores.items()},
                best,
            )
        )
        if best != self._active:
            self._active = best
            self._live[best].reset(view, seed=int(self._rng.integers(2**31)))

    def _better_than_active(self, scores: Mapping[str, Sequence[ReplayScore]]) -> str:
        """The candidate that beats the active one by the margin on every
        measure of the criterion in every draw (``scores``: one per draw,
        the same draws for every candidate; the largest worst-case gain
        among several), else the active one."""
        keys = {"so_far": ("so_far_s",), "full": ("full_s",), "both": ("so_far_s", "full_s")}
        mine = scores[self._active]

        def worst_ratio(name: str) -> float:
            return max(
                getattr(theirs, k) / max(getattr(own, k), 1e-9)
                for theirs, own in zip(scores[name], mine, strict=True)
                for k in keys[self.criterion]
            )

        ratios = {n: worst_ratio(n) for n in scores if n != self._active}
        best = min(ratios, key=lambda n: (ratios[n], n), default=None)
        if best is None or ratios[best] >= 1.0 - self.margin:
            return self._active
        return best

    def replay_trace(self, view: EngineView) -> Trace:
        """The jobs to replay: the last ``window_jobs`` arrivals and every
        job in the system, sizes known or drawn (see the module docstring)."""
        arrived = [j for j in view.jobs if j.status != Status.FUTURE]
        recent = sorted(arrived, key=lambda j: (j.arrival, j.index))[-self.window_jobs :]
        unfinished = [j for j in arrived if j.status in (Status.PENDING, Status.RUNNING)]
        chosen = {j.index: j for j in (*recent, *unfinished)}
        finished = np.sort(
            np.array([j.iterations * j.t_compute for j in arrived if j.status == Status.DONE])
        )
        done_it = {j.index: done_iterations(view, j) for j in unfinished}
        km = None
        if self.sizes == "km":
            exceeded = np.array([done_it[j.index] * j.t_compute for j in unfinished])
            km = SizeEstimate.kaplan_meier(finished, exceeded)
        rows = []
        for j in sorted(chosen.values(), key=lambda j: (j.arrival, j.index)):
            if j.status == Status.DONE:
                iterations = j.iterations
            else:
                done = done_it[j.index]
                done_s = done * j.t_compute
                if km is not None:
                    total_s = km.draw_above(done_s, self._rng)
                else:
                    larger = finished[np.searchsorted(finished, done_s, side="right") :]
                    total_s = float(self._rng.choice(larger)) if len(larger) else 2.0 * done_s
                iterations = max(total_s / j.t_compute, done, 1.0)
            rows.append((j.job_id, j.arrival, j.gpus, j.model, math.ceil(iterations), j.t_compute))
        if self.future == "repeat" and len(recent) > 1:
            # the window again, from one mean gap after the present on
            first, last = recent[0].arrival, recent[-1].arrival
            shift = view.now - first + (last - first) / (len(recent) - 1)
            size = {row[0]: row[4] for row in rows}
            rows += [
                (j.job_id + NEXT, j.arrival + shift, j.gpus, j.model, size[j.job_id], j.t_compute)
                for j in recent
            ]
        jobs = pd.DataFrame(
            rows, columns=["job_id", "arrival_s", "gpus", "model", "iterations", "iter_time_s"]
        )
        return Trace("replay", jobs)


@dataclass(frozen=True)
class SizeEstimate:
    """A job-size distribution (seconds of work) as point masses at
    ``values`` (increasing) with ``masses``, plus ``tail``: the mass beyond
    the largest value, where nothing has been seen to end."""

    values: np.ndarray
    masses: np.ndarray
    tail: float

    @classmethod
    def kaplan_meier(cls, ended: np.ndarray, exceeded: np.ndarray) -> SizeEstimate:
        """From sizes seen to end (``ended``) and sizes known only to exceed
        a value (``exceeded``: the work done by jobs still in the system).
        A job still running at ``t`` is at risk at ``t``."""
        ended, exceeded = np.sort(ended), np.sort(exceeded)
        values, ends = np.unique(ended, return_counts=True)
        at_risk = (len(ended) - np.searchsorted(ended, values, side="left")) + (
            len(exceeded) - np.searchsorted(exceeded, values, side="left")
        )
        survival = np.cumprod(1.0 - ends / at_risk)
        before = np.concatenate([[1.0], survival[:-1]])
        tail = float(survival[-1]) if len(survival) else 1.0
        return cls(values, before - survival, tail)

    def draw_above(self, done: float, rng: np.random.Generator) -> float:
        """A size drawn from the estimate given it exceeds ``done``; the
        tail's share draws twice the larger of ``done`` and the largest size
        seen to end."""
        first = np.searchsorted(self.values, done, side="right")
        weights = np.append(self.masses[first:], self.tail)
        beyond = 2.0 * max(done, float(self.values[-1]) if len(self.values) else 0.0)
        total = float(weights.sum())
        if total <= 0.0:
            return beyond
        pick = int(rng.choice(len(weights), p=weights / total))
        return beyond if pick == len(weights) - 1 else float(self.values[first + pick])


@dataclass(frozen=True)
class ReplayScore:
    """A candidate's replay: mean time in the system up to the present
    (``so_far_s``) and mean JCT once every replayed job is done (``full_s``)."""

    so_far_s: float
    full_s: float


def replay_scores(
    trace: Trace, real: Engine, policy: Any, settings: dict[str, Any], now: float
) -> ReplayScore:
    """``policy`` on ``trace`` under ``real``'s scenario (cluster,
    congestion, performance model) and ``settings``, scored at ``now`` (a
    job still in the system then counts ``now - arrival``) and at the end."""
    engine = Engine(
        trace,
        real.cluster,
        congestion=real.congestion,
        perf_source=real.slowdown_source or "closed_form",
        contention=real.contention,
        record_series=False,
        record_placements=False,
        **settings,
    )
    policy.reset(EngineView(engine), seed=0)
    run_policy(engine, policy, pause_gc=False)
    # every replayed job arrived by ``now``: its time in the system up to then
    # follows from its end, so one run to the end gives both scores
    scored = [j for j in engine.jobs if not j.job_id.endswith(NEXT)]  # stand-ins are load only
    ends = np.array([j.end for j in scored])
    arrivals = np.array([j.arrival for j in scored])
    so_far = float(np.mean(np.minimum(ends, now) - arrivals))
    return ReplayScore(so_far, float(np.mean(ends - arrivals)))


# -- the shipped portfolio -------------------------------------------------------------
def make(
    heuristics: Sequence[str] = ("tiresias", "gandiva"),
    model: str | Path | AgentPolicy | None = None,
    heuristic_options: Mapping[str, Mapping[str, Any]] | None = None,
    **kwargs: Any,
) -> ReplayPortfolio:
    """The shipped agent (or ``model``: a saved model's path or a loaded
    ``AgentPolicy``, e.g. a ``CheckpointEnsemble``) and ``heuristics``, under
    the agent's engine settings; ``heuristic_options`` maps a heuristic's
    name to the settings it is built with (``make_policy(name, **options)``;
    None: ``SHIPPED_HEURISTIC_OPTIONS``, Tiresias at sensitivity 1; ``{}``:
    every heuristic as registered, the portfolio shipped before);
    ``kwargs`` set ``ReplayPortfolio``'s fields.
    ``ddl-gym benchmark evaluate --policy ddl_gym.agents.portfolio:make``."""
    from ddl_gym.agents.policy import DEFAULT_MODEL, AgentPolicy, load_policy
    from ddl_gym.baselines import make_policy

    if heuristic_options is None:
        heuristic_options = {h: o for h, o in SHIPPED_HEURISTIC_OPTIONS.items() if h in heuristics}
    options = dict(heuristic_options)
    unknown = sorted(set(options) - set(heuristics))
    if unknown:
        raise ValueError(
            f"heuristic_options names {unknown}, not among the heuristics {list(heuristics)}"
        )
    agent = model if isinstance(model, AgentPolicy) else load_policy(model or DEFAULT_MODEL)

    candidates: dict[str, Factory] = {"agent": agent.fresh}
    for h in heuristics:
        candidates[h] = partial(make_policy, h, **options.get(h, {}))
    return ReplayPortfolio(candidates, "agent", agent.engine_kwargs(), **kwargs)
