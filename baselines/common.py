"""Helpers shared by the baseline policies.

The policies split a decision the way Blox does:

* **scheduling** picks *which* job goes next (a priority order over the queue
  and, for preemptive policies, over the running jobs);
* **placement** picks *where* (the widest level a job accepts now; the
  engine's best-fit packer then chooses the servers);
* **admission** decides whether a job may start at all now (e.g. a delay
  timer that has not fired, a consolidated placement that is not free).

Everything here is a pure function of the engine view plus, where noted, the
policy's own state; no module-level mutable state.

Some engine fields are only brought up to date when a job stops or is
re-rated (``attained``, ``compute_time``, ``comm_time``); policies read the
live values of a running job through ``view.attained`` and
``view.efficiency``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ddl_gym.engine import WAIT, Action, EngineView, Job, Place, Preempt
from ddl_gym.engine.packer import find_placement
from ddl_gym.perf import Level, shape_of
from ddl_gym.topology import Cluster

# Engine settings every policy runs with unless it says otherwise: the seed's
# checkpoint/restore cost of 1 s per GPU, no leases (decision points only at
# events and the policy's own wake-ups).
DEFAULT_ENGINE_KWARGS: dict[str, Any] = {"restore_s_per_gpu": 1.0}

EPS = 1e-9


def size_level(cluster: Cluster, gpus: int) -> Level:
    """The tightest level a job of ``gpus`` GPUs can ever get."""
    if gpus <= cluster.gpus_per_server:
        return Level.MACHINE
    if gpus <= cluster.gpus_per_rack:
        return Level.RACK
    return Level.NETWORK


def may_tighten(view: EngineView, job: Job) -> bool:
    """Whether releasing the job could give it a tighter placement (the
    packer finds one exactly when this holds): one machine needs a server
    with ``gpus`` free after the release, one rack (for a job now across
    racks) a rack with ``gpus`` free. Checked before copying the packer
    index, from the largest free counts and the job's own servers."""
    gpus = job.gpus
    cluster = view.cluster
    S = cluster.servers_per_rack
    if gpus <= cluster.gpus_per_server:
        if view.largest_server_free() >= gpus:
            return True
        if any(view.free_on(server) + g >= gpus for server, g in job.placement):
            return True
    if job.level == Level.NETWORK and gpus <= cluster.gpus_per_rack:
        rack_free = view.free_per_rack
        if max(rack_free) >= gpus:
            return True
        released: dict[int, int] = {}
        for server, g in job.placement:
            released[server // S] = released.get(server // S, 0) + g
        if any(rack_free[r] + g >= gpus for r, g in released.items()):
            return True
    return False


def tighter_level(view: EngineView, job: Job) -> Level | None:
    """A level strictly tighter than the job's current one that it would
    get if it released its GPUs now (None if there is none)."""
    cluster = view.cluster
    if job.level is None or job.level <= size_level(cluster, job.gpus):
        return None
    if not may_tighten(view, job):
        return None
    # the free GPUs if it released its own: a copy of the engine's packer
    # index (same answers as ``placement_on`` on ``free_after``, far cheaper)
    index = view.free_index()
    free = index.free
    S = cluster.servers_per_rack
    for server, g in job.placement:
        index.move(server, free[server], free[server] + g)
        free[server] += g
        index.rack_free[server // S] += g
    for level in range(size_level(cluster, job.gpus), job.level):
        placement = index.find(job.gpus, Level(level))
        if placement is not None:
            got = shape_of(placement, cluster.servers_per_rack).level
            if got < job.level:
                return got
    return None


@dataclass
class TighterMoves:
    """Moving running jobs to tighter placements, one at a time: ``start``
    preempts a job that would get a strictly tighter level if it released its
    GPUs now (``tighter_level``); at the next call of the same instant
    ``finish`` places it at that level. Gandiva's migration and the learned
    agent's repacking (``agents.shield``) share it."""

    moving: dict[int, Level] = field(default_factory=dict)

    def clear(self) -> None:
        self.moving.clear()

    def finish(self, view: EngineView) -> Action | None:
        """``Place`` for a move started at this instant (the job is queued)."""
        for index, level in list(self.moving.items()):
            del self.moving[index]
            if view.can_place(view.job(index), level):
                return Place(index, level)
        return None

    def start(self, view: EngineView, job: Job) -> Action | None:
        """``Preempt`` ``job`` if it can get a tighter level now, else None."""
        level = tighter_level(view, job)
        if level is None:
            return None
        self.moving[job.index] = level
        return Preempt(job.index)


def completed_now(view: EngineView) -> bool:
    """Whether a job completed at this instant."""
    return any(kind == "completion" for kind, _ in view.events)


def first_placeable(
    view: EngineView, jobs: Iterable[Job], level_of: Callable[[Job], Level | None]
) -> Action:
    """``Place`` the first job (in the given order) that fits now at the level
    ``level_of`` allows (``None``: the job must not start now); else ``Wait``."""
    free = view.total_free
    for job in jobs:
        if job.gpus > free:
            continue
        level = level_of(job)
        if level is not None and view.can_place(job, level):
            return Place(job.index, level)
    return WAIT


def free_after(view: EngineView, released: Iterable[Job]) -> list[int]:
    """Free GPUs per server if the ``released`` running jobs gave theirs back."""
    free = list(view.free_per_server)
    for job in released:
        for server, g in job.placement:
            free[server] += g
    return free


def fits(cluster: Cluster, free: Sequence[int], gpus: int, level: Level) -> bool:
    """Whether the packer would find a placement within ``level`` on ``free``."""
    return placement_on(cluster, free, gpus, level) is not None


def placement_on(
    cluster: Cluster, free: Sequence[int], gpus: int, level: Level
) -> list[tuple[int, int]] | None:
    """The packer's placement of ``gpus`` GPUs within ``level`` on ``free``."""
    if gpus > sum(free):
        return None
    S = cluster.servers_per_rack
    rack_free = [sum(free[r * S : (r + 1) * S]) for r in range(cluster.racks)]
    return find_placement(list(free), rack_free, S, cluster.gpus_per_server, gpus, level)


def victims_for(
    view: EngineView, job: Job, level: Level, candidates: Iterable[Job]
) -> list[Job] | None:
    """The fewest running ``candidates`` (taken from the front: pass them worst
    priority first) whose release lets ``job`` be placed within ``level``;
    ``None`` if even all of them are not enough. ``candidates`` is iterated
    from the front (twice at most), never indexed, so a policy may pass a lazy
    view of thousands of running jobs."""
    if level == Level.NETWORK:
        return _network_victims(view.total_free, job.gpus, candidates)
    cluster = view.cluster
    # even all candidates together cannot free enough GPUs: stop at once (the
    # count stops as soon as it reaches enough, not at the end of the list)
    need = job.gpus - view.total_free
    if need > 0:
        for c in candidates:
            need -= c.gpus
            if need <= 0:
                break
        else:
            return None
    # Whether the packer finds a placement needs no placement: within
    # ``level`` it finds one iff a server (machine level, ``gpus`` <= a
    # server), a rack (rack level) or the cluster (network level) has
    # ``gpus`` free GPUs (``find_placement``'s own tests, in its order).
    # Victims only add GPUs: only their servers and racks need a look.
    gpus = job.gpus
    S = cluster.servers_per_rack
    if level == Level.MACHINE and gpus > cluster.gpus_per_server:
        return None  # never fits, whatever is released
    rack_base = view.free_per_rack if level == Level.RACK else ()
    if level == Level.MACHINE:
        fit0 = view.largest_server_free() >= gpus
    else:
        fit0 = max(rack_base) >= gpus

    def fits_after(released: list[Job]) -> bool:
        if fit0:
            return True
        extra: dict[int, int] = {}
        for v in released:
            for server, g in v.placement:
                key = server if level == Level.MACHINE else server // S
                extra[key] = extra.get(key, 0) + g
        if level == Level.MACHINE:
            return any(view.free_on(k) + g >= gpus for k, g in extra.items())
        return any(rack_base[k] + g >= gpus for k, g in extra.items())

    chosen: list[Job] = []
    total = view.total_free
    extra_srv: dict[int, int] = {}
    extra_rack: dict[int, int] = {}
    for victim in candidates:
        chosen.append(victim)
        total += victim.gpus
        fit = fit0
        for server, g in victim.placement:
            if level == Level.MACHINE:
                f = extra_srv[server] = extra_srv.get(server, 0) + g
                if view.free_on(server) + f >= gpus:
                    fit = True
            else:
                r = server // S
                f = extra_rack[r] = extra_rack.get(r, 0) + g
                if rack_base[r] + f >= gpus:
                    fit = True
        # too few GPUs in all: no placement (as ``fits`` would answer)
        if total >= gpus and fit:
            break
    else:
        return None
    # drop victims that turned out unnecessary (a worse one on the wrong rack)
    for victim in list(chosen[:-1]):
        rest = [v for v in chosen if v is not victim]
        if fits_after(rest):
            chosen = rest
    return chosen


def _network_victims(free: int, gpus: int, candidates: Iterable[Job]) -> list[Job] | None:
    """``victims_for`` at network level, where the packer fits any ``gpus``
    the cluster holds, so only counts matter: take candidates until free plus
    released reach ``gpus``, then drop (in order) every one but the last
    whose GPUs are not needed. One pass, no placements looked at."""
    chosen: list[Job] = []
    total = free
    for victim in candidates:
        chosen.append(victim)
        total += victim.gpus
        if total >= gpus:
            break
    else:
        return None
    kept: list[Job] = []
    for victim in chosen[:-1]:
        if free >= gpus or total - victim.gpus >= gpus:
            total -= victim.gpus  # the rest still fit without it
        else:
            kept.append(victim)
    kept.append(chosen[-1])
    return kept


@dataclass
class WakeUps:
    """Wake-up times a policy already asked the engine for (no duplicates)."""

    asked: set[float] = field(default_factory=set)

    def at(self, view: EngineView, t: float) -> None:
        """Ask for a wake-up at ``t`` (once per time)."""
        if t > view.now + EPS and t not in self.asked and math.isfinite(t):
            self.asked.add(t)
            view.wake_at(t)

    def clear(self) -> None:
        self.asked.clear()


class PriorityPreemptive:
    """Preemptive priority scheduling shared by SRTF and Tiresias.

    Scheduling: ``key(job)`` orders all jobs (lower is better; ties broken by
    job index so the order is total and preemption chains end). Placement:
    ``level_of(job)`` is the widest level the job accepts. A waiting job that
    fits now starts; one that does not fit preempts the fewest running jobs of
    strictly worse priority that make room at its level (worst first), never
    preempting for a placement that would still not fit.
    """

    def _order(self, view: EngineView, jobs: Iterable[Job]) -> list[tuple[Any, Job]]:
        return sorted(((self.key(view, j), j.index), j) for j in jobs)  # type: ignore[misc]

    def _pending_order(self, view: EngineView) -> Iterable[tuple[Any, Job]]:
        """The waiting jobs as ``_order`` sorts them (a policy may keep the
        order incrementally)."""
        return self._order(view, view.pending)

    def _running_order(self, view: EngineView) -> list[tuple[Any, Job]]:
        """The running jobs as ``_order`` sorts them (a policy may compute
        the same keys faster)."""
        return self._order(view, view.running)

    def _worse_than(self, view: EngineView) -> Callable[[Any], Iterable[Job]]:
        """A function of a priority key giving the running jobs of strictly
        worse priority, worst first. Asked once per pass, when a waiting job
        first does not fit (state is fixed during the pass); a policy may
        answer from an incremental order instead of sorting every running job."""
        running = self._running_order(view)
        return lambda pkey: [j for rkey, j in reversed(running) if rkey > pkey]

    def _pending_sizes(self, view: EngineView) -> dict[Level, int] | None:
        """Per level (``level_of``), the smallest GPU demand among the waiting
        jobs, if the policy keeps it (lets a pass stop early); None: unknown."""
        return None

    def key(self, view: EngineView, job: Job) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def level_of(self, view: EngineView, job: Job) -> Level:
        return Level.NETWORK

    def schedule(self, view: EngineView) -> Action:
        if not view.pending:
            return WAIT
        pending = self._pending_order(view)
        # the running order is only needed once a waiting job does not fit
        worse_than: Callable[[Any], Iterable[Job]] | None = None
        # A later (worse) job at least as large at the same or a narrower
        # level can neither fit where this one did not (the packer fits g
        # GPUs wherever it fits more, and a wider level accepts every
        # narrower placement) nor find more victims (its strictly-worse jobs
        # are the first ones of this job's, worst first): skip it (state is
        # fixed during the pass). ``cover[L]``: the smallest failed demand at
        # level L or wider.
        cover = [math.inf] * (Level.NETWORK + 1)
        sizes = self._pending_sizes(view)
        free = view.total_free
        for pkey, job in pending:
            level = self.level_of(view, job)
            if cover[level] <= job.gpus:
                continue
            if job.gpus <= free and view.can_place(job, level):
                return Place(job.index, level)
            if worse_than is None:
                worse_than = self._worse_than(view)
            victims = victims_for(view, job, level, worse_than(pkey))
            if victims:
                return Preempt(victims[0].index)
            for narrower in range(level + 1):
                if job.gpus < cover[narrower]:
                    cover[narrower] = job.gpus
            # every waiting job (a fortiori every later one) is covered: stop
            if sizes is not None and all(cover[lv] <= g for lv, g in sizes.items()):
                break
        return WAIT


class BasePolicy:
    """What every baseline shares: a ``name``, the engine settings it needs
    (``engine_kwargs``, which ``simulate()`` applies),
    whether its decisions depend on the seed, and a no-op ``reset``."""

    name: str = "base"
    # False when the seed changes decisions (only ``random``): a comparison
    # grid may then skip repeating deterministic policies on a fixed trace.
    deterministic: bool = True

    def engine_kwargs(self) -> dict[str, Any]:
        return dict(DEFAULT_ENGINE_KWARGS)

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        pass

    def act(self, view: EngineView) -> Action:  # pragma: no cover - abstract
        raise NotImplementedError
