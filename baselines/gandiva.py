"""Gandiva: affinity packing by GPU demand and migration of fragmented jobs.

Source: Xiao et al., "Gandiva: Introspective Cluster Scheduling for Deep
Learning", OSDI'18, as used by the seed paper (affinity by GPU demand,
migration once space frees, no checkpoint cost). Gandiva's time-slicing
(suspend/resume of several jobs on one GPU) has no counterpart in our engine
and is left out.

* scheduling: arrival order with backfilling (any job that fits may start);
* placement (affinity): servers prefer jobs of the same GPU demand. The
  engine's ``Place`` only names a level and its best-fit packer picks the
  servers, so affinity is applied as an order: among the waiting jobs that
  fit now, those whose placement lands on servers already running jobs of
  the same demand go first, then those landing on empty servers, then the
  rest (Gandiva's relaxation when no affine server is free). Each job takes
  the tightest placement free (machine, else rack, else network).
* migration: when a job completes, every running job spread wider than its
  size needs (e.g. across racks though it fits one) is moved if releasing it
  would let it restart at a strictly tighter level: ``Preempt`` and, at the
  same instant, ``Place`` at that level. Gandiva's migration is cheap, so
  the policy asks for no checkpoint cost (``restore_s_per_gpu = 0``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ddl_gym.engine import WAIT, Action, EngineView, Job, Place, Preempt
from ddl_gym.perf import Level, shape_of

from .common import BasePolicy, free_after, placement_on, size_level


@dataclass
class GandivaPolicy(BasePolicy):
    migrate: bool = True
    name: str = "gandiva"
    _moving: dict[int, Level] = field(default_factory=dict, repr=False)

    def engine_kwargs(self) -> dict[str, Any]:
        return {"restore_s_per_gpu": 0.0}

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        self._moving.clear()

    # -- migration ---------------------------------------------------------
    def tighter_level(self, view: EngineView, job: Job) -> Level | None:
        """A level strictly tighter than the job's current one that it would
        get if it released its GPUs now (None if there is none)."""
        cluster = view.cluster
        if job.level is None or job.level <= size_level(cluster, job.gpus):
            return None
        free = free_after(view, [job])
        for level in range(size_level(cluster, job.gpus), job.level):
            placement = placement_on(cluster, free, job.gpus, Level(level))
            if placement is not None:
                got = shape_of(placement, cluster.servers_per_rack).level
                if got < job.level:
                    return got
        return None

    def _migration(self, view: EngineView) -> Action | None:
        for index, level in list(self._moving.items()):
            del self._moving[index]
            job = view.job(index)
            if view.can_place(job, level):
                return Place(index, level)
        if not self.migrate or not any(kind == "completion" for kind, _ in view.events):
            return None
        cluster = view.cluster
        for job in view.running:
            # only a job spread wider than its size needs can move (cheap test first)
            if job.level is None or job.level <= size_level(cluster, job.gpus):
                continue
            level = self.tighter_level(view, job)
            if level is not None:
                self._moving[job.index] = level
                return Preempt(job.index)
        return None

    # -- affinity placement --------------------------------------------------
    def _tier(self, demands: list[set[int]], job: Job, placement) -> int:
        """0: every server already runs only jobs of this demand; 1: onto
        empty servers (or a mix of those and affine ones); 2: mixed demands."""
        tier = 0
        for server, _ in placement:
            held = demands[server]
            if not held:
                tier = max(tier, 1)
            elif held != {job.gpus}:
                return 2
        return tier

    def act(self, view: EngineView) -> Action:
        action = self._migration(view)
        if action is not None:
            return action
        pending = view.pending
        if not pending:
            return WAIT
        demands: list[set[int]] | None = None  # built once some job fits
        best: tuple[int, int] | None = None
        free = view.total_free
        failed: set[int] = set()  # demands that found no placement (state is fixed)
        for order, job in enumerate(pending):
            if job.gpus > free or job.gpus in failed:
                continue
            placement = view.placement_for(job, Level.NETWORK)
            if placement is None:
                failed.add(job.gpus)
                continue
            if demands is None:
                demands = [set() for _ in range(view.cluster.num_servers)]
                for other in view.running:
                    for server, _ in other.placement:
                        demands[server].add(other.gpus)
            tier = self._tier(demands, job, placement)
            if best is None or (tier, order) < best:
                best = (tier, order)
                chosen = job
                if tier == 0:
                    break
        if best is None:
            return WAIT
        return Place(chosen.index, Level.NETWORK)
