"""Dally, the seed paper's scheduler, as three layers switchable one by one.

Source: Sharma et al., "GPU Cluster Scheduling for Network-Sensitive Deep
Learning" (arXiv 2401.16492, v2 "Dally"), as summarised in docs/design.md
section 1; written from that description, not from the authors' code.

1. **Delay scheduling** (admission + placement). Each waiting job has a
   ``rack_timer`` and a ``network_timer`` in lease units, counted from its
   last resource change (arrival or preemption, ``view.waited``). Until
   ``rack_timer`` leases have passed it accepts only a one-machine placement,
   until ``network_timer`` only a one-rack one, then any. A job larger than a
   machine skips the machine wait, larger than a rack the rack wait. The
   policy asks for a wake-up when a timer fires, so a job takes the wider
   placement exactly then. Defaults 1 and 2 leases.
2. **Network-sensitive preemption** (scheduling). GPUs are leased
   (``lease_s`` = 20 s). When leases expire, the GPUs of the expired jobs
   plus the free ones are re-offered to the waiting jobs and to the expired
   jobs themselves in ascending order of placement efficiency (time-averaged
   compute / (compute + exposed communication), 0 for a job that never ran):
   an expired job keeps its GPUs if none of the jobs before it took any of
   them, otherwise it is preempted (checkpoint: 1 s per GPU, the engine's
   ``restore_s_per_gpu``). The re-offer is dry-run on a copy of the free
   GPUs with the engine's own packer; the winners are then placed by the
   ordinary placement pass. Our choices: a waiting job takes GPUs that are
   free now (the packer at its allowed level on the free GPUs, less what
   the jobs before it took) and competes for expired GPUs only if those
   cannot hold it (``reoffer_free_first``; the description offers the pool
   as one, and the packer's best fit on free + expired GPUs then prefers an
   expired job's server to an empty one: a job arriving at a lease boundary
   preempted someone on a nearly empty cluster); so while the free GPUs
   hold every waiting job, one after another in queue order, nobody is
   preempted. Ties go to the incumbent (no
   preemption for nothing), then to the earlier arrival; two guards against
   churn, which the description does not mention but which we found
   necessary (without them jobs of similar efficiency swap GPUs at every
   lease, a 32-GPU job paying 32 s of checkpoint per 20 s lease, and
   utilisation collapses on the seed's load sweep): a waiting job wins only
   if its efficiency is lower by more than ``margin`` (default 0.05), and a
   job still restoring from its last preemption is not re-offered. All placement
   passes (not only re-offers) serve waiting jobs in efficiency order, so
   without layer 2 (nobody was ever preempted, everyone has efficiency 0) the
   order is plain arrival order with per-job backfilling.
3. **Auto-tuner** (admission). Per GPU demand, a sliding window of
   ``window_h`` hours of the waits (in leases) jobs actually had before
   getting a machine-level and a rack-level placement;
   ``rack_timer = min(ceil(0.8 H), max(6, ceil(mean + 2 std)))`` over machine
   waits and ``network_timer = min(H, max(12, ceil(mean + 2 std)))`` over rack
   waits (population std; an empty history counts as one wait of 1 lease).
   The formula caps timers with ``H`` itself: we take it literally, i.e. the
   caps are ``ceil(0.8 H)`` and ``H`` leases with ``H`` the window in hours
   (default 24 h: timers between 6 and 20, and 12 and 24 leases).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ddl_gym.engine import WAIT, Action, EngineView, Job, Preempt, Status
from ddl_gym.engine.actions import Place
from ddl_gym.engine.packer import FreeIndex, gpus_held
from ddl_gym.perf import Level

from .common import (
    DEFAULT_ENGINE_KWARGS,
    EPS,
    BasePolicy,
    WakeUps,
    size_level,
)
from .dally_hints import DallyHints

SEED_LEASE_S = 20.0
# the levels as module constants: an enum member's lookup costs more, and
# the hot paths below test levels for every waiting job they look at
_MACHINE, _RACK, _NETWORK = Level.MACHINE, Level.RACK, Level.NETWORK
# clusters of more servers test a re-offer's fit from the pool's largest
# server and rack before copying it (at 512 servers the copies dominated)
_QUICK_FIT_SERVERS = 128


@dataclass
class _Window:
    """Waits of one (GPU demand, level) in time order, with running sums."""

    samples: deque = field(default_factory=deque)  # (time placed, wait in leases)
    total: float = 0.0
    total_sq: float = 0.0
    _spread: int | None = field(default=None, repr=False)  # None: to compute

    def add(self, t: float, wait: float, horizon: float = -math.inf) -> None:
        """A wait at ``t``, after the waits before ``horizon`` left (so the
        sums see every sample leave before the next one comes)."""
        self.drop_before(horizon)
        self.samples.append((t, wait))
        self.total += wait
        self.total_sq += wait * wait
        self._spread = None

    def drop_before(self, horizon: float) -> None:
        while self.samples and self.samples[0][0] < horizon:
            _, wait = self.samples.popleft()
            self.total -= wait
            self.total_sq -= wait * wait
            self._spread = None

    def spread(self) -> int:
        """``ceil(mean + 2 std)`` (population std); an empty window counts as
        1. Kept until a sample comes or goes (the other level's window is
        asked again after every placement)."""
        if self._spread is not None:
            return self._spread
        n = len(self.samples)
        if not n:
            self._spread = 1
            return 1
        mean = self.total / n
        std = math.sqrt(max(0.0, self.total_sq / n - mean * mean))
        self._spread = math.ceil(mean + 2.0 * std - 1e-9)
        return self._spread


@dataclass
class AutoTuner:
    """Per-GPU-demand history of waits and the seed's timer formula."""

    window_h: float = 24.0
    windows: dict[tuple[int, Level], _Window] = field(default_factory=dict)
    # gpus -> (timers, time of the oldest sample in its windows): the timers
    # change only when a sample is added (``record``) or leaves the window
    _cache: dict[int, tuple[tuple[int, int], float]] = field(default_factory=dict, repr=False)
    # bumped by every ``record``: timers change only then or past ``stable_until``
    version: int = field(default=0, repr=False)
    # the GPU demand of each ``record``, in order (``log[v]`` made version v + 1)
    log: list[int] = field(default_factory=list, repr=False)

    def record(self, gpus: int, level: Level, wait_leases: float, now: float) -> None:
        """A job of ``gpus`` GPUs got a placement of ``level`` after waiting."""
        if level == _NETWORK:
            return
        key = (gpus, level if type(level) is Level else Level(level))
        window = self.windows.get(key)
        if window is None:
            window = self.windows[key] = _Window()
        # drop what left the window first: the running sums then see every
        # sample leave before the next one comes, however seldom the timers
        # are asked (``allowed_level`` skips them below the floors)
        window.add(now, wait_leases, now - self.window_h * 3600.0)
        self._cache.pop(gpus, None)
        self.version += 1
        self.log.append(gpus)

    def floors(self) -> tuple[int, int]:
        """The least ``(rack_timer, network_timer)`` the formula can give,
        whatever the history: a job that waited less than a floor needs no
        timers to know its level."""
        H = self.window_h
        return int(min(math.ceil(0.8 * H), 6)), int(min(H, 12))

    def stable_until(self, gpus: int) -> float:
        """Until when (a little before, for rounding) the timers last
        computed for ``gpus`` hold if nothing is recorded: until their oldest
        wait leaves the window (-inf: none computed)."""
        hit = self._cache.get(gpus)
        if hit is None:
            return -math.inf
        end = hit[1] + self.window_h * 3600.0
        if end == math.inf:
            return math.inf  # no wait in the window: until one is recorded
        return end - (1e-9 * abs(end) + 1e-6)

    def spread(self, gpus: int, level: Level, now: float) -> int:
        window = self.windows.get((gpus, level))
        if window is None:
            return 1
        window.drop_before(now - self.window_h * 3600.0)
        return window.spread()

    def timers(self, gpus: int, now: float) -> tuple[int, int]:
        """``(rack_timer, network_timer)`` in leases for a job of ``gpus`` GPUs."""
        hit = self._cache.get(gpus)
        # valid while no sample would be dropped (the same test as drop_before)
        if hit is not None and not hit[1] < now - self.window_h * 3600.0:
            return hit[0]
        # ``spread`` inlined for both levels (same calls, fewer layers)
        horizon = now - self.window_h * 3600.0
        oldest = math.inf
        spreads = [1, 1]
        for i, level in enumerate((_MACHINE, _RACK)):
            window = self.windows.get((gpus, level))
            if window is not None:
                window.drop_before(horizon)
                spreads[i] = window.spread()
                if window.samples and window.samples[0][0] < oldest:
                    oldest = window.samples[0][0]
        H = self.window_h
        rack = min(math.ceil(0.8 * H), max(6, spreads[0]))
        net = min(H, max(12, spreads[1]))
        timers = (int(rack), int(net))
        self._cache[gpus] = (timers, oldest)
        return timers


@dataclass
class _TunerWatch:
    """Which GPU demands' auto-tuner timers may have changed since a
    consumer last looked: those recorded since (the tuner's ``log``) and
    those past the ``stable_until`` the consumer saw for them (a heap), so
    that a look costs the changed demands, not every demand."""

    seen: int = 0  # the tuner's version at the last look
    _due: list[tuple[float, int]] = field(default_factory=list)  # (until, gpus)
    _until: dict[int, float] = field(default_factory=dict)  # gpus -> its due time

    def quiet(self, tuner: AutoTuner, now: float) -> bool:
        """Whether no timer the consumer watches may have changed."""
        return self.seen == tuner.version and (not self._due or now < self._due[0][0])

    def until(self) -> float:
        """Until when nothing watched changes if nothing is recorded."""
        return self._due[0][0] if self._due else math.inf

    def changed(self, tuner: AutoTuner, now: float) -> set[int]:
        """The demands to look at again (each then ``watch``ed anew)."""
        out = set(tuner.log[self.seen :])
        self.seen = tuner.version
        due = self._due
        until = self._until
        while due and due[0][0] <= now:
            u, gpus = heapq.heappop(due)
            if until.get(gpus) == u:
                del until[gpus]
                out.add(gpus)
        return out

    def watch(self, gpus: int, until: float) -> None:
        """Timers of ``gpus`` seen to hold until ``until`` (the earliest
        such time counts until the demand is looked at again)."""
        if until < self._until.get(gpus, math.inf):
            self._until[gpus] = until
            heapq.heappush(self._due, (until, gpus))
            if len(self._due) > 2 * len(self._until) + 64:
                # drop superseded entries (they pile up while nothing is due)
                self._due = [(u, g) for g, u in self._until.items()]
                heapq.heapify(self._due)

    def clear(self) -> None:
        self.seen = 0
        self._due.clear()
        self._until.clear()


class _DryPool:
    """The GPUs a re-offer hands out, on paper: the engine's free counts
    with the servers that changed noted apart (a few per re-offer), never
    copied whole unless the packer needs more than one server (then a copy
    of the engine's packer index, once per pool, brought up to the changes
    at each such search)."""

    def __init__(self, view: EngineView) -> None:
        self.view = view
        self.free = view.free_per_server  # the engine's lists: read, never written
        self.S = view.cluster.servers_per_rack
        self.G = view.cluster.gpus_per_server
        self.server: dict[int, int] = {}  # server -> free GPUs, where changed
        self._index: FreeIndex | None = None  # built when first needed

    def give(self, held: Iterable[tuple[int, int]], sign: int = 1) -> None:
        """``(server, gpus)`` pairs join the pool (``sign`` -1: leave it)."""
        server = self.server
        free = self.free
        for srv, g in held:
            server[srv] = server.get(srv, free[srv]) + sign * g

    def take(self, held: Iterable[tuple[int, int]]) -> None:
        self.give(held, -1)

    def on(self, srv: int) -> int:
        return self.server.get(srv, self.free[srv])

    def find(self, gpus: int, level: Level) -> list[tuple[int, int]] | None:
        """``find_placement`` on the pool: its one-server step through the
        engine's index, the rest on a copy of that index (``FreeIndex.find``
        answers as ``find_placement`` would, without copying the free counts
        and scanning every rack at each search)."""
        if gpus <= self.G:
            srv = self.view.best_fit_server(gpus, self.server)
            if srv is not None:
                return [(srv, gpus)]
        if level == _MACHINE:
            return None
        index = self._index
        if index is None:
            index = self._index = self.view.free_index()
        free = index.free
        rack_free = index.rack_free
        S = self.S
        for srv, f in self.server.items():
            old = free[srv]
            if f != old:
                index.move(srv, old, f)
                free[srv] = f
                rack_free[srv // S] += f - old
        return index.find(gpus, level)


def _level_of(placement: list[tuple[int, int]], servers_per_rack: int) -> Level:
    """``shape_of(placement).level`` without the rest of the shape (a
    placement names each server once)."""
    if len(placement) == 1:
        return _MACHINE
    rack = placement[0][0] // servers_per_rack
    if all(srv // servers_per_rack == rack for srv, _ in placement):
        return _RACK
    return _NETWORK


@dataclass
class DallyPolicy(BasePolicy):
    """Dally; see the module docstring. ``preempt`` switches layer 2 on,
    ``auto_tune`` layer 3 (then ``rack_timer``/``network_timer`` are unused).
    ``reoffer_free_first`` (default True): in the re-offer a waiting job takes
    free GPUs before it competes for expired ones; False is the rule as first
    written (the packer on free and expired GPUs at once), which preempts
    jobs that free GPUs elsewhere made no one need (kept to compare with).

    This class decides; what it tells the engine about the instants that can
    matter to it (``LeaseHints``) is worked out by ``dally_hints.DallyHints``,
    which reads its rules and queue and asks its dry runs (``lease_matters``:
    the re-offer at a lease boundary; ``wake_matters``: the placement pass at
    a wake-up).

    Its caches and shortcuts only make it fast: it equals, bit for bit,
    ``dally_reference.ReferenceDally`` (the same rules in plain view, eager
    leases, no caches; ``make_policy(name, reference=True)``), which
    ``tests/test_dally_reference.py`` checks on every Dally golden cell and on
    seeded synthetic traces."""

    rack_timer: float = 1.0
    network_timer: float = 2.0
    preempt: bool = True
    auto_tune: bool = False
    lease_s: float = SEED_LEASE_S
    window_h: float = 24.0
    margin: float = 0.05
    reoffer_free_first: bool = True
    name: str = "dally"
    tuner: AutoTuner = field(init=False, repr=False)
    _wake: WakeUps = field(default_factory=WakeUps, repr=False)
    _losers: list[int] = field(default_factory=list, repr=False)
    _planned_at: float = field(default=-math.inf, repr=False)
    _asked: dict[int, tuple[float, float, float]] = field(default_factory=dict, repr=False)
    # the waiting jobs as (efficiency, arrival, index) entries, best first: a
    # waiting job's efficiency is frozen, so an entry is made when a job joins
    # the queue (arrival, this policy's preemption) and dropped when it is
    # placed; ``_entry`` maps index -> entry, ``_demand`` holds the entries
    # per GPU demand, each list sorted (the queue order is their merge: the
    # smallest demand bounds who can take a pool, and passes that skip jobs
    # too large merge the lists they need instead of scanning a long queue)
    _entry: dict[int, tuple[float, float, int]] = field(default_factory=dict, repr=False)
    _demand: dict[int, list[tuple[float, float, int]]] = field(default_factory=dict, repr=False)
    _joining: list[int] = field(default_factory=list, repr=False)
    # the demands whose auto-tuner timers may have changed since the asks
    # last looked
    _ask_watch: _TunerWatch = field(default_factory=_TunerWatch, repr=False)
    _synced_instant: int = field(default=-1, repr=False)
    # wake-up asks: jobs that joined the queue since the last ask, and per GPU
    # demand the waiting jobs asked for and the timers they were asked with
    _fresh: list[int] = field(default_factory=list, repr=False)
    _wake_prune_at: int = field(default=4096, repr=False)
    _asked_by_gpus: dict[int, dict[int, None]] = field(default_factory=dict, repr=False)
    _timers_by_gpus: dict[int, tuple[float, float]] = field(default_factory=dict, repr=False)
    # (instant, time, result) of a placement pass the wake-up test ran
    _fit_planned: tuple[int, float, Any] | None = field(default=None, repr=False)
    # (instant, time, expiring jobs, losers) of the re-offer the lease test ran last
    _reoffer_planned: tuple[int, float, list[int], list[int]] | None = field(
        default=None, repr=False
    )
    # the auto-tuner's least timers (``AutoTuner.floors``)
    _rack_floor: int = field(default=0, init=False, repr=False)
    _net_floor: int = field(default=0, init=False, repr=False)

    # what it tells the engine (``dally_hints``), reading its queue
    _hints: DallyHints = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.tuner = AutoTuner(self.window_h)
        self._rack_floor, self._net_floor = self.tuner.floors()
        self._hints = DallyHints(self, self._entry, self._demand, _TunerWatch())

    def engine_kwargs(self) -> dict[str, Any]:
        # leases only matter to layer 2; without it the timers fire through
        # wake-ups, and lease instants would only cost time
        lease = self.lease_s if self.preempt else None
        # Dally re-offers expired GPUs to waiting jobs only (with none waiting
        # it does nothing): expiries need not be events while nobody waits
        return {**DEFAULT_ENGINE_KWARGS, "lease_s": lease, "lazy_leases": lease is not None}

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        self.tuner = AutoTuner(self.window_h)
        self._rack_floor, self._net_floor = self.tuner.floors()
        self._fit_planned = None
        self._reoffer_planned = None
        self._wake.clear()
        self._wake_prune_at = 4096
        self._losers = []
        self._planned_at = -math.inf
        self._asked.clear()
        self._entry.clear()
        self._demand.clear()
        self._joining.clear()
        self._hints.reset(view)
        self._ask_watch.clear()
        self._synced_instant = -1
        self._fresh.clear()
        self._asked_by_gpus.clear()
        self._timers_by_gpus.clear()

    # -- layer 1 (+3): admission by delay timers --------------------------
    def timers(self, job: Job, now: float) -> tuple[float, float]:
        if not self.auto_tune:
            return self.rack_timer, self.network_timer
        return self.tuner.timers(job.gpus, now)  # = tuner_timers, one call less

    def allowed_level(self, view: EngineView, job: Job) -> Level:
        """The widest level the job accepts now."""
        cluster = view.cluster
        gpus = job.gpus
        # ``size_level`` inlined (called for every waiting job looked at)
        if gpus > cluster.gpus_per_rack:
            return _NETWORK
        waited = view.waited(job) / self.lease_s
        if self.auto_tune:  # ``timers`` inlined
            # below every timer the tuner can give: no timers needed
            if gpus <= cluster.gpus_per_server:
                if waited < self._rack_floor - EPS:
                    return _MACHINE
            elif waited < self._net_floor - EPS:
                return _RACK
            rack_timer, network_timer = self.tuner.timers(gpus, view.now)
        else:
            rack_timer, network_timer = self.rack_timer, self.network_timer
        if gpus <= cluster.gpus_per_server and waited < rack_timer - EPS:
            return _MACHINE
        if waited < network_timer - EPS:
            return _RACK
        return _NETWORK

    def _ask_wakeups(self, view: EngineView) -> None:
        """Ask for a wake-up when each waiting job's timers fire. A job's ask
        changes only when it joins the queue or its demand's timers change
        (auto-tuner), so only those jobs are looked at, not the whole queue
        (asking again for the same time was a no-op)."""
        now = view.now
        wakes = self._wake
        if len(wakes.asked) > self._wake_prune_at:
            # times at or before now can never be asked again (``WakeUps.at``
            # asks only later ones): a million jobs' worth would stay
            wakes.asked = {t for t in wakes.asked if t > now + EPS}
            self._wake_prune_at = 2 * len(wakes.asked) + 4096
        todo, self._fresh = self._fresh, []
        for index in todo:
            job = view.job(index)
            if job.status == Status.PENDING:
                self._ask(view, job)
        tuner = self.tuner
        watch = self._ask_watch
        # no timer changed since the last look (nothing recorded, no wait
        # left a window): every ask still holds; else only the demands whose
        # timers may have changed are looked at
        if self.auto_tune and not watch.quiet(tuner, now):
            changed = watch.changed(tuner, now)
            for gpus, members in self._asked_by_gpus.items():
                if gpus not in changed:
                    continue
                timers = self.tuner_timers(gpus, now)
                watch.watch(gpus, tuner.stable_until(gpus))
                if timers == self._timers_by_gpus.get(gpus):
                    continue
                self._timers_by_gpus[gpus] = timers
                for index in list(members):
                    job = view.job(index)
                    if job.status != Status.PENDING:
                        del members[index]
                    else:
                        self._ask(view, job)

    def tuner_timers(self, gpus: int, now: float) -> tuple[float, float]:
        """The auto-tuner's timers for a demand of ``gpus`` GPUs; the history
        changes only when a job is placed or a wait leaves the window (the
        tuner caches per demand)."""
        return self.tuner.timers(gpus, now)

    def _ask(self, view: EngineView, job: Job) -> None:
        tight = size_level(view.cluster, job.gpus)
        if tight == _NETWORK:
            return
        self._asked_by_gpus.setdefault(job.gpus, {})[job.index] = None
        rack_timer, network_timer = self.timers(job, view.now)
        if self.auto_tune:  # asked with these timers: look again when they may change
            self._ask_watch.watch(job.gpus, self.tuner.stable_until(job.gpus))
        asked = (job.queued_since, rack_timer, network_timer)
        if self._asked.get(job.index) == asked:
            return  # same timers since the same resource change: done
        self._asked[job.index] = asked
        fires = [network_timer] if tight == _RACK else [rack_timer, network_timer]
        for timer in fires:
            self._wake.at(view, job.queued_since + timer * self.lease_s)

    # -- layer 2: re-offer expired leases by efficiency ---------------------
    def _enqueue(self, job: Job) -> None:
        if job.index in self._entry:
            return
        entry = (job.efficiency, job.arrival, job.index)
        self._entry[job.index] = entry
        insort(self._demand.setdefault(job.gpus, []), entry)
        self._fresh.append(job.index)
        self._hints.joined(job.index)

    def _dequeue(self, job: Job) -> None:
        entry = self._entry.pop(job.index, None)
        if entry is None:
            return
        # its asks were for this wait (a later one is asked anew): dropped, so
        # the asks kept are the waiting jobs'
        self._asked.pop(job.index, None)
        self._hints.left(job.index)
        same = self._demand[job.gpus]
        if len(same) == 1:
            del self._demand[job.gpus]
        else:
            del same[bisect_left(same, entry)]

    def _sync(self, view: EngineView) -> None:
        """The queue's changes since the last call: this instant's arrivals
        and the jobs this policy preempted (``run_policy`` calls ``act`` at
        every instant and after every action). Rebuilt if the count disagrees."""
        if self._synced_instant != view.instant:
            self._synced_instant = view.instant
            for kind, index in view.events:
                if kind == "arrival":
                    self._enqueue(view.job(index))
        for index in self._joining:
            job = view.job(index)
            if job.status == Status.PENDING:
                self._enqueue(job)
        self._joining.clear()
        if len(self._entry) != len(view.pending):
            for job in [view.job(index) for index in self._entry]:
                self._dequeue(job)
            for job in view.pending:
                self._enqueue(job)

    def _reoffer(self, view: EngineView, lease_expired: Iterable[Job]) -> list[int]:
        """Jobs of ``lease_expired`` that lose their GPUs in the re-offer."""
        # a job still restoring from its last preemption is not re-offered
        now = view.now
        running = Status.RUNNING
        expired = [j for j in lease_expired if j.status == running and j.busy_until <= now]
        if not expired:
            return []
        pool_total = view.total_free
        for job in expired:
            pool_total += job.gpus
        if min(self._demand) > pool_total:
            return []  # not even the smallest waiting job fits the whole pool
        margin = self.margin
        effs = view.efficiencies(expired)
        cut = (max(effs) - margin, -math.inf, -1)  # challengers come before
        # the challengers, in queue order, merged lazily from the per-demand
        # lists: a demand larger than what is left of the pool is dropped
        # whole (the pool only shrinks), not skipped job by job
        heads = [
            (same[0], 0, gpus, same)
            for gpus, same in self._demand.items()
            if gpus <= pool_total and same[0] < cut
        ]
        if not heads:
            return []  # no challenger, or none fits even the whole pool
        if len(heads) == 1:
            entry, _, gpus, same = heads[0]
            if gpus <= view.cluster.gpus_per_server and (len(same) == 1 or not same[1] < cut):
                losers = self._reoffer_one(view, view.jobs[entry[2]], entry[0], expired, effs)
                if losers is not None:
                    return losers
        return self._reoffer_all(view, expired, effs, heads, cut, pool_total)

    def _reoffer_all(
        self,
        view: EngineView,
        expired: list[Job],
        effs: list[float],
        heads: list[tuple[tuple[float, float, int], int, int, list[tuple[float, float, int]]]],
        cut: tuple[float, float, int],
        pool_total: int,
    ) -> list[int]:
        """The re-offer in full, on a dry pool: the expired jobs (``effs``
        their efficiencies) in re-offer order, each after the challengers
        less efficient by more than ``margin`` (``heads``: per demand, the
        next challenger, merged lazily; ``cut``: past the last one) took
        what fits them; ``pool_total``: the free GPUs plus the expired jobs'.
        Returns the expired jobs that lose their GPUs."""
        margin = self.margin
        jobs = view.jobs
        cluster = view.cluster
        S = cluster.servers_per_rack
        G = cluster.gpus_per_server
        offered = sorted([(e, j.arrival, j.index, j) for e, j in zip(effs, expired, strict=True)])
        heapq.heapify(heads)  # (entries are unique: ties never reach the lists)
        # The largest server and rack of the whole pool (the free GPUs plus
        # the expired jobs'): the pool only shrinks below, so a demand that
        # does not fit them at its level, by the packer's own tests (one
        # server, one rack, or the total at network level), never fits and
        # needs no packer run; the pool itself is built when one may fit.
        # On a small cluster building the pool at once costs less than the test.
        top_server: float = -1  # computed when first needed
        top_rack: float = -1
        pool: _DryPool | None = None  # built on demand
        if cluster.num_servers <= _QUICK_FIT_SERVERS:
            top_server = top_rack = math.inf  # no test: every demand may fit
            pool = _DryPool(view)
            pool.give([held for job in expired for held in job.placement])
            add_srv: dict[int, int] = {}  # unused: the pool is built
            add_rack: dict[int, int] = {}
        else:
            add_srv, add_rack = gpus_held((job.placement for job in expired), S)
        kept: list[Job] = []  # incumbents that kept their GPUs before it was built
        # the pool only changes when someone takes GPUs: memoise the packer
        fits: dict[tuple[int, Level], list[tuple[int, int]] | None] = {}
        # free GPUs first (``reoffer_free_first``): the GPUs free now, less
        # what challengers took of them (built on demand), and its packer memo
        free_first = self.reoffer_free_first
        free_pool: _DryPool | None = None
        free_total = view.total_free
        free_fits: dict[tuple[int, Level], list[tuple[int, int]] | None] = {}
        losers: list[int] = []
        # servers where some challenger took expired GPUs (any GPUs, without
        # ``reoffer_free_first``): once no challenger is left, an incumbent on
        # none of them keeps its GPUs (what it gave is still there:
        # incumbents take back only their own), and the pool is not read
        # again, so it need not take them back
        touched: set[int] = set()
        # incumbents win ties, so they go first
        for inc_eff, _, _, incumbent in offered:
            if not heads and pool is not None:
                if not touched:
                    break  # nobody took anything: every incumbent left keeps
                for srv, _ in incumbent.placement:
                    if srv in touched:
                        break
                else:
                    continue
            while heads and heads[0][0][0] < inc_eff - margin:
                entry, i, gpus, same = heads[0]
                if gpus > pool_total:
                    heapq.heappop(heads)
                    continue
                i += 1
                if i < len(same) and same[i] < cut:
                    heapq.heapreplace(heads, (same[i], i, gpus, same))
                else:
                    heapq.heappop(heads)
                job = jobs[entry[2]]
                level = self.allowed_level(view, job)
                key = (gpus, level)
                if key not in fits:
                    if top_server < 0 and gpus <= G:
                        free_on = view.free_on
                        top_server = view.largest_server_free()
                        for srv, g in add_srv.items():
                            top_server = max(top_server, free_on(srv) + g)
                    if not (gpus <= G and top_server >= gpus) and level != _NETWORK:
                        if level == _RACK and top_rack < 0:
                            rack_free = view.free_per_rack
                            top_rack = max(rack_free)
                            for r, g in add_rack.items():
                                top_rack = max(top_rack, rack_free[r] + g)
                        if level == _MACHINE or top_rack < gpus:
                            fits[key] = None
                            continue
                    if pool is None:
                        # the free GPUs plus the expired jobs', less the kept ones'
                        pool = _DryPool(view)
                        pool.give(add_srv.items())
                        for other in kept:
                            pool.take(other.placement)
                elif fits[key] is None:
                    continue  # it fits nowhere in the pool, free GPUs included
                assert pool is not None
                if free_first and gpus <= free_total:
                    if key not in free_fits:
                        if free_pool is None:
                            free_pool = _DryPool(view)
                        free_fits[key] = free_pool.find(gpus, level)
                    placement = free_fits[key]
                    if placement is not None:
                        # free GPUs hold it: it needs nobody's
                        assert free_pool is not None
                        free_pool.take(placement)
                        free_total -= gpus
                        free_fits.clear()
                        pool.take(placement)
                        pool_total -= gpus
                        fits.clear()
                        continue
                if key not in fits:
                    fits[key] = pool.find(gpus, level)
                placement = fits[key]
                if placement is not None:
                    pool.take(placement)
                    if free_first:
                        # it needs expired GPUs: on each server it takes the
                        # free ones first, then expired ones
                        if free_pool is None:
                            free_pool = _DryPool(view)
                        for srv, g in placement:
                            f = free_pool.on(srv)
                            if g > f:
                                touched.add(srv)
                            if f:
                                took = min(g, f)
                                free_pool.take(((srv, took),))
                                free_total -= took
                        free_fits.clear()
                    else:
                        for srv, _ in placement:
                            touched.add(srv)
                    pool_total -= gpus
                    fits.clear()
            if pool is None:
                # nobody took any GPU yet: the incumbent's are all in the pool
                kept.append(incumbent)
                pool_total -= incumbent.gpus
                fits.clear()
            else:
                for srv, g in incumbent.placement:
                    if pool.on(srv) < g:
                        losers.append(incumbent.index)
                        break
                else:
                    pool.take(incumbent.placement)
                    pool_total -= incumbent.gpus
                    fits.clear()
        return losers

    def _reoffer_one(
        self,
        view: EngineView,
        challenger: Job,
        challenger_eff: float,
        expired: list[Job],
        effs: list[float],
    ) -> list[int] | None:
        """``_reoffer`` when one waiting job, of at most a server's GPUs, is
        the only challenger (the common case: the job that just arrived),
        worked out without the dry pool; None where it would need the packer
        beyond one server (``_reoffer`` then runs in full).

        The expired jobs no more than ``margin`` more efficient than the
        challenger take their GPUs back before it; the others give theirs to
        it. It takes one server, the packer's best fit among the free GPUs
        plus those given; of the jobs that gave GPUs there, in re-offer
        order, each keeps its own while the server still holds them, and
        the rest lose theirs. Every other job keeps its GPUs: nobody else
        took any on its other servers. (With ``reoffer_free_first``, GPUs
        free now that hold it at its level come first: nobody loses.)"""
        margin = self.margin
        gpus = challenger.gpus
        level = self.allowed_level(view, challenger)
        if self.reoffer_free_first:
            if view.largest_server_free() >= gpus:
                return []  # a free server holds it
            if level != _MACHINE and view.placement_for(challenger, level) is not None:
                return []  # free servers of one rack (or any) hold it
        free = view.free_per_server
        # server -> free GPUs plus those given: ``_DryPool.give`` without the
        # pool object (building one per re-offer cost 1.6 % of Dally's run)
        given: dict[int, int] = {}
        exposed: list[tuple[float, Job]] = []  # the jobs that gave GPUs
        for eff, job in zip(effs, expired, strict=True):
            if challenger_eff < eff - margin:
                exposed.append((eff, job))
                for srv, g in job.placement:
                    given[srv] = given.get(srv, free[srv]) + g
        srv = view.best_fit_server(gpus, given)
        if srv is None:
            return [] if level == _MACHINE else None
        if srv not in given:
            return []  # it took free GPUs only
        # the givers there, in re-offer order, with their GPUs there (a
        # placement names each server once)
        there = sorted(
            (eff, job.arrival, job.index, g)
            for eff, job in exposed
            for s, g in job.placement
            if s == srv
        )
        room = given[srv] - gpus
        losers: list[int] = []
        for _, _, index, g in there:
            if room < g:
                losers.append(index)
            else:
                room -= g
        return losers

    # -- the policy ---------------------------------------------------------
    def act(self, view: EngineView) -> Action:
        if not view.pending and not self._entry and not self._joining:
            # nobody waits, nobody joins (an arrival at this instant would
            # be waiting): ``_sync`` would find nothing, ``_decide`` waits
            self._synced_instant = view.instant
            return WAIT
        self._sync(view)
        action = self._decide(view)
        if isinstance(action, Place):
            self._dequeue(view.job(action.job))
        elif isinstance(action, Preempt):
            self._joining.append(action.job)  # queued once the engine stops it
        elif self.preempt and view.pending:
            # the instant ends with this queue: tell the engine which lease
            # boundaries can matter until the next decision point
            self._hints.send(view)
        return action

    def _decide(self, view: EngineView) -> Action:
        pending = view.pending
        if not pending:
            return WAIT
        if self._planned_at != view.now:  # first call at this instant
            self._planned_at = view.now
            self._losers = []
            events = view.events
            if self.preempt and view.lease_expired:
                self._losers = self._planned_losers(view)
                if self._losers:
                    self._fit_planned = None  # GPUs change before the pass
                # Nothing but leases expired and nobody lost: resources are as
                # at the last decision point, where nothing could start (timers
                # firing come as wake-ups), so skip the placement pass.
                if not self._losers and all(kind == "lease" for kind, _ in events):
                    return WAIT
        while self._losers:
            job = view.job(self._losers.pop(0))
            if job.status == Status.RUNNING:
                return Preempt(job.index)
        fit = self._first_fit(view)  # (the wake-up test's pass, if it ran for this instant)
        if fit is not None:
            job, level, placement = fit
            if self.auto_tune:
                got = _level_of(placement, view.cluster.servers_per_rack)
                self.tuner.record(job.gpus, got, view.waited(job) / self.lease_s, view.now)
            return Place(job.index, level)
        self._ask_wakeups(view)
        return WAIT

    def _first_fit(self, view: EngineView) -> tuple[Job, Level, list[tuple[int, int]]] | None:
        """The placement pass: the first waiting job, in queue order, that
        fits now at its allowed level, with that level and its placement."""
        planned = self._fit_planned
        if planned is not None:
            self._fit_planned = None
            if planned[0] == view.instant and planned[1] == view.now:
                return planned[2]
        free = view.total_free
        failed: set[tuple[int, Level]] = set()  # state is fixed during the pass
        jobs = view.jobs
        # the pass skips every job larger than the free GPUs: it goes through
        # the others only, in queue order (none if no waiting job fits)
        queue = self._demand
        same = [queue[gpus] for gpus in queue if gpus <= free]
        for _, _, index in same[0] if len(same) == 1 else heapq.merge(*same):
            job = jobs[index]
            level = self.allowed_level(view, job)
            if (job.gpus, level) in failed:
                continue
            placement = view.placement_for(job, level)
            if placement is None:
                failed.add((job.gpus, level))
            else:
                return job, level, placement
        return None

    def lease_matters(self, view: EngineView, expiring: list[Job]) -> bool:
        """The engine's last test of an instant where only the leases of
        ``expiring`` would end (the hints' ``lease_matters``, asked at
        that time). Since the last decision point, which ended with the
        queue as it is, only time has passed: the instant is a WAIT with no
        side effect unless the re-offer preempts someone (the placement pass
        is skipped then, see ``_decide``). If it goes ahead, its re-offer is
        this one."""
        losers = self._reoffer(view, expiring)
        self._reoffer_planned = (view.instant, view.now, [j.index for j in expiring], losers)
        return bool(losers)

    def _planned_losers(self, view: EngineView) -> list[int]:
        """The re-offer of this instant's expired leases (the one the
        lease test ran for this instant and these jobs, if it did)."""
        planned, self._reoffer_planned = self._reoffer_planned, None
        expired = view.lease_expired
        # (valid only if nothing but leases and wake-ups came since: an
        # arrival or a completion at this time changes the re-offer)
        if (
            planned is not None
            and planned[0] == view.instant
            and planned[1] == view.now
            and planned[2] == [j.index for j in expired]
            and all(kind == "lease" or kind == "wake" for kind, _ in view.events)
        ):
            return list(planned[3])
        return self._reoffer(view, expired)

    def wake_matters(self, view: EngineView) -> bool:
        """The test of this policy's wake-ups (the hints' ``wake_matters``),
        called when a delay timer fires and nothing else happens. Since the
        last decision point, which ended with no waiting job fitting and
        every wake-up asked, only time has passed: the instant is a WAIT with
        no side effect unless a job now fits at its (wider) level, or the
        auto-tuner's timers may have changed (wake-ups to ask again)."""
        if not view.pending:
            return False
        if self._fresh or self._joining or self._losers:
            return True
        if self.auto_tune and not self._ask_watch.quiet(self.tuner, view.now):
            return True
        fit = self._first_fit(view)
        if fit is not None:
            # the instant goes ahead with nothing changed in between: its
            # first placement pass is this one
            self._fit_planned = (view.instant, view.now, fit)
            return True
        return False
