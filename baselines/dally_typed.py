"""Dally extended to GPU types: a job may wait for its fastest type as it
waits for locality (issue 53).

``DallyPolicy`` (``dally.py``) delays a job's acceptance of a wider level by
timers counted from its last resource change. ``TypedDallyPolicy`` adds one
more timer of the same kind, on the GPU type:

* **type timer** (``type_timer`` leases, default 6, the auto-tuner's least
  rack timer: a job waits for its fastest type at least as long as tuned
  Dally waits for one machine). Until it fires a waiting job accepts only
  its *fastest* types (the accepted types of the highest
  ``view.type_speed``, several on a tie, e.g. V100-16GB and V100-32GB);
  afterwards any accepted type, fastest first. The policy asks for a
  wake-up when it fires, so the job takes a slower type exactly then. The
  two kinds of timer are independent: a job takes a placement only when
  both its level (rack/network timers) and its type (type timer) allow it;
  among the types allowed it takes the fastest that fits at its allowed
  level (among equally fast types the tightest placement: speed first,
  locality second). Types whose whole capacity is below the job's demand
  are never waited for. The level timers read the job's size on its types
  (``type_size_level``): a job no server of its types holds waits only for
  its network timer, one no rack of them holds takes any level at once, as
  Dally's jobs larger than a server or a rack. On a ``mix_types`` cluster a mixed placement is the
  last resort after the type timer, when no single type fits.
* **re-offer** (layer 2): as Dally's (least efficient first, free GPUs
  before expired ones, ``margin``, incumbents win ties), but a waiting job
  competes only for GPUs of the types it accepts now (a plain dry run on
  per-type copies of the pool, written after ``ReferenceDally.reoffer``).
  A job that would need a mixed placement does not compete.
* **auto-tuner** (layer 3) unchanged: it records the level a job got; the
  type timer is not tuned.

The engine's lease hints (``dally_hints``) stay Dally's: their level tests
count free GPUs of every type, more than a typed job may use, so they only
ever keep more lease boundaries than needed, never fewer; the last word on a
boundary and on a wake-up is this policy's own re-offer and placement pass.

On an untyped cluster every override hands over to ``DallyPolicy``: results
are Dally's, bit for bit (``tests/test_typed_baselines.py``).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from ddl_gym.engine import Action, EngineView, Job, Place, Status
from ddl_gym.perf import Level

from .common import EPS, placement_on
from .dally import DallyPolicy
from .typed import TypeLevels, TypeOrder, fastest_fit

_RACK, _NETWORK = Level.RACK, Level.NETWORK


@dataclass
class TypedDallyPolicy(DallyPolicy):
    """Dally with a per-type delay timer; see the module docstring."""

    # places on GPU types itself: run_policy holds it to every action (no
    # type-blind leniency, ``ddl_gym.engine.simulate.run_policy``)
    type_aware = True

    type_timer: float = 6.0
    name: str = "dally-typed"
    _types: TypeOrder = field(default_factory=TypeOrder, repr=False)
    _typed: bool = field(default=False, repr=False)
    # jobs whose accepted types give no server (rack) holding them
    _wider: TypeLevels = field(default_factory=TypeLevels, repr=False)
    # the type the last placement pass chose for each job it returned
    _type_of: dict[int, int | None] = field(default_factory=dict, repr=False)

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        super().reset(view, seed)
        self._types.clear()
        self._typed = view.cluster.typed
        self._wider.clear()
        self._type_of.clear()

    # -- the level timers on the job's types ------------------------------------
    def allowed_level(self, view: EngineView, job: Job) -> Level:
        """Dally's level, with the job's size read on its accepted types
        (``type_size_level``): a job no server of its types holds accepts a
        rack until its network timer fires, as Dally's job larger than a
        server does; one no rack of its types holds, any level at once, as
        Dally's job larger than a rack does."""
        if self._typed:
            tight = self._wider.wider(view, job)
            if tight is not None:
                if tight == _NETWORK:
                    return _NETWORK
                network_timer = self.timers(job, view.now)[1]
                waited = view.waited(job) / self.lease_s
                return _RACK if waited < network_timer - EPS else _NETWORK
        return super().allowed_level(view, job)

    # -- the type timer -----------------------------------------------------
    def allowed_types(self, view: EngineView, job: Job) -> tuple[int, ...]:
        """The types ``job`` accepts now, fastest first: only its fastest
        until ``type_timer`` leases have passed since its last resource
        change, then all."""
        order, top = self._types.both(view, job)
        if not order or view.waited(job) / self.lease_s >= self.type_timer - EPS:
            return order  # (none: only a mixed placement holds it, nothing to wait for)
        return top

    def _ask(self, view: EngineView, job: Job) -> None:
        tight = self._wider.wider(view, job) if self._typed else None
        if tight is None:
            super()._ask(view, job)
        elif tight == _RACK:
            # ``DallyPolicy._ask`` for a job whose tightest level is a rack
            # (by its types, not by its size): its network timer only
            self._asked_by_gpus.setdefault(job.gpus, {})[job.index] = None
            rack_timer, network_timer = self.timers(job, view.now)
            if self.auto_tune:
                self._ask_watch.watch(job.gpus, self.tuner.stable_until(job.gpus))
            asked = (job.queued_since, rack_timer, network_timer)
            if self._asked.get(job.index) != asked:
                self._asked[job.index] = asked
                self._wake.at(view, job.queued_since + network_timer * self.lease_s)
        if self._typed and self.allowed_types(view, job) != self._types(view, job):
            self._wake.at(view, job.queued_since + self.type_timer * self.lease_s)

    # -- the placement pass -------------------------------------------------
    def _first_fit(self, view: EngineView) -> tuple[Job, Level, list[tuple[int, int]]] | None:
        if not self._typed:
            return super()._first_fit(view)
        planned = self._fit_planned
        if planned is not None:
            self._fit_planned = None
            if planned[0] == view.instant and planned[1] == view.now:
                return planned[2]
        free = view.total_free
        free_type = view.free_per_type
        mix = view.cluster.mix_types
        failed: set[tuple[int, Level, tuple[int, ...], bool]] = set()
        jobs = view.jobs
        queue = self._demand
        same = [queue[gpus] for gpus in queue if gpus <= free]
        for _, _, index in heapq.merge(*same):
            job = jobs[index]
            level = self.allowed_level(view, job)
            types = self.allowed_types(view, job)
            mixed = mix and types == self._types(view, job)  # past the type timer
            key = (job.gpus, level, types, mixed)
            if key in failed:
                continue
            gpus = job.gpus

            def find(k: int, job=job, level=level, gpus=gpus) -> list[tuple[int, int]] | None:
                return view.placement_for(job, level, k) if free_type[k] >= gpus else None

            got = fastest_fit(view, job, types, find)
            if got is not None:
                self._type_of[index] = got[0]
                return job, level, got[1]
            if mixed:
                placement = view.placement_for(job, level)
                if placement is not None:
                    self._type_of[index] = None
                    return job, level, placement
            failed.add(key)
        return None

    def act(self, view: EngineView) -> Action:
        action = super().act(view)
        if self._typed and isinstance(action, Place):
            return Place(action.job, action.level, self._type_of.pop(action.job))
        return action

    # -- layer 2 on types -------------------------------------------------------
    def _reoffer(self, view: EngineView, lease_expired) -> list[int]:
        if not self._typed:
            return super()._reoffer(view, lease_expired)
        now = view.now
        expired = [j for j in lease_expired if j.status == Status.RUNNING and j.busy_until <= now]
        if not expired or not self._demand:
            return []
        cluster = view.cluster
        kinds = cluster.server_kind
        free_k = list(view.free_per_type)  # free now, less what challengers took
        pool_k = list(free_k)  # plus the expired jobs' GPUs
        for job in expired:
            for server, g in job.placement:
                pool_k[kinds[server]] += g
        # The pools only shrink below (challengers take, incumbents take
        # back their own), and whether a type holds a demand at a level is
        # monotone in them (the packer's tests: a server, a rack, the type):
        # a demand no type holds now never will (its challengers dropped
        # whole), and a (demand, level, types) that found nothing never will
        # either (its later challengers skipped without a dry run).
        # Only waiting jobs less efficient by more than ``margin`` than the
        # most efficient expired job challenge (entries sort by efficiency).
        most = max(pool_k)
        if min(self._demand) > most:
            return []
        effs = view.efficiencies(expired)
        cut = (max(effs) - self.margin, -math.inf, -1)
        lists = [same for g, same in self._demand.items() if g <= most and same[0] < cut]
        if not lists:
            return []
        offered = sorted(
            (eff, job.arrival, job.index, job) for eff, job in zip(effs, expired, strict=True)
        )
        waiting = heapq.merge(*lists)
        entry = next(waiting, None)
        jobs = view.jobs
        # the per-server pools, built when a challenger first needs a dry
        # run (until a challenger takes GPUs every incumbent keeps its own)
        free: list[int] = []  # free now, less what challengers took
        pool: list[int] = []  # plus the expired jobs' GPUs, less the kept ones'
        kept: list[Job] = []  # incumbents that kept their GPUs before they were built

        def on_type(counts: list[int], k: int) -> list[int]:
            return [c if kinds[s] == k else 0 for s, c in enumerate(counts)]

        failed: set[tuple[int, Level, tuple[int, ...]]] = set()
        taken = False  # whether a challenger took GPUs
        losers: list[int] = []
        for eff, _, _, incumbent in offered:
            if entry is None and not taken:
                break  # no challenger left, none took anything: every one keeps
            while entry is not None and entry[0] < eff - self.margin:
                challenger = jobs[entry[2]]
                entry = next(waiting, None)
                gpus = challenger.gpus
                if gpus > max(pool_k):
                    continue  # no type holds it: never will
                types = self.allowed_types(view, challenger)
                if all(pool_k[k] < gpus for k in types):
                    continue  # none of its types holds it: never will
                key = (gpus, self.allowed_level(view, challenger), types)
                if key in failed:
                    continue
                level = key[1]
                if not pool:
                    free = list(view.free_per_server)
                    pool = list(free)
                    for job in expired:
                        for server, g in job.placement:
                            pool[server] += g
                    for job in kept:
                        for server, g in job.placement:
                            pool[server] -= g
                got = None
                if self.reoffer_free_first:
                    got = fastest_fit(
                        view,
                        challenger,
                        types,
                        lambda k, g=gpus, lv=level, fr=free: (
                            placement_on(cluster, on_type(fr, k), g, lv) if free_k[k] >= g else None
                        ),
                    )
                if got is None:  # it needs expired GPUs (or the old rule)
                    got = fastest_fit(
                        view,
                        challenger,
                        types,
                        lambda k, g=gpus, lv=level, pl=pool: (
                            placement_on(cluster, on_type(pl, k), g, lv) if pool_k[k] >= g else None
                        ),
                    )
                if got is None:
                    failed.add(key)
                    continue
                taken = True
                for server, g in got[1]:
                    k = kinds[server]
                    pool[server] -= g
                    pool_k[k] -= g
                    took = min(g, free[server])  # free GPUs go first
                    free[server] -= took
                    free_k[k] -= took
            if not taken:
                # nobody took any GPU yet: its own are all in the pool
                kept.append(incumbent)
                for server, g in incumbent.placement:
                    pool_k[kinds[server]] -= g
                if pool:
                    for server, g in incumbent.placement:
                        pool[server] -= g
            elif all(pool[server] >= g for server, g in incumbent.placement):
                for server, g in incumbent.placement:
                    pool[server] -= g  # it keeps its own GPUs
                    pool_k[kinds[server]] -= g
            else:
                losers.append(incumbent.index)
        return losers
