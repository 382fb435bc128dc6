"""Type-aware Tiresias and Gandiva for typed clusters (issue 53).

Same scheduling as the type-blind parent (Tiresias' 2D-LAS order and
preemption, Gandiva's arrival order, affinity tiers and migration); only
*where* changes, by one stated rule shared by both:

* **type choice**: a job runs on the fastest of its accepted types
  (``view.type_speed``) that fits now within the level the parent allows;
  among equally fast types (e.g. V100-16GB and V100-32GB) on the one with
  the tightest placement, then the one listed first in ``gpu_kinds``. If
  the fastest has no room it falls back to the next fastest that does, and
  so on: speed first, locality second. These policies
  never hold a job back for a faster type (``dally-typed`` does). Types
  whose whole capacity is below the job's demand are never tried. A level
  is read on the job's types (``type_size_level``): a job that no rack's
  GPUs of its types hold goes across racks, as the parent's job larger than
  any rack does (Tiresias' consolidation-sensitive class would otherwise
  wait for a rack forever on types split over racks). On a
  ``mix_types`` cluster a mixed placement (``gpu_type=None``, the engine's
  rule, at the slowest member's speed) is the last resort, taken only when
  no single type fits.
* **Tiresias' preemption** (a waiting job preempts only if it fits nowhere
  now) frees room where the engine would place the job:

  - without ``mix_types`` on one type: the fewest running jobs of strictly
    worse priority on that type (worst first) whose release lets the job fit
    there, trying its types fastest first (``victims_on_types``);
  - with ``mix_types``, a job accepting every type of the cluster: the
    parent's victim search, unchanged (the engine then places the job over
    the whole cluster, as the parent's);
  - with ``mix_types``, a job accepting some of the types: the same search
    over the union of its accepted types (``victims_on_union``: free GPUs
    and victims' GPUs on those types' servers only, all types at once, as
    the engine places the job over that union).

  (The parent's ``victims_for`` counts free GPUs over the whole cluster:
  where the job may not use every type it would preempt jobs whose GPUs the
  waiting job cannot use. One type at a time on a ``mix_types`` cluster
  would preempt far more than needed, and never find room a job needs from
  two types.)
* **Gandiva's migration** keeps a job on its type: it moves only to a
  strictly tighter level on the type it runs on.

On an untyped cluster every override hands over to the parent, so results
are the type-blind policy's, bit for bit (``tests/test_typed_baselines.py``).
The typed passes are plain (a scan of the queue, dry runs on per-type copies
of the free counts): written for clarity, not for clusters of thousands of
servers.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ddl_gym.engine import WAIT, Action, EngineView, Job, Place, Preempt, Status
from ddl_gym.perf import Level, shape_of
from ddl_gym.topology import Cluster

from .common import TighterMoves, may_tighten, placement_on, size_level, victims_for
from .gandiva import GandivaPolicy
from .tiresias import TiresiasPolicy, first_rack_victim


# -- the type rule, shared by the typed policies --------------------------------
@dataclass
class TypeOrder:
    """Per (model, accepted types, GPUs): the accepted types able to hold
    the job, fastest first (ties to the lower index), cached."""

    _cache: dict[tuple[str, tuple[int, ...], int], tuple[int, ...]] = field(default_factory=dict)
    _both: dict[tuple[str, tuple[int, ...], int], tuple[tuple[int, ...], tuple[int, ...]]] = field(
        default_factory=dict
    )

    def clear(self) -> None:
        self._cache.clear()
        self._both.clear()

    def fastest(self, view: EngineView, job: Job) -> tuple[int, ...]:
        """The types of ``self(view, job)`` as fast as its first (all of
        the fastest speed, e.g. V100-16GB and V100-32GB), cached."""
        return self.both(view, job)[1]

    def both(self, view: EngineView, job: Job) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """``(self(view, job), self.fastest(view, job))`` in one lookup."""
        key = (job.model, job.accepts, job.gpus)
        got = self._both.get(key)
        if got is None:
            order = self(view, job)
            speed = view.type_speed(job, order[0]) if order else 0.0
            got = (order, tuple(k for k in order if view.type_speed(job, k) >= speed))
            self._both[key] = got
        return got

    def __call__(self, view: EngineView, job: Job) -> tuple[int, ...]:
        key = (job.model, job.accepts, job.gpus)
        order = self._cache.get(key)
        if order is None:
            cap = view.cluster.type_capacities()
            holdable = [k for k in job.accepts if cap[k] >= job.gpus]
            order = tuple(sorted(holdable, key=lambda k: (-view.type_speed(job, k), k)))
            self._cache[key] = order
        return order


def type_size_level(cluster: Cluster, accepts: tuple[int, ...], gpus: int) -> Level:
    """``size_level`` over the GPUs a job of ``gpus`` GPUs accepting types
    ``accepts`` may use: the tightest level it can ever get. One server if a
    server of an accepted type holds ``gpus`` GPUs, else one rack if a rack
    holds that many of one accepted type (on a ``mix_types`` cluster, of its
    accepted types together: the engine places over their union), else
    several racks. The parents widen a job larger than any rack to the
    network level; the typed policies widen a job larger than any rack (or
    server) of its types the same way, so it never waits for a level no
    accepted type can give."""
    caps = cluster.capacities()
    kinds = cluster.server_kind
    ok = set(accepts)
    if any(c >= gpus for c, k in zip(caps, kinds, strict=True) if k in ok):
        return Level.MACHINE
    S = cluster.servers_per_rack
    mix = cluster.mix_types
    for r in range(cluster.racks):
        held: dict[int, int] = {}
        for s in range(r * S, (r + 1) * S):
            k = kinds[s]
            if k in ok:
                unit = -1 if mix else k
                held[unit] = held.get(unit, 0) + caps[s]
        if any(g >= gpus for g in held.values()):
            return Level.RACK
    return Level.NETWORK


@dataclass
class TypeLevels:
    """Per (accepted types, GPUs): ``type_size_level`` if it is wider than
    the untyped ``size_level`` (None: the same), cached."""

    _cache: dict[tuple[tuple[int, ...], int], Level | None] = field(default_factory=dict)

    def clear(self) -> None:
        self._cache.clear()

    def wider(self, view: EngineView, job: Job) -> Level | None:
        key = (job.accepts, job.gpus)
        if key in self._cache:
            return self._cache[key]
        cluster = view.cluster
        level = type_size_level(cluster, job.accepts, job.gpus)
        got = level if level > size_level(cluster, job.gpus) else None
        self._cache[key] = got
        return got


def fastest_fit(
    view: EngineView,
    job: Job,
    order: Iterable[int],
    find: Callable[[int], list[tuple[int, int]] | None],
) -> tuple[int, list[tuple[int, int]]] | None:
    """``(type, placement)`` by the type rule: the fastest types of ``order``
    (fastest first) where ``find(type)`` gives a placement, and among those
    equally fast the tightest placement (then the earlier in ``order``);
    None if ``find`` gives none on any type."""
    cluster = view.cluster
    S = cluster.servers_per_rack
    tightest = size_level(cluster, job.gpus)
    best: tuple[int, list[tuple[int, int]], int] | None = None
    best_speed = 0.0
    for k in order:
        # (speeds read only once a type fits: most calls find none)
        if best is not None and view.type_speed(job, k) < best_speed:
            break  # slower than a type that fits
        placement = find(k)
        if placement is None:
            continue
        level = placement_level(placement, S)
        if best is None or level < best[2]:
            # (order is fastest first: a later best is as fast as the first)
            best, best_speed = (k, placement, level), view.type_speed(job, k)
            if level <= tightest:
                break  # none tighter
    return None if best is None else (best[0], best[1])


def placement_level(placement: list[tuple[int, int]], servers_per_rack: int) -> int:
    """The level a placement spans (one server, one rack, several)."""
    if len(placement) == 1:
        return Level.MACHINE
    rack = placement[0][0] // servers_per_rack
    if all(s // servers_per_rack == rack for s, _ in placement):
        return Level.RACK
    return Level.NETWORK


def fastest_fitting(
    view: EngineView, job: Job, level: Level, order: Iterable[int]
) -> tuple[int | None, list[tuple[int, int]]] | None:
    """``(type, placement)`` by the type rule (``fastest_fit``) within
    ``level`` now; on a ``mix_types`` cluster a mixed placement (type None)
    if no single type holds the job; None if nothing fits."""
    free = view.free_per_type
    gpus = job.gpus

    def find(k: int) -> list[tuple[int, int]] | None:
        return view.placement_for(job, level, k) if free[k] >= gpus else None

    got = fastest_fit(view, job, order, find)
    if got is not None:
        return got
    if view.cluster.mix_types:
        placement = view.placement_for(job, level)
        if placement is not None:
            return None, placement
    return None


def type_free(view: EngineView, k: int) -> list[int]:
    """Free GPUs per server on type ``k``'s servers (0 on the others)."""
    kinds = view.cluster.server_kind
    return [f if kinds[s] == k else 0 for s, f in enumerate(view.free_per_server)]


def victims_on_types(
    view: EngineView, job: Job, level: Level, order: Iterable[int], candidates: Iterable[Job]
) -> tuple[int, list[Job]] | None:
    """Tiresias' victim search on one type at a time: for each type ``k`` of
    ``order`` in turn, the fewest running ``candidates`` on ``k`` (taken from
    the front: pass them worst priority first; jobs on another type or on
    several free nothing there) whose release lets ``job`` be placed on ``k``
    within ``level``, unneeded ones dropped as ``victims_for`` does; the first
    type of ``order`` where some suffice, with them (None: on none).

    Precondition: ``job`` fits on none of ``order`` within ``level`` now (the
    caller tried, ``fastest_fitting``). Then, by the packer's own tests (a
    placement within ``level`` exists iff a server, a rack or the type holds
    ``gpus`` free GPUs of the type), only the victims' servers or racks can
    come to fit: those alone are summed, and one walk over the candidates
    serves every type (the first in ``order`` wins, as if tried in turn)."""
    cluster = view.cluster
    gpus = job.gpus
    order = tuple(order)
    if not order or (level == Level.MACHINE and gpus > cluster.gpus_per_server):
        return None
    kinds = cluster.server_kind
    free = view.free_per_server
    S = cluster.servers_per_rack
    per_rack = level == Level.RACK
    by_server = level == Level.MACHINE
    # each type's rank in ``order`` (len(order): not in it), by type index; a
    # job on several types (kind -1) reads the last slot, not in it either
    rank = [len(order)] * (len(cluster.gpu_kinds) + 1)
    for i, k in enumerate(order):
        rank[k] = i
    chosen: list[list[Job]] = [[] for _ in order]
    total = [view.free_per_type[k] for k in order]
    base = list(total)
    extra: list[dict[int, int]] = [{} for _ in order]  # server or rack -> released GPUs
    units: dict[tuple[int, int], int] = {}  # (server or rack, type): free GPUs of the type

    def unit_free(unit: int, k: int) -> int:
        got = units.get((unit, k))
        if got is None:
            if by_server:
                got = free[unit]
            else:
                got = sum(
                    f
                    for s, f in enumerate(free[unit * S : (unit + 1) * S], unit * S)
                    if kinds[s] == k
                )
            units[(unit, k)] = got
        return got

    found = len(order)  # rank of the first type found to suffice
    for victim in candidates:
        i = rank[victim.kind]
        if i >= found:
            continue
        chosen[i].append(victim)
        total[i] += victim.gpus
        fit = total[i] >= gpus
        if per_rack or by_server:
            k = order[i]
            ext = extra[i]
            room = False
            for server, g in victim.placement:
                unit = server // S if per_rack else server
                e = ext.get(unit, 0) + g
                ext[unit] = e
                if fit and not room and unit_free(unit, k) + e >= gpus:
                    room = True
            fit = room
        if fit:
            found = i
            if i == 0:
                break
    else:
        if found == len(order):
            return None
    k = order[found]
    victims = chosen[found]
    # drop victims that turned out unnecessary (as ``victims_for``: front to
    # back, each tried without while the rest kept), on running sums
    if not (per_rack or by_server):
        held = sum(v.gpus for v in victims)
        kept = []
        for n, victim in enumerate(victims):
            if n < len(victims) - 1 and base[found] + held - victim.gpus >= gpus:
                held -= victim.gpus
            else:
                kept.append(victim)
        return k, kept
    sums: dict[int, int] = {}
    for v in victims:
        for server, g in v.placement:
            unit = server // S if per_rack else server
            sums[unit] = sums.get(unit, 0) + g
    kept = []
    for n, victim in enumerate(victims):
        if n < len(victims) - 1:
            for server, g in victim.placement:
                unit = server // S if per_rack else server
                sums[unit] -= g
            if any(unit_free(u, k) + e >= gpus for u, e in sums.items()):
                continue  # not needed
            for server, g in victim.placement:
                unit = server // S if per_rack else server
                sums[unit] += g
        kept.append(victim)
    return k, kept


def victims_on_union(
    view: EngineView, job: Job, level: Level, accepts: Iterable[int], candidates: Iterable[Job]
) -> list[Job] | None:
    """``victims_for`` over the servers of the types ``accepts`` (a
    ``mix_types`` cluster, where the engine places a job over the union of
    its accepted types): the fewest running ``candidates`` (taken from the
    front: pass them worst priority first; one with no GPU on those servers
    frees nothing there and is passed over) whose release lets ``job`` be
    placed within ``level`` on those servers, unneeded ones dropped front to
    back as ``victims_for`` does; None if even all of them do not suffice.

    Precondition: ``job`` fits nowhere within ``level`` now (the caller
    tried, ``fastest_fitting``). Then, by the packer's own tests (a
    placement within ``level`` exists iff a server, a rack or the union
    holds ``gpus`` free GPUs of the types), only the victims' servers or
    racks can come to fit: those alone are summed."""
    cluster = view.cluster
    gpus = job.gpus
    if level == Level.MACHINE and gpus > cluster.gpus_per_server:
        return None
    ok = [False] * len(cluster.gpu_kinds)
    for k in accepts:
        ok[k] = True
    kinds = cluster.server_kind
    free = view.free_per_server
    S = cluster.servers_per_rack
    by_server = level == Level.MACHINE
    per_rack = level == Level.RACK
    union_free = sum(view.free_per_type[k] for k, yes in enumerate(ok) if yes)
    units: dict[int, int] = {}  # server, rack or 0 (the union): free GPUs of the types

    def unit_of(server: int) -> int:
        return server if by_server else server // S if per_rack else 0

    def unit_free(unit: int) -> int:
        got = units.get(unit)
        if got is None:
            if by_server:
                got = free[unit]
            elif per_rack:
                got = sum(
                    f
                    for s, f in enumerate(free[unit * S : (unit + 1) * S], unit * S)
                    if ok[kinds[s]]
                )
            else:
                got = union_free
            units[unit] = got
        return got

    chosen: list[tuple[Job, list[tuple[int, int]]]] = []  # victim, its GPUs per unit
    extra: dict[int, int] = {}  # unit -> released GPUs
    for victim in candidates:
        share: dict[int, int] = {}
        for server, g in victim.placement:
            if ok[kinds[server]]:
                u = unit_of(server)
                share[u] = share.get(u, 0) + g
        if not share:
            continue  # frees nothing on the accepted types
        chosen.append((victim, list(share.items())))
        fit = False
        for u, g in share.items():
            e = extra[u] = extra.get(u, 0) + g
            if unit_free(u) + e >= gpus:
                fit = True
        if fit:
            break
    else:
        return None
    kept: list[Job] = []
    for n, (victim, released) in enumerate(chosen):
        if n < len(chosen) - 1:
            for u, g in released:
                extra[u] -= g
            if any(unit_free(u) + e >= gpus for u, e in extra.items()):
                continue  # not needed
            for u, g in released:
                extra[u] += g
        kept.append(victim)
    return kept


def tighter_level_on_type(view: EngineView, job: Job) -> Level | None:
    """A level strictly tighter than ``job``'s that it would get on its own
    type if it released its GPUs now (None: none, or a mixed placement)."""
    k = job.kind
    if k < 0 or job.level is None:
        return None
    cluster = view.cluster
    tight = size_level(cluster, job.gpus)
    if job.level <= tight:
        return None
    if not may_tighten(view, job):
        return None  # not even on all free GPUs (type k's are a part of them)
    free = type_free(view, k)
    for server, g in job.placement:
        free[server] += g
    for level in range(tight, job.level):
        placement = placement_on(cluster, free, job.gpus, Level(level))
        if placement is not None:
            got = shape_of(placement, cluster.servers_per_rack).level
            if got < job.level:
                return got
    return None


@dataclass
class TypedMoves(TighterMoves):
    """``TighterMoves`` that keeps a job on its type: ``start`` preempts a
    job that would get a strictly tighter level on the type it runs on,
    ``finish`` places it there at that level."""

    kinds: dict[int, int] = field(default_factory=dict)

    def clear(self) -> None:
        super().clear()
        self.kinds.clear()

    def finish(self, view: EngineView) -> Action | None:
        for index, level in list(self.moving.items()):
            del self.moving[index]
            k = self.kinds.pop(index)
            if view.can_place(view.job(index), level, k):
                return Place(index, level, k)
        return None

    def start(self, view: EngineView, job: Job) -> Action | None:
        level = tighter_level_on_type(view, job)
        if level is None:
            return None
        self.moving[job.index] = level
        self.kinds[job.index] = job.kind
        return Preempt(job.index)


# -- Tiresias ---------------------------------------------------------------------
@dataclass
class TypedTiresiasPolicy(TiresiasPolicy):
    """Tiresias with the type rule of the module docstring: its order,
    queues, starvation promotion and consolidation classes unchanged."""

    # places on GPU types itself: run_policy holds it to every action (no
    # type-blind leniency, ``ddl_gym.engine.simulate.run_policy``)
    type_aware = True

    name: str = "tiresias-typed"
    _types: TypeOrder = field(default_factory=TypeOrder, repr=False)
    _typed: bool = field(default=False, repr=False)
    # typed clusters: each (model, GPUs, accepted types)'s level
    _tlevels: dict[tuple[str, int, tuple[int, ...]], Level] = field(
        default_factory=dict, repr=False
    )
    _wider: TypeLevels = field(default_factory=TypeLevels, repr=False)
    # typed clusters: the waiting jobs per class (level, GPU demand, accepted
    # types) as sorted ``(key, index)`` (a waiting job's key is frozen until
    # it runs or is promoted), and each member's class and entry; kept by
    # the parent's own queue hooks (``_pend_add``, ``_pend_remove``)
    _tcls: dict[tuple[Level, int, tuple[int, ...]], list[tuple[Any, int]]] = field(
        default_factory=dict, repr=False
    )
    _tentry: dict[int, tuple[tuple[Level, int, tuple[int, ...]], tuple[Any, int]]] = field(
        default_factory=dict, repr=False
    )

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        super().reset(view, seed)
        self._types.clear()
        self._typed = view.cluster.typed
        self._tcls.clear()
        self._tentry.clear()
        self._tlevels.clear()
        self._wider.clear()

    def level_of(self, view: EngineView, job: Job) -> Level:
        """The parent's level, widened to the tightest its accepted types
        can ever give (``type_size_level``): a consolidation-sensitive job
        larger than every rack's GPUs of its types goes across racks, as the
        parent's job larger than any rack does."""
        if not self._typed:
            return super().level_of(view, job)
        key = (job.model, job.gpus, job.accepts)
        level = self._tlevels.get(key)
        if level is None:
            level = super().level_of(view, job)
            wider = self._wider.wider(view, job)
            if wider is not None and wider > level:
                level = wider
            self._tlevels[key] = level
        return level

    def _pend_add(self, view: EngineView, job: Job) -> None:
        super()._pend_add(view, job)
        if not self._typed or job.status != Status.PENDING or job.index in self._tentry:
            return
        entry = (self.key(view, job), job.index)
        cls = (self.level_of(view, job), job.gpus, job.accepts)
        self._tentry[job.index] = (cls, entry)
        insort(self._tcls.setdefault(cls, []), entry)

    def _pend_remove(self, index: int) -> None:
        super()._pend_remove(index)
        got = self._tentry.pop(index, None)
        if got is not None:
            cls, entry = got
            members = self._tcls[cls]
            if len(members) == 1:
                del self._tcls[cls]
            else:
                del members[bisect_left(members, entry)]

    def schedule(self, view: EngineView) -> Action:
        if not self._typed:
            return super().schedule(view)
        return self._schedule_typed(view)

    def _heads(self, view: EngineView) -> list[tuple[Any, Job]]:
        """The first waiting job of each class (level, GPU demand, accepted
        types) in priority order: all a pass can try, since a later job of a
        class is covered by its first (see ``_schedule_typed``)."""
        if len(self._tentry) != len(view.pending):  # (the parent rebuilt its queue)
            self._tcls.clear()
            self._tentry.clear()
            for job in view.pending:
                self._pend_add(view, job)
        jobs = view.jobs
        heads = sorted(members[0] for members in self._tcls.values())
        return [(entry, jobs[entry[1]]) for entry in heads]

    def _schedule_typed(self, view: EngineView) -> Action:
        """``PriorityPreemptive.schedule`` with the type rule, over the
        waiting jobs in priority order (classes by accepted types too: the
        parent's shortcuts by GPU demand alone do not hold when jobs accept
        different types); a job that fits on some type starts on the fastest
        that does; one that fits on none preempts worse jobs where the
        engine would place it (``_victim``)."""
        pending = self._heads(view)
        worse_than: Callable[[Any], Iterable[Job]] | None = None
        # as the parent's ``cover``, per set of accepted types: a later job
        # accepting the same types, at least as large, at the same or a
        # narrower level, neither fits nor finds more victims on any of them
        cover: dict[tuple[int, ...], list[float]] = {}
        for pkey, job in pending:
            level = self.level_of(view, job)
            failed = cover.setdefault(job.accepts, [math.inf] * (Level.NETWORK + 1))
            if failed[level] <= job.gpus:
                continue
            order = self._types(view, job)
            got = fastest_fitting(view, job, level, order)
            if got is not None:
                return Place(job.index, level, got[0])
            if worse_than is None:
                worse_than = self._worse_than(view)
            victim = self._victim(view, job, level, order, worse_than(pkey), pkey)
            if victim is not None:
                return Preempt(victim.index)
            for narrower in range(level + 1):
                if job.gpus < failed[narrower]:
                    failed[narrower] = job.gpus
        return WAIT

    def _victim(
        self,
        view: EngineView,
        job: Job,
        level: Level,
        order: tuple[int, ...],
        candidates: Iterable[Job],
        pkey: Any,
    ) -> Job | None:
        """The first victim to preempt for waiting ``job`` (None: no room
        to make), by the rule of the module docstring."""
        cluster = view.cluster
        if not cluster.mix_types:
            got = victims_on_types(view, job, level, order, candidates)
            return None if got is None else got[1][0]
        if len(job.accepts) < len(cluster.gpu_kinds):
            victims = victims_on_union(view, job, level, job.accepts, candidates)
            return victims[0] if victims else None
        # every type: the parent's search (``TiresiasPolicy.schedule``)
        if level != Level.RACK:
            victims = victims_for(view, job, level, candidates)
            return victims[0] if victims else None
        if self._run.may_fit(pkey, job.gpus):
            return first_rack_victim(view, job, candidates)
        return None


# -- Gandiva ----------------------------------------------------------------------
@dataclass
class TypedGandivaPolicy(GandivaPolicy):
    """Gandiva with the type rule of the module docstring: arrival order with
    backfilling, affinity tiers and migration unchanged, migration kept on
    the job's type (``TypedMoves``)."""

    # places on GPU types itself: run_policy holds it to every action (no
    # type-blind leniency, ``ddl_gym.engine.simulate.run_policy``)
    type_aware = True

    name: str = "gandiva-typed"
    _types: TypeOrder = field(default_factory=TypeOrder, repr=False)
    _typed: bool = field(default=False, repr=False)
    # typed clusters: the waiting jobs per class (GPU demand, type order,
    # accepted types) as sorted ``(arrival, index)``, each member's class and
    # entry, the jobs this policy preempted (queued again at the next call)
    # and the instant whose arrivals are in
    _gcls: dict[tuple[int, tuple[int, ...], tuple[int, ...]], list[tuple[float, int]]] = field(
        default_factory=dict, repr=False
    )
    _gentry: dict[int, tuple[tuple[int, tuple[int, ...], tuple[int, ...]], tuple[float, int]]] = (
        field(default_factory=dict, repr=False)
    )
    _gback: list[int] = field(default_factory=list, repr=False)
    _gsynced: int = field(default=-1, repr=False)

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        super().reset(view, seed)
        self._types.clear()
        self._typed = view.cluster.typed
        self._moves = TypedMoves() if self._typed else TighterMoves()
        self._gcls.clear()
        self._gentry.clear()
        self._gback.clear()
        self._gsynced = -1

    # -- the waiting jobs by class ---------------------------------------------
    def _gadd(self, view: EngineView, job: Job) -> None:
        if job.status != Status.PENDING or job.index in self._gentry:
            return
        cls = (job.gpus, self._types(view, job), job.accepts)
        entry = (job.arrival, job.index)
        self._gentry[job.index] = (cls, entry)
        insort(self._gcls.setdefault(cls, []), entry)

    def _gremove(self, index: int) -> None:
        got = self._gentry.pop(index, None)
        if got is not None:
            cls, entry = got
            members = self._gcls[cls]
            if len(members) == 1:
                del self._gcls[cls]
            else:
                del members[bisect_left(members, entry)]

    def _gsync(self, view: EngineView) -> None:
        """This instant's arrivals and the jobs this policy preempted join
        the classes (rebuilt from the view if the count disagrees)."""
        if self._gsynced != view.instant:
            self._gsynced = view.instant
            for kind, index in view.events:
                if kind == "arrival":
                    self._gadd(view, view.job(index))
        for index in self._gback:
            self._gadd(view, view.job(index))
        self._gback.clear()
        if len(self._gentry) != len(view.pending):
            self._gcls.clear()
            self._gentry.clear()
            for job in view.pending:
                self._gadd(view, job)

    def act(self, view: EngineView) -> Action:
        action = super().act(view)
        if self._typed:
            if isinstance(action, Place):
                self._gremove(action.job)
            elif isinstance(action, Preempt):
                self._gback.append(action.job)
        return action

    def _decide(self, view: EngineView) -> Action:
        if not self._typed:
            return super()._decide(view)
        self._gsync(view)
        action = self._migration(view)
        if action is not None:
            return action
        if not view.pending:
            return WAIT
        # The parent's pass with classes (GPU demand, type order, accepted
        # types) in place of the GPU demand: within a class placement and
        # tier are the same (state is fixed during the pass), so its first
        # job (by arrival) decides for all.
        free = view.free_per_type
        total = view.total_free  # (a mixed placement needs as many free GPUs too)
        mix = view.cluster.mix_types
        jobs = view.jobs
        heads = sorted(
            members[0]
            for (gpus, order, _), members in self._gcls.items()
            if gpus <= total and (mix or any(free[k] >= gpus for k in order))
        )
        best: tuple[int, int] | None = None
        chosen: tuple[Job, int | None] | None = None
        for rank, (_, index) in enumerate(heads):
            job = jobs[index]
            got = fastest_fitting(view, job, Level.NETWORK, self._types(view, job))
            if got is None:
                continue
            tier = self._tier(self._demands, job, got[1])
            if best is None or (tier, rank) < best:
                best = (tier, rank)
                chosen = (job, got[0])
                if tier == 0:
                    break
        if chosen is None:
            return WAIT
        return Place(chosen[0].index, Level.NETWORK, chosen[1])
