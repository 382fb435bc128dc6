"""Dally's side of the seam: what it tells the engine about lease boundaries
and wake-ups (``LeaseHints``), kept apart from its decisions (``dally.py``).

At the end of a decision point where jobs still wait, Dally hints:

* ``floor`` and ``needs``: an expiring job can lose its GPUs only to a waiting
  job less efficient by more than ``margin``; per efficiency threshold, the
  smallest demand among those (``_lease_needs``);
* ``levels`` / ``levels_for``: the smallest waiting demand per level (one
  server, one rack, any), over every waiting job or only those that could
  challenge an expiring job of a given efficiency bound, and until when that
  holds (a delay timer firing, the auto-tuner's timers changing); the
  ``LevelClasses`` below keep them up to date as jobs join, leave and change
  level, and ``levels_at`` renews them at a later boundary;
* ``lease_matters`` and ``wake_matters``: the policy's own dry runs (its
  re-offer, its placement pass), asked at a boundary or a wake-up where
  nothing else happens.

``DallyHints`` reads the policy's rules (levels, timers, margin) and queue,
and is told of the queue's changes (``joined``, ``left``); the policy calls it,
never the engine.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Protocol

from ddl_gym.engine import EngineView, Job, LeaseHints
from ddl_gym.perf import Level

from .common import EPS

if TYPE_CHECKING:
    from .dally import AutoTuner, _TunerWatch

# the levels as module constants (an enum member's lookup costs more)
_MACHINE, _RACK, _NETWORK = Level.MACHINE, Level.RACK, Level.NETWORK

# a waiting job's queue entry: (efficiency, arrival, index), best first
Entry = tuple[float, float, int]


class DallyRules(Protocol):
    """What the hints read of the policy."""

    lease_s: float
    margin: float
    auto_tune: bool
    tuner: AutoTuner

    def allowed_level(self, view: EngineView, job: Job) -> Level: ...

    def timers(self, job: Job, now: float) -> tuple[float, float]: ...

    def lease_matters(self, view: EngineView, expiring: list[Job]) -> bool: ...

    def wake_matters(self, view: EngineView) -> bool: ...


@dataclass
class DallyHints:
    """The ``LeaseHints`` Dally gives the engine, kept up to date.

    ``entries`` (index -> queue entry) and ``demand`` (GPU demand -> its
    entries, sorted) are the policy's own queue, read here, never written."""

    rules: DallyRules = field(repr=False, compare=False)
    entries: dict[int, Entry] = field(repr=False, compare=False)
    demand: dict[int, list[Entry]] = field(repr=False, compare=False)
    # the demands whose tuner timers may have changed since the classes looked
    watch: _TunerWatch = field(repr=False)
    # the needs, rebuilt when the queue changed (``_changes`` counts its changes)
    _changes: int = 0
    _needs_at: int = -1
    _needs: list[tuple[float, int]] = field(default_factory=list)
    # the level test: each waiting job's level (``allowed_level``), GPU demand
    # and efficiency as counted, counts per level and demand, when each job's
    # level may next change, jobs not classified yet, and per demand the
    # tuner's timers the classes were computed with
    _cls: dict[int, tuple[Level, int, float]] = field(default_factory=dict)
    _cls_count: dict[Level, dict[int, int]] = field(default_factory=dict)
    _cls_due: list[tuple[float, int, float]] = field(default_factory=list)
    _cls_new: list[int] = field(default_factory=list)
    _cls_by_gpus: dict[int, set[int]] = field(default_factory=dict)
    _cls_timers: dict[int, tuple[float, float]] = field(default_factory=dict)
    # per (level, GPU demand): the efficiencies of its waiting jobs, sorted
    # (the least says whether the class holds a challenger for a bound)
    _cls_effs: dict[tuple[Level, int], list[float]] = field(default_factory=dict)
    # ``levels_for`` by bound, while no class's least efficiency changes
    _levels_memo: dict[float, tuple[float, float, float]] = field(default_factory=dict)
    # the hints' functions, bound to the view of the run
    _levels_at: Callable[[], tuple[float, float, float, float]] | None = None
    _lease_matters: Callable[[list[Job]], bool] | None = None
    _wake_matters: Callable[[], bool] | None = None

    def reset(self, view: EngineView) -> None:
        """A new run through ``view``: nothing counted; the wake-up test given."""
        self._levels_at = partial(self.level_minima, view)
        self._lease_matters = partial(self.rules.lease_matters, view)
        self._wake_matters = partial(self.rules.wake_matters, view)
        self._changes = 0
        self._needs_at = -1
        self._needs = []
        self._cls.clear()
        self._cls_count.clear()
        self._cls_due.clear()
        self._cls_new.clear()
        self._cls_by_gpus.clear()
        self._cls_timers.clear()
        self._cls_effs.clear()
        self._levels_memo.clear()
        self.watch.clear()
        view.hint(LeaseHints(wake_matters=self._wake_matters))

    def joined(self, index: int) -> None:
        """Job ``index`` joined the queue (classified at the next hint)."""
        self._changes += 1
        self._cls_new.append(index)

    def left(self, index: int) -> None:
        """Job ``index`` left the queue (placed)."""
        self._changes += 1
        self._unclassify(index)

    def send(self, view: EngineView) -> None:
        """Hint the engine at the end of a decision point where jobs wait.
        A lease expiry alone can only matter if some expired job is more
        efficient than a waiting job by more than ``margin`` (else the
        re-offer has no challenger, nobody loses, and the instant is a WAIT
        with no side effect), and only if a waiting job it could lose to fits
        the expired and free GPUs together (else the re-offer gives up before
        the packer): other expiries make no decision point."""
        if self._needs_at != self._changes:
            self._needs_at = self._changes
            self._needs = self._lease_needs()
        view.hint(
            LeaseHints(
                floor=self._needs[0][0],
                needs=self._needs,
                levels=self.level_minima(view),
                levels_for=self.levels_for,
                levels_at=self._levels_at,
                lease_matters=self._lease_matters,
                wake_matters=self._wake_matters,
            )
        )

    # -- the level test: waiting demands per level ---------------------------
    def _classify(self, view: EngineView, job: Job) -> None:
        """Count a waiting job at its level now, and note when that level may
        change: a timer firing (a little before it, for rounding). A level
        changes otherwise only when the auto-tuner's timers for its demand
        do (``level_minima`` checks that)."""
        level = self.rules.allowed_level(view, job)
        efficiency = self.entries[job.index][0]  # frozen while it waits
        self._cls[job.index] = (level, job.gpus, efficiency)
        effs = self._cls_effs.setdefault((level, job.gpus), [])
        insort(effs, efficiency)
        if effs[0] == efficiency:
            self._levels_memo.clear()  # a class's least efficiency changed
        counts = self._cls_count.setdefault(level, {})
        counts[job.gpus] = counts.get(job.gpus, 0) + 1
        self._cls_by_gpus.setdefault(job.gpus, set()).add(job.index)
        if self.rules.auto_tune:  # classed with these timers: look again when they may change
            self.rules.timers(job, view.now)
            self.watch.watch(job.gpus, self.rules.tuner.stable_until(job.gpus))
        if level == _NETWORK:
            return  # the widest: waiting longer changes nothing
        rack_timer, network_timer = self.rules.timers(job, view.now)
        timer = rack_timer if level == _MACHINE else network_timer
        fires = job.queued_since + (timer - EPS) * self.rules.lease_s
        until = fires - (1e-9 * abs(fires) + 1e-6)
        now = view.now
        if not until > now:
            until = math.nextafter(now, math.inf)  # look again at the next instant
        heapq.heappush(self._cls_due, (until, job.index, job.queued_since))

    def _unclassify(self, index: int) -> None:
        entry = self._cls.pop(index, None)
        if entry is None:
            return
        level, gpus, efficiency = entry
        effs = self._cls_effs[(level, gpus)]
        if effs[0] == efficiency:
            self._levels_memo.clear()  # a class's least efficiency may change
        if len(effs) == 1:
            del self._cls_effs[(level, gpus)]  # (``levels_for`` loops over the classes)
        else:
            del effs[bisect_left(effs, efficiency)]
        counts = self._cls_count[level]
        if counts[gpus] == 1:
            del counts[gpus]
        else:
            counts[gpus] -= 1
        self._cls_by_gpus[gpus].discard(index)

    def level_minima(self, view: EngineView) -> tuple[float, float, float, float]:
        """The hints' ``levels``: the smallest waiting demand per
        level (every waiting job, not only the challengers: a superset, so
        the engine's test can only keep more instants) and until when that
        holds (the first level change or auto-tuner timer change)."""
        now = view.now
        todo, self._cls_new = self._cls_new, []
        for index in todo:
            job = view.job(index)
            if index in self.entries and index not in self._cls:
                self._classify(view, job)
        until = math.inf
        tuner = self.rules.tuner
        watch = self.watch
        if self.rules.auto_tune and not watch.quiet(tuner, now):
            # only the demands whose timers may have changed (as the policy's ``_ask_wakeups``)
            changed = watch.changed(tuner, now)
            for gpus, members in self._cls_by_gpus.items():
                if not members or gpus not in changed:
                    continue
                timers = tuner.timers(gpus, now)
                # the timers hold while nothing is recorded and no wait
                # leaves the window
                watch.watch(gpus, tuner.stable_until(gpus))
                if self._cls_timers.get(gpus) != timers:
                    self._cls_timers[gpus] = timers
                    for index in list(members):
                        self._unclassify(index)
                        self._classify(view, view.job(index))
        due = self._cls_due
        while due and due[0][0] <= now:
            _, index, since = heapq.heappop(due)
            job = view.job(index)
            if index in self._cls and job.queued_since == since:
                self._unclassify(index)
                self._classify(view, job)
        if self.rules.auto_tune:  # (classifying may have lowered it)
            until = watch.until()
        if due:
            until = min(until, due[0][0])
        counts = self._cls_count
        minima = [
            min(counts[level]) if counts.get(level) else math.inf
            for level in (_MACHINE, _RACK, _NETWORK)
        ]
        return (minima[0], minima[1], minima[2], until)

    def levels_for(self, bound: float) -> tuple[float, float, float]:
        """``level_minima``'s three minima over only the waiting jobs that an
        expiring job of efficiency bound ``bound`` could lose to (less
        efficient by more than ``margin``, with ``_lease_needs``' rounding):
        the other waiting jobs cannot take its GPUs in the re-offer."""
        hit = self._levels_memo.get(bound)
        if hit is not None:
            return hit
        cut = bound - self.rules.margin + 1e-9
        minima = [math.inf, math.inf, math.inf]
        for (level, gpus), effs in self._cls_effs.items():
            if effs[0] < cut and gpus < minima[level]:
                minima[level] = gpus
        if len(self._levels_memo) > 4096:
            self._levels_memo.clear()  # (bounds are many: keep it small)
        got = self._levels_memo[bound] = (minima[0], minima[1], minima[2])
        return got

    def _lease_needs(self) -> list[tuple[float, int]]:
        """``(threshold, gpus)`` steps, the hints' ``needs``: an expired job
        more efficient than ``threshold`` has as challengers (waiting jobs
        less efficient by more than ``margin``) at least the queue's prefix
        up to the step's job, whose smallest demand is ``gpus``. Thresholds
        sit 1e-9 below ``efficiency + margin`` (rounding; the engine compares
        bounds that are themselves 1e-9 high)."""
        smallest = min(self.demand)
        margin = self.rules.margin
        needs: list[tuple[float, int]] = []
        least = math.inf
        # a step is the first job of its demand, in queue order, smaller
        # than every demand before it: only each demand's first job can be one
        for entry, gpus in sorted((same[0], gpus) for gpus, same in self.demand.items()):
            if gpus < least:
                least = gpus
                needs.append((entry[0] + margin - 1e-9, gpus))
                if gpus == smallest:
                    break
        return needs
