"""Shortest remaining service first (SRSF), consolidation-aware: a strong oracle.

An oracle (it reads true job sizes, ``view.remaining_work``; its
``engine_kwargs()`` ask for a clairvoyant engine, as SJF/SRTF's do) meant as
an achievable reference between the heuristics and the lower bound of
``ddl_gym.benchmarks.bounds``. Our rules, built from the repository's own
parts (``PriorityPreemptive`` as SRTF and Tiresias use it, ``TighterMoves``
as Gandiva's migration does):

* scheduling: gang, preemptive priority by least remaining service, ties
  by arrival. The service is the GPU-seconds left: the remaining
  single-GPU work times (``comm_key``) the job's predicted slowdown at its
  tightest placement, i.e. the GPU time it still needs there (SRPT's rule
  on the area a cluster of GPUs processes; ``bounds``' fluid relaxation is
  minimised by it). A waiting job's key is fixed while it waits and a
  running one's only falls, so a preempted job never preempts back the job
  that displaced it. On an engine that hides job sizes the key falls back to
  the GPU-service attained so far, as SRTF's does (then it is no oracle).
* placement (consolidation): a job that fits one rack is kept inside one
  rack when crossing racks would slow it (predicted slowdown across racks
  above ``rack_sensitivity`` times its tightest one, uplinks at the current
  background; 1.0: any slowdown counts), as the consolidating Tiresias keeps
  it; likewise a job that fits one server is kept on one server
  (``server_sensitivity``; None: it may spread within a rack). A job that
  must span racks starts only on a placement whose predicted slowdown (alone
  on its uplinks) is at most ``spread_limit`` times that of the fewest racks
  that hold it (None: anywhere), and preempts only jobs whose GPUs give it
  such a placement. A job that does not fit at its level preempts the fewest
  running jobs of worse priority that make room there (``PriorityPreemptive``).
* migration (``migrate``): at an instant where a job completed and nothing
  else starts, a running job spread wider than its size needs moves to a
  strictly tighter placement if releasing it would give it one
  (``TighterMoves``, one move at a time), paying the restore cost.

Defaults chosen on ``ddl-gym-v1``'s validation split (five cases x three
seeds), never on test; geometric mean over the cases of mean JCT / the best
heuristic's: plain remaining work 0.95, the GPU-time key 0.85, servers kept
whole too 0.81; then compact cross-rack starts with spread limits 1.5 / 1.3
/ 1.2 / 1.1 / 1.0: 0.78 / 0.74 / 0.72 / 0.70 / 0.70 (1.0 best on the 512-GPU
case). With the plain key, dropping rack consolidation gave 1.57 and
dropping migration 1.24. The train split agreed (1.0: below the best
heuristic on all twelve cases).

Decisions happen at arrivals and completions only (a running job's key only
falls, a waiting one's is fixed, so the order between them changes only
there).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ddl_gym.engine import WAIT, Action, EngineView, Job, Place, Preempt, Status
from ddl_gym.perf import Level, shape_of

from .common import (
    BasePolicy,
    PriorityPreemptive,
    TighterMoves,
    completed_now,
    free_after,
    placement_on,
    size_level,
    victims_for,
)
from .sjf import _Oracle


@dataclass
class SrsfPolicy(_Oracle, PriorityPreemptive, BasePolicy):
    rack_sensitivity: float = 1.0
    server_sensitivity: float | None = 1.0
    migrate: bool = True
    comm_key: bool = True
    spread_limit: float | None = 1.0
    name: str = "srsf"
    _moves: TighterMoves = field(default_factory=TighterMoves, repr=False)
    # waiting jobs' keys, frozen while they wait: ((progress, attained) at the time, key)
    _keys: dict[int, tuple[tuple[float, float], tuple]] = field(default_factory=dict, repr=False)
    # per (model, GPUs, background): the level a job may take
    _levels: dict[tuple[str, int, float], Level] = field(default_factory=dict, repr=False)
    # per (model, GPUs, compute time): predicted slowdown at its tightest placement
    _tight: dict[tuple[str, int, float], float] = field(default_factory=dict, repr=False)

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        self._moves.clear()
        self._keys.clear()
        self._levels.clear()
        self._tight.clear()

    # -- scheduling --------------------------------------------------------
    def _service(self, view: EngineView, job: Job) -> float:
        if not view.clairvoyant:  # what a real scheduler knows: service so far
            return view.attained(job)
        work = view.remaining_work(job)
        if not self.comm_key:
            return work
        key = (job.model, job.gpus, job.t_compute)
        slow = self._tight.get(key)
        if slow is None:
            level = size_level(view.cluster, job.gpus)
            got = view.perf.slowdown(job.model, job.gpus, level, t_compute=job.t_compute)
            slow = self._tight[key] = got if got is not None else 1.0
        return work * slow

    def key(self, view: EngineView, job: Job) -> tuple:
        if job.status != Status.PENDING:
            return (self._service(view, job), job.arrival)
        stamp = (job.progress, job.attained)
        cached = self._keys.get(job.index)
        if cached is None or cached[0] != stamp:
            cached = self._keys[job.index] = (stamp, (self._service(view, job), job.arrival))
        return cached[1]

    # -- placement ---------------------------------------------------------
    def _slows(self, view: EngineView, job: Job, wide: Level, tight: Level) -> bool:
        """Whether ``job`` runs slower at ``wide`` than at ``tight`` by more than
        the sensitivity of that boundary (uplinks at the current background)."""
        perf, bg = view.perf, view.background
        at_tight = perf.slowdown(job.model, job.gpus, tight, bg, job.t_compute)
        at_wide = perf.slowdown(job.model, job.gpus, wide, bg, job.t_compute)
        if at_tight is None or at_wide is None:
            return False
        limit = self.rack_sensitivity if wide == Level.NETWORK else self.server_sensitivity
        return limit is not None and at_wide > limit * at_tight

    def level_of(self, view: EngineView, job: Job) -> Level:
        cache_key = (job.model, job.gpus, view.background)
        level = self._levels.get(cache_key)
        if level is None:
            level = Level.NETWORK
            fits = size_level(view.cluster, job.gpus)
            if fits < Level.NETWORK and self._slows(view, job, Level.NETWORK, fits):
                level = Level.RACK
                if fits == Level.MACHINE and self._slows(view, job, Level.RACK, Level.MACHINE):
                    level = Level.MACHINE
            self._levels[cache_key] = level
        return level

    def compact(self, view: EngineView, job: Job, placement) -> bool:
        """Whether ``placement`` (``[(server, gpus), ...]``) is compact enough
        for ``job``: within one rack, or across racks with a predicted
        slowdown (alone on its uplinks) at most ``spread_limit`` times that of
        the fewest racks that hold it."""
        if self.spread_limit is None:
            return True
        shape = shape_of(placement, view.cluster.servers_per_rack)
        if shape.r <= 1:
            return True
        perf, bg = view.perf, view.background
        best = perf.slowdown(job.model, job.gpus, Level.NETWORK, bg, job.t_compute)
        if best is None:
            return True
        bw, alpha = perf.uplink_share(bg, 1), perf.uplink_latency(bg)
        got = perf.iter_time(job.model, job.t_compute, shape, bw, alpha) / job.t_compute
        return got <= self.spread_limit * best

    def schedule(self, view: EngineView) -> Action:
        """``PriorityPreemptive.schedule`` with ``compact``: a waiting job that
        fits only on a too spread placement does not start there, and
        preempts only victims whose GPUs give it a compact one (else freeing
        them could be in vain and the victims restart where they were)."""
        if self.spread_limit is None:
            return super().schedule(view)
        if not view.pending:
            return WAIT
        worse_than = None
        free = view.total_free
        cluster = view.cluster
        for pkey, job in self._pending_order(view):
            level = self.level_of(view, job)
            if job.gpus <= free:
                placement = view.placement_for(job, level)
                if placement is not None and self.compact(view, job, placement):
                    return Place(job.index, level)
            if worse_than is None:
                worse_than = self._worse_than(view)
            victims = victims_for(view, job, level, worse_than(pkey))
            if not victims:
                continue
            if level == Level.NETWORK:
                after = placement_on(cluster, free_after(view, victims), job.gpus, level)
                if after is None or not self.compact(view, job, after):
                    continue
            return Preempt(victims[0].index)
        return WAIT

    # -- migration ---------------------------------------------------------
    def _migration(self, view: EngineView) -> Action | None:
        if not self.migrate or not completed_now(view):
            return None
        cluster = view.cluster
        for job in view.running:
            if job.level is not None and job.level > size_level(cluster, job.gpus):
                action = self._moves.start(view, job)
                if action is not None:
                    return action
        return None

    def act(self, view: EngineView) -> Action:
        action = self._moves.finish(view)
        if action is not None:
            return action
        action = self.schedule(view)
        if action is WAIT or not isinstance(action, (Place, Preempt)):
            moved = self._migration(view)
            if moved is not None:
                return moved
        return action
