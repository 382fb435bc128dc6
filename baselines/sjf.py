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

Placement: first fit at any level (the packer still picks the tightest).
SJF backfills: a job that does not fit lets smaller-priority jobs that do
fit start. SRTF preempts running jobs with a worse key to make room for a
better waiting one (``PriorityPreemptive``); decisions happen at arrivals
and completions only, so keys are compared at events.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddl_gym.engine import WAIT, Action, EngineView, Job
from ddl_gym.perf import Level

from .common import BasePolicy, PriorityPreemptive, first_placeable


def _remaining_key(view: EngineView, job: Job) -> float:
    return view.remaining_work(job)


@dataclass
class SjfPolicy(BasePolicy):
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
class SrtfPolicy(PriorityPreemptive, BasePolicy):
    name: str = "srtf"

    def key(self, view: EngineView, job: Job) -> tuple:
        if view.clairvoyant:
            return (_remaining_key(view, job), job.arrival)
        return (view.attained(job), job.arrival)

    def act(self, view: EngineView) -> Action:
        return self.schedule(view)
