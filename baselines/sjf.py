"""Shortest job first (non-preemptive) and shortest remaining time first.

Scheduling key (lower first), as in the SJF/SRTF baselines of the Tiresias
paper (Gu et al., NSDI'19), measured in GPU-time so that a wide job counts as
long as its area:

* clairvoyant scenario (``view.clairvoyant``): the remaining single-GPU work,
  ``view.remaining_work(job)`` (GPU-seconds of compute left);
* otherwise the policies never read remaining work (the view would refuse
  anyway) and fall back to what a real scheduler knows (our choice):
  SJF orders by requested GPUs (smaller first, then arrival), the only size
  known at submission; SRTF orders by least attained GPU-service (GPUs x
  time held), i.e. it degrades to least-attained-service, the standard
  non-clairvoyant stand-in for SRTF.

Both are oracles as shipped: their ``engine_kwargs()`` ask for a
clairvoyant engine (the engine's default is not), and comparison tables
label them ``(oracle)`` (``ddl_gym.experiments.grid.policy_label``). An
explicit ``clairvoyant=False`` turns them into the non-clairvoyant variants.

Placement: first fit at any level (the packer still picks the tightest).
SJF backfills: a job that does not fit lets smaller-priority jobs that do
fit start. SRTF preempts running jobs with a worse key to make room for a
better waiting one (``PriorityPreemptive``); decisions happen at arrivals
and completions only, so keys are compared at events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ddl_gym.engine import WAIT, Action, EngineView, Job, Status
from ddl_gym.perf import Level

from .common import BasePolicy, PriorityPreemptive, first_placeable


def _remaining_key(view: EngineView, job: Job) -> float:
    return view.remaining_work(job)


class _Oracle:
    """Mixin: the policy reads true job sizes, so it asks for a clairvoyant engine."""

    def engine_kwargs(self) -> dict[str, Any]:
        return {**super().engine_kwargs(), "clairvoyant": True}  # type: ignore[misc]


@dataclass
class SjfPolicy(_Oracle, BasePolicy):
    name: str = "sjf"

    def key(self, view: EngineView, job: Job) -> tuple:
        if view.clairvoyant:
            return (_remaining_key(view, job), job.arrival, job.index)
        return (job.gpus, job.arrival, job.index)

    def act(self, view: EngineView) -> Action:
        pending = view.pending
        if not pending:
            return WAIT
        order = sorted(pending, key=lambda j: self.key(view, j))
        return first_placeable(view, order, lambda j: Level.NETWORK)


@dataclass
class SrtfPolicy(_Oracle, PriorityPreemptive, BasePolicy):
    name: str = "srtf"
    # a waiting job's key is frozen until it runs again: cached with the
    # progress and service it was computed from
    _keys: dict[int, tuple] = field(default_factory=dict, repr=False)

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        self._keys.clear()

    def _key(self, view: EngineView, job: Job) -> tuple:
        if view.clairvoyant:
            return (_remaining_key(view, job), job.arrival)
        return (view.attained(job), job.arrival)

    def key(self, view: EngineView, job: Job) -> tuple:
        if job.status != Status.PENDING:
            return self._key(view, job)
        stamp = (job.progress, job.attained, view.clairvoyant)
        cached = self._keys.get(job.index)
        if cached is None or cached[0] != stamp:
            cached = self._keys[job.index] = (stamp, self._key(view, job))
        return cached[1]

    def act(self, view: EngineView) -> Action:
        return self.schedule(view)
