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

from ddl_gym.engine import WAIT, Action, EngineView, Job, Place, Preempt, Status
from ddl_gym.perf import Level

from .common import BasePolicy, TighterMoves, completed_now, may_tighten, size_level


@dataclass
class GandivaPolicy(BasePolicy):
    migrate: bool = True
    name: str = "gandiva"
    _moves: TighterMoves = field(default_factory=TighterMoves, repr=False)
    # Incremental view of the running jobs (thousands at scale, where
    # rescanning them at every completion and placement dominated):
    # ``_demands[server]``: GPU demand -> number of running jobs of that demand
    # on the server; ``_tracked``: the running jobs counted in it; ``_spread``:
    # running jobs spread wider than their size needs -> a number that grows
    # with their start (the engine's order of ``view.running``).
    _demands: list[dict[int, int]] = field(default_factory=list, repr=False)
    _tracked: dict[int, Job] = field(default_factory=dict, repr=False)
    _spread: dict[int, int] = field(default_factory=dict, repr=False)
    _started: int = field(default=0, repr=False)
    # Which spread jobs a migration pass must look at (the others cannot
    # tighten: see ``_candidates``): per (GPUs, level), on each server (jobs
    # of at most a server's GPUs) and rack (network-level jobs), the servers
    # freed since the last pass that moved nobody, the jobs spread since,
    # those that could tighten but did not (``_sticky``), and whether to
    # look at all of them (after a rebuild).
    _spread_by: dict[tuple[int, int], dict[int, None]] = field(default_factory=dict, repr=False)
    _on_server: dict[int, set[int]] = field(default_factory=dict, repr=False)
    _on_rack: dict[int, set[int]] = field(default_factory=dict, repr=False)
    _freed: set[int] = field(default_factory=set, repr=False)
    _fresh: set[int] = field(default_factory=set, repr=False)
    _sticky: set[int] = field(default_factory=set, repr=False)
    _full: bool = field(default=True, repr=False)
    _joining: list[int] = field(default_factory=list, repr=False)
    _leaving: list[int] = field(default_factory=list, repr=False)
    _synced_instant: int = field(default=-1, repr=False)
    _servers: dict[int, list[int]] = field(default_factory=dict, repr=False)

    def engine_kwargs(self) -> dict[str, Any]:
        return {"restore_s_per_gpu": 0.0}

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        self._moves.clear()
        self._demands = [{} for _ in range(view.cluster.num_servers)]
        self._tracked.clear()
        self._clear_spread()
        self._joining.clear()
        self._leaving.clear()
        self._synced_instant = -1
        self._servers.clear()

    def _clear_spread(self) -> None:
        self._spread.clear()
        self._spread_by.clear()
        self._on_server.clear()
        self._on_rack.clear()
        self._freed.clear()
        self._fresh.clear()
        self._sticky.clear()
        self._full = True

    # -- incremental running state -------------------------------------------
    def _track(self, view: EngineView, job: Job) -> None:
        self._tracked[job.index] = job
        for server, _ in job.placement:
            held = self._demands[server]
            held[job.gpus] = held.get(job.gpus, 0) + 1
        if job.level is not None and job.level > size_level(view.cluster, job.gpus):
            self._unspread(job)
            index = job.index
            self._started += 1
            self._spread[index] = self._started  # started last
            self._spread_by.setdefault((job.gpus, job.level), {})[index] = None
            cluster = view.cluster
            if job.gpus <= cluster.gpus_per_server:
                for server, _ in job.placement:
                    self._on_server.setdefault(server, set()).add(index)
            if job.level == Level.NETWORK:
                for rack in job.racks:
                    self._on_rack.setdefault(rack, set()).add(index)
            self._fresh.add(index)

    def _unspread(self, job: Job) -> None:
        """Drop ``job`` from the spread jobs' indexes (if it is there)."""
        index = job.index
        if self._spread.pop(index, None) is None:
            return
        group = self._spread_by[(job.gpus, job.level)]  # pyright: ignore[reportArgumentType]
        del group[index]
        if not group:
            del self._spread_by[(job.gpus, job.level)]  # pyright: ignore[reportArgumentType]
        for server in self._servers.get(index, ()):
            on = self._on_server.get(server)
            if on is not None:
                on.discard(index)
        for rack in job.racks:
            on = self._on_rack.get(rack)
            if on is not None:
                on.discard(index)
        self._fresh.discard(index)
        self._sticky.discard(index)

    def _untrack(self, index: int) -> None:
        job = self._tracked.pop(index, None)
        if job is None:
            return
        self._unspread(job)
        # the placement it was counted with: a stopped job's is cleared, so
        # count by the servers recorded at start
        servers = self._servers.pop(index)
        self._freed.update(servers)
        for server in servers:
            held = self._demands[server]
            if held[job.gpus] == 1:
                del held[job.gpus]
            else:
                held[job.gpus] -= 1

    def _sync(self, view: EngineView) -> None:
        """Apply this instant's completions and this policy's own placements
        and preemptions (``run_policy`` calls ``act`` at every instant and
        after every action); rebuilt from the view if the count disagrees."""
        if self._synced_instant != view.instant:
            self._synced_instant = view.instant
            for kind, index in view.events:
                if kind == "completion":
                    self._untrack(index)
        for index in self._leaving:
            self._untrack(index)
        self._leaving.clear()
        for index in self._joining:
            job = view.job(index)
            if job.status == Status.RUNNING:
                self._untrack(index)
                self._servers[index] = [server for server, _ in job.placement]
                self._track(view, job)
        self._joining.clear()
        if len(self._tracked) != view.n_running:
            for held in self._demands:
                held.clear()
            self._tracked.clear()
            self._servers.clear()
            self._clear_spread()
            for job in view.running:
                self._servers[job.index] = [server for server, _ in job.placement]
                self._track(view, job)

    # -- migration ---------------------------------------------------------
    def _migration(self, view: EngineView) -> Action | None:
        action = self._moves.finish(view)
        if action is not None:
            return action
        if not self.migrate or not completed_now(view):
            return None
        # only a job spread wider than its size needs can move, the first
        # (in start order) that would get a tighter level
        for index in self._candidates(view):
            job = self._tracked[index]
            action = self._moves.start(view, job)
            if action is not None:
                return action
            if may_tighten(view, job):
                self._sticky.add(index)  # it could, yet did not: ask again
            else:
                self._sticky.discard(index)
        # nobody moves: from here on only what changes can make one move
        self._freed.clear()
        self._fresh.clear()
        self._full = False
        return None

    def _candidates(self, view: EngineView) -> list[int]:
        """The spread jobs that may tighten now, in start order: a superset
        of those ``may_tighten`` holds for. After a pass that moved nobody,
        no spread job outside ``_sticky`` could tighten; since then free GPUs
        grew only where jobs stopped (starts only take them), so a job can
        have come to tighten only if it is new, on a freed server or rack,
        or of a size the largest free server (rack, for a job across racks)
        now holds: ``may_tighten``'s tests, each on what it reads."""
        if self._full:
            return sorted(self._spread, key=self._spread.__getitem__)
        cands = self._sticky | self._fresh
        S = view.cluster.servers_per_rack
        for server in self._freed:
            cands.update(self._on_server.get(server, ()))
        for rack in {server // S for server in self._freed}:
            cands.update(self._on_rack.get(rack, ()))
        G = view.cluster.gpus_per_server
        rack_gpus = view.cluster.gpus_per_rack
        largest = view.largest_server_free()
        top_rack = -1  # the most free GPUs in a rack, when first needed
        for (gpus, level), members in self._spread_by.items():
            if gpus <= G and largest >= gpus:
                cands.update(members)
            elif level == Level.NETWORK and gpus <= rack_gpus:
                if top_rack < 0:
                    top_rack = max(view.free_per_rack)
                if top_rack >= gpus:
                    cands.update(members)
        return sorted(cands, key=self._spread.__getitem__)

    # -- affinity placement --------------------------------------------------
    def _tier(self, demands: list[dict[int, int]], job: Job, placement) -> int:
        """0: every server already runs only jobs of this demand; 1: onto
        empty servers (or a mix of those and affine ones); 2: mixed demands."""
        tier = 0
        for server, _ in placement:
            held = demands[server]  # demand -> running jobs of it on the server
            if not held:
                tier = max(tier, 1)
            elif len(held) != 1 or job.gpus not in held:
                return 2
        return tier

    def act(self, view: EngineView) -> Action:
        self._sync(view)
        action = self._decide(view)
        if isinstance(action, Place):
            self._joining.append(action.job)
        elif isinstance(action, Preempt):
            self._leaving.append(action.job)
        return action

    def _decide(self, view: EngineView) -> Action:
        action = self._migration(view)
        if action is not None:
            return action
        pending = view.pending
        if not pending:
            return WAIT
        demands = self._demands
        best: tuple[int, int] | None = None
        free = view.total_free
        # State is fixed during the pass, so placement and tier depend on the
        # demand alone: the first waiting job of a demand decides for all of
        # them (a later one ties on tier and loses on order). Skip the rest.
        # (the first job of each demand that fits the free count, in queue
        # order: what a scan of the queue would look at, without the scan)
        heads = []
        for gpus in view.pending_demands():
            if gpus <= free:
                head = view.first_pending(gpus)
                if head is not None:
                    heads.append(head)
        heads.sort(key=lambda job: (job.arrival, job.index))
        for order, job in enumerate(heads):
            placement = view.placement_for(job, Level.NETWORK)
            if placement is None:
                continue
            tier = self._tier(demands, job, placement)
            if best is None or (tier, order) < best:
                best = (tier, order)
                chosen = job
                if tier == 0:
                    break
        if best is None:
            return WAIT
        return Place(chosen.index, Level.NETWORK)
