"""Lazy GPU leases: lease boundaries computed only when a job waits.

With leases, a running job's lease expires every ``lease_s`` seconds of
running; the eager engine makes every expiry an event (a decision point),
even when no job waits and nothing can change. A policy that acts on an
expiry only when some job waits (Dally re-offers expired GPUs to *waiting*
jobs) loses nothing if expiries are reported only at instants where, after
the instant's other events, a job waits. ``LazyLeases`` does that bookkeeping
and reproduces the eager boundaries bit for bit:

* a job's boundaries are ``start + L``, then ``+ L`` again and again, each sum
  rounded as a float (as the eager engine re-pushes ``t + lease_s``);
  ``roll`` jumps over many of them at once only where the sums are exact;
* while jobs wait (the engine is *armed*), a heap of lower bounds gives the
  next boundary of any running job: entries behind the clock are rolled
  forward when they reach the top, so a long idle stretch costs one roll
  per job, not one event per lease;
* at an instant where a job waits although none waited before, the jobs whose
  boundary falls exactly on that instant are found through their *phase*
  (boundary modulo ``L``, in buckets of 2**-20 s), not by rolling every
  running job.

An *interest floor* (``set_floor``) goes further for a policy that acts on an
expiry only if some expiring job's placement efficiency exceeds a threshold
(Dally re-offers an expired lease only to a waiting job less efficient by a
margin): the engine gives each running job a bound on its efficiency until
its next re-rate (``set_bound``), and a job whose bound is at or below the
floor is *parked* (off the boundary heap, on a heap by bound) so its expiries
alone make no decision point. Lowering the floor or re-rating a job brings it
back. Expiries at instants that happen anyway are still all reported
(``expire_at`` goes by phase, parked or not).

A *demand* test (``set_floor``'s ``needs``) goes further still, for a policy
whose re-offer can only hand the expired GPUs to a waiting job that fits in
them (Dally: the GPUs of the jobs expiring at an instant plus the free ones).
The policy gives, per efficiency threshold, the smallest demand among the
waiting jobs that an expiring job above that threshold could lose to; a
boundary shared by jobs whose GPUs plus the free ones hold none of those
demands is passed over without an instant. Only boundaries before the next
other event are passed over (the free count and the policy's needs are fixed
until then), and the jobs that share a boundary are found by phase, as
``expire_at`` finds them. A job whose GPUs, plus those of every running job
within two phase buckets of it (all that can ever share a boundary with it)
and the free ones, hold no demand named for the largest bound among those
jobs is *parked by demand*: it joins the group of its GPU sum ``c`` and
of that largest bound's band (1/64 wide; a group's jobs then need about the
same demand, and a group whose band's top edge names more GPUs than ``c``
plus the free ones is not looked at, nor are the lower bands). A
group keeps its jobs in phase order, not by boundary, so waking it costs no
rolling: its next boundary after the clock is found next to the clock's
phase. A group is searched only while ``c`` plus the free GPUs reach the
demand named for the largest bound near its jobs (raised when one of them
is re-rated; a job whose neighbour rises above the band goes back to the
main heap) and, while the level test holds, while ``c`` GPUs could pass
that test at the largest free server and rack (so a small job waiting for a
moment wakes a whole group at once, and its placement puts it back to sleep,
without moving jobs), and only if its next boundary comes before the next
other event. A job returns to the main heap when a job near its phase
starts.

The level test itself (``fits``) counts, for jobs of largest bound ``top``,
only the waiting jobs that could challenge them (the policy's
``levels_for(top)``): a more efficient waiting job would fit the GPUs but
cannot take them.

The seam: the floor, demands, levels and the policy's last test all come
from the policy's latest ``LeaseHints`` (``engine/hints.py``). ``LeaseSkipper``
holds them and the ``LazyLeases``, reads the engine's state (given once) and
answers ``LazyLeases``' questions (``LeaseJudge``); the engine's loop calls a
few of its methods and knows nothing of the policy.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Protocol

from ddl_gym.engine.hints import NO_HINTS, LeaseHints, asked_at
from ddl_gym.engine.job import Job
from ddl_gym.engine.packer import FreeIndex, gpus_held
from ddl_gym.topology import Cluster

# Phase buckets: 2**-20 s (about 1 us) is far wider than the rounding drift of
# a boundary sequence (a few ulps of the largest time) and exact to scale by.
_BUCKETS_PER_S = float(2**20)
# Demand groups are split by the largest efficiency bound near their jobs, in
# bands this wide: a group whose bound is too low for the demand test is not
# searched (one group holding every bound was searched for its best job, and
# its other jobs' boundaries failed the test one by one)
_BANDS = 64
_INF_BAND = 1 << 30  # jobs with no bound (every expiry interests the policy)
_START_ORDER = attrgetter("started_at", "index")  # the eager engine's order of expiries


def _band(top: float) -> int:
    return _INF_BAND if top == math.inf else max(0, math.floor(top * _BANDS))


def _band_ceiling(band: int) -> float:
    """Above every bound of the band (its top edge, not reached by rounding)."""
    return math.inf if band == _INF_BAND else (band + 1) / _BANDS


def roll(b: float, lease_s: float, t: float, strict: bool) -> float:
    """The first of ``b, fl(b + L), fl(fl(b + L) + L), ...`` that is ``> t``
    (``strict``) or ``>= t``, with every sum rounded exactly as a float
    addition would round it one step at a time.

    Within a binade ``[2^e, 2^(e+1))`` where ``L`` is a multiple of the
    spacing of floats, every partial sum is exact, so ``b + k*L`` equals ``k``
    single steps and is taken in one jump; steps that cross into the next
    binade (and may round) are taken one at a time.
    """
    L = lease_s
    if b > 0.0 and t - b >= 2.0 * L:
        # (the common case) ``b`` and ``t`` in one binade where ``L`` is a
        # multiple of the spacing: the boundaries up to ``t`` are exactly
        # ``b + k*L``; take the last one at or before ``t`` in one jump (the
        # division may round ``k`` by one either way: corrected exactly)
        if math.frexp(t)[1] == math.frexp(b)[1] and (L / math.ulp(b)).is_integer():
            c = b + math.floor((t - b) / L) * L
            if c > t:
                c -= L
            elif c + L <= t:
                c += L
            if c == t and not strict:
                return c
            out = c + L  # may leave the binade: one rounded step, as ``_step``
            return out if out > c else math.nextafter(c, math.inf)
    while b < t or (strict and b == t):
        if t - b >= 4.0 * L and b > 0.0:
            ulp = math.ulp(b)
            if (L / ulp).is_integer():
                # stay clear of t and of the binade's top by a step: the
                # single steps below finish the job exactly
                top = math.ldexp(1.0, math.frexp(b)[1])  # b < top, same spacing below
                k = min(math.floor((t - b) / L), math.floor((top - b) / L)) - 1
                if k >= 1:
                    b = b + k * L  # exact: every partial sum is representable
                    continue
        out = b + L  # ``_step`` inlined (the common case: a step or two)
        b = out if out > b else math.nextafter(b, math.inf)
    return b


def _step(b: float, L: float) -> float:
    """``b + L``, but strictly later when ``L`` is below the resolution of
    ``b`` (a tiny lease late in a long run), as the eager engine's timers: a
    boundary that does not move would loop for ever. Identical to ``b + L``
    whenever that sum moves."""
    out = b + L
    return out if out > b else math.nextafter(b, math.inf)


@dataclass
class _PhaseGroup:
    """Jobs parked by demand with one GPU sum, kept in phase order
    (``(bucket, seq, j, token)``, sorted), not by boundary: a group asleep
    for a long stretch needs no rolling when it wakes, its next boundary is
    found next to the clock's phase. ``cand`` is the group's earliest
    boundary after some reference time (``(b, seq, j, token)``, as a heap
    entry), ``cand_q`` its bucket; None: to compute."""

    entries: list[tuple[int, int, int, int]] = field(default_factory=list)
    cand: tuple[float, int, int, int] | None = None
    cand_q: int = 0
    # at least the largest efficiency bound of any job that may share a
    # boundary with a member (raised by ``set_bound`` of a neighbour), and
    # below ``ceiling``, its band's top edge (a member whose neighbour rises
    # above it leaves the group)
    top: float = -math.inf
    ceiling: float = math.inf
    cap: int = 0  # its GPU sum
    band: int = 0
    # the sequence number of its entry on ``LazyLeases._asleep`` (None:
    # awake, among ``_awake``; 0: new, not yet awake; -1: dropped)
    asleep: int | None = None


class LeaseJudge(Protocol):
    """The tests ``LazyLeases`` asks of a boundary beyond its own counts
    (``LeaseSkipper`` answers them from the policy's hints)."""

    def fits(self, jobs: list[Job], top: float, pool: int) -> bool:
        """Whether a waiting demand of the level test (for jobs of largest
        efficiency bound ``top``) may fit the free GPUs plus those of
        ``jobs``, ``pool`` in all."""
        ...

    def caps_fit(self) -> Callable[[int, float], bool]:
        """``caps_fit()(c, top)``: whether jobs holding ``c`` GPUs in all, of
        largest bound ``top``, may pass ``fits`` at best (a relaxation, for
        whole demand groups)."""
        ...

    def matters(self, b: float, jobs: list[Job]) -> bool:
        """The policy's last word on a boundary at ``b`` whose jobs pass the
        tests above (False: it would only wait there)."""
        ...

    def relevel(self, t: float) -> float:
        """The level test brought up to time ``t`` (once it ran out); returns
        the new ``levels_until`` (-inf: no way to)."""
        ...


class LazyLeases:
    """Lease boundaries of the running jobs, rolled forward only on demand.

    ``at[j]`` is the latest boundary of job ``j`` known so far (exact); heap
    entries ``(b, seq, j, token)`` are lower bounds of the next one. A job's
    ``token`` changes whenever it gets a new entry (start, re-rate, unpark),
    so older entries of it, on either heap, are stale.
    """

    # a demand group is cleaned of stale entries past this many beyond twice the parked jobs
    stale_slack = 4096

    def __init__(self, lease_s: float, judge: LeaseJudge | None = None) -> None:
        self.lease_s = lease_s
        # the judge's tests (``LeaseJudge``; None: only the floor and the
        # demand counts judge a boundary), bound once: they run per boundary
        self._fits = judge.fits if judge is not None else None
        self._caps_fit = judge.caps_fit if judge is not None else None
        self._matters = judge.matters if judge is not None else None
        self._relevel = judge.relevel if judge is not None else None
        self.levels_until = -math.inf  # the level test holds before this time
        self.at: dict[int, float] = {}
        self._heap: list[tuple[float, int, int, int]] = []
        self._seq = 0
        self._phase: dict[int, set[int]] = {}
        self._phase_of: dict[int, int] = {}
        self._n_phases = math.ceil(lease_s * _BUCKETS_PER_S)
        self.floor: float | None = None  # None: every expiry interests the policy
        self.bound: dict[int, float] = {}  # efficiency bound until the next re-rate
        self._token: dict[int, int] = {}
        self._parked: list[tuple[float, int, int, int]] = []  # (-bound, seq, j, token)
        self._bparked: set[int] = set()  # jobs whose entry is on ``_parked``
        # demand test: thresholds ascending, the smallest demand above each
        self._need_thr: list[float] = []
        self._need_gpus: list[int] = []
        # parked by demand: (GPU sum near the job, band of the largest bound
        # near it) -> its jobs in phase order
        self._dparked: dict[tuple[int, int], _PhaseGroup] = {}
        # The groups ``_groups_to_search`` looks at: per GPU sum, its awake
        # groups in descending band order. A group whose ``cand`` lies at or
        # past the search's horizon (the next other event) sleeps on
        # ``_asleep`` (by ``cand``'s time) until a horizon passes it or its
        # ``cand`` is cleared: most groups are skipped so, and a call visited
        # every one of them to skip it (47 groups per call at 100k jobs).
        self._awake: dict[int, list[tuple[int, _PhaseGroup]]] = {}
        self._asleep: list[tuple[float, int, _PhaseGroup]] = []
        self._sleep_seq = 0
        self._dparked_of: dict[int, int] = {}  # j -> its token while parked by demand
        self._dparked_group: dict[int, _PhaseGroup] = {}  # j -> its group (while in ``of``)

    def _push(self, j: int, b: float) -> None:
        """A fresh boundary-heap entry for ``j`` (its older entries go stale)."""
        self._seq += 1
        self._token[j] = self._seq
        heapq.heappush(self._heap, (b, self._seq, j, self._seq))
        self._dparked_of.pop(j, None)
        self._dparked_group.pop(j, None)
        self._bparked.discard(j)

    def set_bound(self, j: int, bound: float) -> None:
        """Job ``j``'s efficiency stays at or below ``bound`` until its next
        re-rate. A job parked by bound gets a fresh heap entry if the bound
        rose (it may now interest the policy); one on the main heap keeps its
        entry (the bound is read when it reaches the top); one parked by
        demand stays in its group, whose ``top`` (like its neighbours'
        groups') is raised to the new bound, unless that leaves the group's
        band: the neighbour then goes back on the main heap."""
        old = self.bound.get(j, math.inf)
        self.bound[j] = bound
        if bound > old and j in self._bparked and j in self.at:
            self._push(j, self.at[j])
        # (a bound no higher than before keeps every group's ``top`` true)
        if bound > old and self._dparked_of and j in self._phase_of:
            # the groups of its parked neighbours may now share a boundary
            # with a job of this bound
            n = self._n_phases
            q = self._phase_of[j]
            of = self._dparked_of
            group_of = self._dparked_group
            for k in range(q - 2, q + 3):
                for m in self._phase.get(k % n, ()):
                    if m in of:
                        group = group_of[m]
                        if bound > group.top:
                            if bound < group.ceiling:
                                group.top = bound
                            else:  # out of its band: back on the main heap
                                self._push(m, self.at[m])

    def set_floor(
        self,
        floor: float | None,
        needs: Sequence[tuple[float, int]] = (),
        levels_until: float = -math.inf,
    ) -> None:
        """Only jobs whose bound exceeds ``floor`` make lease instants (None:
        all). Parked jobs above a lowered floor go back on the boundary heap.

        ``needs``: ``(threshold, gpus)`` pairs, thresholds ascending and
        ``gpus`` descending: a boundary whose jobs' largest bound exceeds a
        threshold interests the policy only if their GPUs plus the free ones
        number at least the ``gpus`` of the last such threshold; one whose
        largest bound exceeds none, not at all (empty: no demand test).
        Before ``levels_until``, a boundary the count test keeps must also
        pass the ``fits`` test given at construction."""
        self.levels_until = levels_until
        self.floor = floor
        self._need_thr = [thr for thr, _ in needs]
        self._need_gpus = [g for _, g in needs]
        parked = self._parked
        while parked and (floor is None or -parked[0][0] > floor):
            _, _, j, token = heapq.heappop(parked)
            if self._token.get(j) == token and j in self.at:
                self._push(j, self.at[j])

    def _around(self, q: int) -> tuple[int, ...]:
        """Bucket ``q`` and its two neighbours, each once."""
        n = self._n_phases
        if n >= 3:
            return ((q - 1) % n, q, (q + 1) % n)
        return tuple(sorted({(q - 1) % n, q, (q + 1) % n}))

    def _bucket(self, t: float) -> int:
        return int(math.fmod(t, self.lease_s) * _BUCKETS_PER_S)

    def start(self, job: Job, now: float) -> None:
        """The job started at ``now``: its first lease ends at ``now + L``."""
        j = job.index
        b = _step(now, self.lease_s)
        self.at[j] = b
        self._push(j, b)
        q = self._bucket(b)
        self._phase_of[j] = q
        self._phase.setdefault(q, set()).add(j)
        if self._dparked_of:
            self._unpark_near(q)

    def _unpark_near(self, q: int) -> None:
        """A job of phase ``q`` started: the jobs parked by demand within two
        buckets may now share a boundary with it (their GPU sum grew), so
        they go back on the main heap."""
        n = self._n_phases
        of = self._dparked_of
        for k in range(q - 2, q + 3):
            for m in self._phase.get(k % n, ()):
                if m in of:
                    self._push(m, self.at[m])

    def stop(self, job: Job) -> None:
        """The job stopped running (its heap entry goes stale by version)."""
        j = job.index
        self.at.pop(j, None)
        self._token.pop(j, None)  # its entries go stale
        self._dparked_of.pop(j, None)
        self._dparked_group.pop(j, None)
        self._bparked.discard(j)
        q = self._phase_of.pop(j, None)
        if q is not None:
            members = self._phase[q]
            members.discard(j)
            if not members:
                del self._phase[q]

    def next_after(
        self, now: float, jobs: list[Job], before: float = -math.inf, free: int = 0
    ) -> float | None:
        """The earliest boundary ``> now`` of any running job (None: none);
        if none comes before ``before``, some boundary at or after it, or
        None (demand groups are not searched past ``before``).

        With a demand test (``set_floor``'s ``needs``), boundaries earlier
        than ``before`` (the next other event; by default none) whose jobs'
        GPUs plus ``free`` hold no demand the policy named are passed over
        for good: give ``before`` only once the decision point is over (the
        free count and the needs are then fixed until ``before``).

        The search takes the earliest of the main heap's top and the
        candidates of the demand groups worth searching (``_groups_to_search``;
        the dormant ones wake when the search reaches the end of the level
        test, ``_wake_dormant``). A main-heap entry is dropped if stale,
        parked by bound below the floor, rolled forward if behind the clock,
        parked by demand if its neighbourhood holds too few GPUs
        (``_park_by_demand``), or else judged (``_too_few``): the first
        boundary not passed over is the answer.
        """
        heap = self._heap
        L = self.lease_s
        floor = self.floor
        token_of = self._token
        demand = bool(self._need_thr)
        judged = -math.inf  # the last boundary tested, and whether it is passed over
        passed = False
        use_caps = (
            demand and self._caps_fit is not None and now < before and now < self.levels_until
        )
        caps_until = self.levels_until if use_caps else -math.inf
        active, dormant = self._groups_to_search(now, before, free, demand, use_caps)
        while True:
            top = heap[0] if heap else None
            grp = None
            for g in active:
                c = g.cand
                if c is not None and (top is None or c < top):
                    top = c
                    grp = g
            if dormant and caps_until < before and (top is None or top[0] >= caps_until):
                dormant, caps_until = self._wake_dormant(active, dormant, caps_until)
                continue
            if top is None:
                return None
            b, seq, j, token = top
            if grp is not None:
                # a parked group's earliest boundary after the last one
                # passed over (exact: ``_group_next`` rolled it)
                if floor is not None and self.bound.get(j, math.inf) <= floor:
                    self._group_drop_cand(grp)
                    self._park_by_bound(j, seq, token)
                    self._group_next(grp, now if judged == -math.inf else judged)
                    continue
                if not demand or b >= before:
                    return b
                if b != judged:
                    judged = b
                    passed = self._too_few(b, jobs, free, True)
                if not passed:
                    return b
                self._group_next(grp, b)
                continue
            if token_of.get(j) != token:
                heapq.heappop(heap)  # stopped, or a newer entry exists
                continue
            if floor is not None and self.bound.get(j, math.inf) <= floor:
                heapq.heappop(heap)
                self._park_by_bound(j, seq, token)
                continue
            true = self.at[j]
            if true <= now:
                nb = true + L  # one step suffices (roll's own first step)
                true = nb if now < nb else roll(true, L, now, strict=True)
                self.at[j] = true
            if true == b:
                if not demand or b >= before:
                    return b
                if b == judged and not passed:
                    return b
                cap, top_bound = self._near(j, jobs)
                if self._need(top_bound) > cap + free:
                    # no boundary of it can interest the policy for now (nor
                    # this one: the jobs that share it are all near ``j``,
                    # so it fails ``_too_few``'s first test)
                    judged = b
                    passed = True
                    heapq.heappop(heap)
                    self._park_by_demand(j, seq, token, cap, top_bound, b, active)
                    continue
                if b != judged:
                    judged = b
                    passed = self._too_few(b, jobs, free, True)
                if not passed:
                    return b
                true = _step(b, L)  # this boundary makes no instant
                self.at[j] = true
            heapq.heapreplace(heap, (true, seq, j, token))

    def _groups_to_search(
        self, now: float, before: float, free: int, demand: bool, use_caps: bool
    ) -> tuple[list[_PhaseGroup], list[tuple[int, _PhaseGroup]]]:
        """The demand groups ``next_after`` searches with the main heap
        (``active``, each with its ``cand`` after ``now``), and those asleep
        until the level test runs out (``dormant``, with their GPU sums).

        Every boundary judged (before ``before``) meets the level test while
        it holds (before ``levels_until``): a group whose GPU sum cannot pass
        it even at the best server and rack holds none that is not passed
        over until then. A group whose ``cand`` (its earliest boundary after
        some time no later than now) lies at or past ``before`` holds no
        boundary the search gets to, even if that job has left since."""
        active: list[_PhaseGroup] = []
        dormant: list[tuple[int, _PhaseGroup]] = []
        token_of = self._token
        caps_fit = None  # built when first needed
        empty = False
        need_thr = self._need_thr
        need_gpus = self._need_gpus
        horizon = before if now < before else math.inf
        asleep = self._asleep
        while asleep and asleep[0][0] < horizon:
            _, seq, g = heapq.heappop(asleep)
            if g.asleep == seq:  # (else: woken or dropped since)
                self._wake(g)
        slept: list[int] = []  # GPU sums with groups put to sleep
        for cap, bands in self._awake.items():
            pool = cap + free
            for _, g in bands:
                c = g.cand
                if c is not None and c[0] >= horizon:
                    # skipped until a horizon passes ``c`` or ``cand`` changes
                    self._sleep_seq += 1
                    g.asleep = self._sleep_seq
                    heapq.heappush(asleep, (c[0], self._sleep_seq, g))
                    if not slept or slept[-1] != cap:
                        slept.append(cap)
                    continue
                if not g.entries:
                    empty = True  # no live member: dropped below
                    continue
                if demand:
                    # the demand named for the largest bound near its members
                    # (``_need`` inlined); the band's top edge bounds it: if
                    # even that names more GPUs than the group holds, so do
                    # the lower bands
                    i = bisect_left(need_thr, g.ceiling)
                    if not i or need_gpus[i - 1] > pool:
                        break
                    i = bisect_left(need_thr, g.top)
                    if not i or need_gpus[i - 1] > pool:
                        continue
                if use_caps and caps_fit is None:
                    # (use_caps: the judge has a level test)
                    caps_fit = self._caps_fit()  # pyright: ignore[reportOptionalCall]
                if caps_fit is None or caps_fit(cap, g.top):
                    if c is None or c[0] <= now or token_of.get(c[2]) != c[3]:
                        self._group_next(g, now)
                    active.append(g)
                else:
                    dormant.append((cap, g))
        awake = self._awake
        for cap in slept:
            bands = [bg for bg in awake[cap] if bg[1].asleep is None]
            if bands:
                awake[cap] = bands
            else:
                del awake[cap]
        if empty:
            self._drop_empty_groups()
        return active, dormant

    def _wake(self, group: _PhaseGroup) -> None:
        """The group joins ``_awake`` (its entry on ``_asleep``, if any, goes
        stale): its ``cand`` changed or a horizon passed it."""
        if group.asleep is None or group.asleep == -1:
            return
        group.asleep = None
        bands = self._awake.setdefault(group.cap, [])
        i = 0
        while i < len(bands) and bands[i][0] > group.band:
            i += 1
        bands.insert(i, (group.band, group))

    def _wake_dormant(
        self,
        active: list[_PhaseGroup],
        dormant: list[tuple[int, _PhaseGroup]],
        caps_until: float,
    ) -> tuple[list[tuple[int, _PhaseGroup]], float]:
        """The search reached ``caps_until``, the end of the level test: the
        sleeping groups' boundaries before it are all passed over. The test
        is brought up to that time; the groups that may pass it now join
        ``active`` (their ``cand`` after it). Returns the groups still asleep
        and until when the test now holds."""
        ref = math.nextafter(caps_until, -math.inf)
        if self._relevel is not None:
            self.levels_until = self._relevel(caps_until)
        caps_fit = None
        # (a test that holds for less than a millisecond, e.g. a timer
        # firing within its rounding slack, is not worth another round)
        if caps_until + 1e-3 < self.levels_until:
            # (groups sleep only while the judge's level test holds)
            caps_fit = self._caps_fit()  # pyright: ignore[reportOptionalCall]
            caps_until = self.levels_until
        asleep: list[tuple[int, _PhaseGroup]] = []
        for cap, g in dormant:
            if caps_fit is None or caps_fit(cap, g.top):
                self._wake_group(g, ref)
                active.append(g)
            else:
                asleep.append((cap, g))
        return asleep, caps_until

    def _park_by_demand(
        self,
        j: int,
        seq: int,
        token: int,
        cap: int,
        top_bound: float,
        b: float,
        active: list[_PhaseGroup],
    ) -> None:
        """Job ``j``'s entry (taken off the main heap at its boundary ``b``)
        joins the demand group of its neighbourhood's GPU sum ``cap`` and of
        the band of its largest bound ``top_bound``; if that group is being
        searched (``active``), its next boundary after ``b`` is found."""
        band = _band(top_bound)
        group = self._dparked.get((cap, band))
        if group is None:
            group = self._new_group(cap, band)
        insort(group.entries, (self._phase_of[j], seq, j, token))
        self._dparked_of[j] = token
        self._dparked_group[j] = group
        if top_bound > group.top:
            group.top = top_bound
        group.cand = None
        self._wake(group)
        if any(g is group for g in active):
            self._group_next(group, b)
        if len(group.entries) > 2 * len(self._dparked_of) + self.stale_slack:
            self._drop_stale_parked()

    def _new_group(self, cap: int, band: int) -> _PhaseGroup:
        group = _PhaseGroup(ceiling=_band_ceiling(band), cap=cap, band=band, asleep=0)
        self._dparked[(cap, band)] = group
        self._wake(group)
        return group

    def _drop_empty_groups(self) -> None:
        """Forget the groups with no entry left (none is asleep: an empty
        group has no ``cand``)."""
        for key in [key for key, g in self._dparked.items() if not g.entries]:
            self._dparked.pop(key).asleep = -1
        for cap in list(self._awake):
            bands = [(band, g) for band, g in self._awake[cap] if g.entries]
            if bands:
                self._awake[cap] = bands
            else:
                del self._awake[cap]

    def _wake_group(self, group: _PhaseGroup, ref: float) -> None:
        """Make sure ``group.cand`` is its earliest boundary ``> ref`` (one
        found earlier, after an earlier time, still is if it lies past ``ref``)."""
        c = group.cand
        if c is None or c[0] <= ref or self._token.get(c[2]) != c[3]:
            self._group_next(group, ref)

    def _park_by_bound(self, j: int, seq: int, token: int) -> None:
        """Its expiries cannot interest the policy (bound at or below the
        floor): ``j``'s entry, taken off the main heap or a demand group,
        waits on the heap by bound until the floor falls below it."""
        heapq.heappush(self._parked, (-self.bound[j], seq, j, token))
        self._dparked_of.pop(j, None)
        self._dparked_group.pop(j, None)
        self._bparked.add(j)

    def passes_over(self, b: float, jobs: list[Job], free: int) -> bool:
        """Whether every running job with a boundary at ``b`` (a time no
        other event comes before), parked or not, would be passed over by
        ``next_after``'s demand and level tests (True if none has one; False
        without a demand test if some has: every boundary counts)."""
        if not self._need_thr:
            return not self.expiring_at(b)
        return self._too_few(b, jobs, free, True)

    def expiring_at(self, b: float) -> bool:
        """Whether some running job has a boundary exactly at ``b``."""
        return bool(self._sharing(b))

    def _sharing(self, b: float) -> list[int]:
        """The running jobs with a boundary exactly at ``b``, parked or not
        (found by phase). Their known boundaries are brought up to ``b`` (no
        boundary before ``b`` is lost: the others' next ones are on the heap,
        none earlier than ``b``)."""
        L = self.lease_s
        at = self.at
        phase = self._phase
        sharing: list[int] = []
        for k in self._around(self._bucket(b)):
            for j in phase.get(k, ()):
                bj = at[j]
                if bj < b:
                    bj = roll(bj, L, b, strict=False)
                    at[j] = bj
                if bj == b:
                    sharing.append(j)
        return sharing

    def _group_next(self, group: _PhaseGroup, ref: float) -> None:
        """Set ``group.cand`` to its earliest boundary ``> ref`` (None: no
        live entry), dropping the stale entries met on the way. Entries are
        visited in phase order from two buckets before ``ref``'s; a boundary
        lies within one bucket of its job's phase, so once an entry's phase
        puts its next boundary surely after the best found, the rest are too.
        The entries looked at are rolled to their first boundary ``> ref``
        (``ref`` is now or a boundary passed over, none of theirs unseen)."""
        entries = group.entries
        m = len(entries)
        group.cand = None
        if not m:
            return
        n = self._n_phases
        L = self.lease_s
        at = self.at
        token_of = self._token
        q0 = (int(math.fmod(ref, L) * _BUCKETS_PER_S) - 2) % n  # ``_bucket`` inlined
        start = bisect_left(entries, (q0,))
        best: tuple[float, int, int, int] | None = None
        best_q = 0
        stale: list[int] = []
        for k in range(m):
            i = start + k
            if i >= m:
                i -= m
            q, seq, j, token = entries[i]
            e = (q - q0) % n
            # its next boundary comes (e - 4) buckets after ``ref`` at the
            # earliest (a bucket of slack for rounding)
            if best is not None and e >= 5 and (e - 5) / _BUCKETS_PER_S > best[0] - ref:
                break
            if token_of.get(j) != token:
                stale.append(i)
                continue
            b = at[j]
            if b <= ref:
                nb = b + L  # one step suffices (roll's own first step)
                b = nb if ref < nb else roll(b, L, ref, strict=True)
                at[j] = b
            if best is None or b < best[0] or (b == best[0] and seq < best[1]):
                best = (b, seq, j, token)
                best_q = q
        if stale:
            for i in sorted(stale, reverse=True):
                del entries[i]
        if best is not None:
            group.cand = best
            group.cand_q = best_q

    def _group_drop_cand(self, group: _PhaseGroup) -> None:
        """Take the group's candidate out of it (it was parked by bound)."""
        assert group.cand is not None
        entries = group.entries
        i = bisect_left(entries, (group.cand_q, group.cand[1]))
        del entries[i]
        group.cand = None

    def _near(self, j: int, jobs: list[Job]) -> tuple[int, float]:
        """(GPUs, largest bound) of the running jobs within two phase buckets
        of ``j``, itself included: every job that shares a boundary with
        ``j`` is among them (a boundary lies within one bucket of its job's
        phase)."""
        q = self._phase_of[j]
        n = self._n_phases
        phase = self._phase
        bound = self.bound
        total = 0
        top = -math.inf
        for k in range(q - 2, q + 3):
            for m in phase.get(k % n, ()):
                total += jobs[m].gpus
                bm = bound.get(m, math.inf)
                if bm > top:
                    top = bm
        return total, top

    def _need(self, top: float) -> float:
        """The demand named for a largest bound ``top`` (inf: none)."""
        i = bisect_left(self._need_thr, top)  # thresholds below ``top``
        return self._need_gpus[i - 1] if i else math.inf

    def _drop_stale_parked(self) -> None:
        """Drop the entries of jobs that left a demand group (stopped,
        re-rated, moved back): they pile up in groups that stay asleep."""
        of = self._dparked_of
        for group in self._dparked.values():
            group.entries[:] = [e for e in group.entries if of.get(e[2]) == e[3]]
            cand = group.cand
            if cand is not None and of.get(cand[2]) != cand[3]:
                group.cand = None  # (a live one stays: the search may hold it)
                self._wake(group)

    def _too_few(self, b: float, jobs: list[Job], free: int, levels: bool = False) -> bool:
        """Whether the jobs with a boundary at ``b`` and the ``free`` GPUs
        hold no demand the policy named for their largest bound (or, with
        ``levels``, fail the ``fits`` test, brought up to ``b`` if it ran out
        before, or the policy's ``matters`` says no); see ``_sharing``."""
        bound = self.bound
        pool = free
        top = -math.inf
        group: list[Job] = []
        # ``_sharing`` and ``_need`` inlined: this runs for every boundary judged
        L = self.lease_s
        at = self.at
        phase = self._phase
        n = self._n_phases
        q = int(math.fmod(b, L) * _BUCKETS_PER_S)
        for k in (q - 1, q, q + 1) if n >= 3 else self._around(q):
            members = phase.get(k % n)
            if not members:
                continue
            for j in members:
                bj = at[j]
                if bj < b:
                    bj = roll(bj, L, b, strict=False)
                    at[j] = bj
                if bj == b:
                    job = jobs[j]
                    group.append(job)
                    pool += job.gpus
                    bj = bound.get(j, math.inf)
                    if bj > top:
                        top = bj
        i = bisect_left(self._need_thr, top)
        if not i or self._need_gpus[i - 1] > pool:
            return True
        if levels and self._fits is not None:
            if b >= self.levels_until and self._relevel is not None:
                self.levels_until = self._relevel(b)
            if b < self.levels_until and not self._fits(group, top, pool):
                return True
        return self._matters is not None and not self._matters(b, group)

    def expire_at(self, t: float, jobs: list[Job]) -> list[Job]:
        """Running jobs with a boundary exactly at ``t`` (in start order);
        their next boundary becomes the one after ``t``."""
        L = self.lease_s
        q = self._bucket(t)
        hits: list[Job] = []
        at = self.at
        phase = self._phase
        # A boundary ``b`` in ``t``'s binade ``[low, 2 low)``, where ``L`` is
        # a multiple of the spacing, is followed by exactly ``b + k L`` up to
        # ``t``: ``t`` is one of them iff ``t - b`` (exact) is a multiple of
        # ``L``, which ``fmod`` (exact) tells without rolling ``b`` forward.
        low = math.ldexp(0.5, math.frexp(t)[1]) if t > 0.0 else math.inf
        exact = low < math.inf and (L / math.ulp(low)).is_integer()
        for k in self._around(q):
            for j in phase.get(k, ()):
                b = at[j]
                if b < t:
                    if exact and b >= low and math.fmod(t - b, L) == 0.0:
                        b = t
                    else:
                        nb = b + L  # one step suffices (roll's own first step)
                        b = nb if t <= nb and nb > b else roll(b, L, t, strict=False)
                if b == t:
                    hits.append(jobs[j])
                    nb = b + L  # ``_step`` inlined
                    b = nb if nb > b else math.nextafter(b, math.inf)
                at[j] = b
        hits.sort(key=_START_ORDER)
        return hits


class LeaseState(Protocol):
    """What ``LeaseSkipper`` reads of the engine (its only write: the clock,
    moved to a boundary while a hint is asked there, then moved back)."""

    now: float
    jobs: list[Job]
    free: list[int]
    rack_free: list[int]
    total_free: int
    free_index: FreeIndex
    cluster: Cluster


def efficiency_bound(job: Job) -> float:
    """A bound on a running job's efficiency until its next re-rate (its
    accounting settled to now): from here compute and exposed communication
    grow in the fixed ratio ``t_compute : exposed``, so the time-average
    moves monotonically from its value now towards ``t_compute / (t_compute
    + exposed)`` and never passes the larger of the two (plus 1e-9 for
    rounding)."""
    busy = job.compute_time + job.comm_time
    now = job.compute_time / busy if busy > 0 else 0.0
    per_iter = job.t_compute + job.exposed
    limit = job.t_compute / per_iter if per_iter > 0 else 0.0
    return max(now, limit) + 1e-9


class LeaseSkipper:
    """The engine's lazy leases: ``LazyLeases`` judged by the policy's latest
    ``LeaseHints`` (``hint``) over the engine's state, given once.

    The engine's loop calls ``start``, ``stop`` and ``rated`` as jobs start,
    stop and are re-rated, ``next_after`` for the next boundary that can
    matter while a job waits, ``expire_at`` at an instant and ``passes_over``
    before it skips wake-ups. Calls run one way: engine -> skipper ->
    ``LazyLeases`` -> skipper's judge methods -> the hints' functions; none
    comes back into the engine, which knows nothing of the policy.
    """

    def __init__(self, lease_s: float, state: LeaseState) -> None:
        self.state = state
        self.hints = NO_HINTS
        self._levels = (math.inf, math.inf, math.inf)  # the level test's minima now
        self._levels_for: Callable[[float], tuple[float, float, float]] | None = None
        self._levels_at: Callable[[], tuple[float, float, float, float]] | None = None
        self._lease_matters: Callable[[list[Job]], bool] | None = None
        self.leases = LazyLeases(lease_s, self)
        # (bound once: the engine calls these at every start and stop)
        self.start = self.leases.start
        self.stop = self.leases.stop

    # -- the engine's calls ---------------------------------------------------
    def hint(self, hints: LeaseHints) -> None:
        """The policy's hints, until the next ones (see ``LeaseHints``)."""
        self.hints = hints
        self._lease_matters = hints.lease_matters
        levels = hints.levels
        if levels is None:
            self._levels_for = self._levels_at = None
            self.leases.set_floor(hints.floor, hints.needs)
        else:
            self._levels = levels[:3]
            self._levels_for = hints.levels_for
            self._levels_at = hints.levels_at
            self.leases.set_floor(hints.floor, hints.needs, levels[3])

    def rated(self, job: Job) -> None:
        """The running job was (re-)rated: its efficiency bound anew."""
        self.leases.set_bound(job.index, efficiency_bound(job))

    def next_after(self, now: float, before: float = -math.inf) -> float | None:
        """The next boundary after ``now`` that can matter (``LazyLeases.next_after``
        with the engine's jobs and free count; ``before``: the next other event,
        given once the decision point is over)."""
        state = self.state
        return self.leases.next_after(now, state.jobs, before, state.total_free)

    def expire_at(self, t: float) -> list[Job]:
        """The running jobs whose lease ends at ``t``, in start order."""
        return self.leases.expire_at(t, self.state.jobs)

    def passes_over(self, t: float) -> bool:
        """Whether every boundary at ``t`` (no other event before it) would be
        passed over by the hints' tests (True if there is none)."""
        return self.leases.passes_over(t, self.state.jobs, self.state.total_free)

    # -- LeaseJudge: the hints over the engine's state -------------------------
    def fits(self, jobs: list[Job], top: float, pool: int) -> bool:
        """Whether a waiting demand of the hints' ``levels`` fits the free
        GPUs plus those of ``jobs`` (running; ``pool`` in all), by the
        packer's own tests: a server (machine level), a rack (rack level; it
        also holds every one-server placement) or the cluster (network
        level). With ``levels_for``, only the demands that could challenge
        jobs of largest efficiency bound ``top`` count."""
        levels_for = self._levels_for
        if levels_for is not None:
            machine, rack, network = levels_for(top)
        else:
            machine, rack, network = self._levels
        if network <= pool:
            return True
        state = self.state
        free = state.free
        rack_free = state.rack_free
        add_server, add_rack = gpus_held(
            (job.placement for job in jobs), state.cluster.servers_per_rack
        )
        if rack <= pool:
            best = self._top_rack()
            for r, g in add_rack.items():
                if rack_free[r] + g > best:
                    best = rack_free[r] + g
            if rack <= best:
                return True
        if machine <= pool:
            best = state.free_index.largest()
            for server, g in add_server.items():
                if free[server] + g > best:
                    best = free[server] + g
            if machine <= best:
                return True
        return False

    def _top_rack(self) -> int:
        """The most free GPUs of any rack: from the packer index's racks by
        free count (looked at from the top), not a scan of every rack (the
        level test asks at every boundary it judges; 1,562 racks at a
        million jobs). A scan where the index is not over these counts."""
        state = self.state
        index = state.free_index
        rack_free = state.rack_free
        if index.rack_free is not rack_free:
            return max(rack_free)
        index._sync_racks()  # pyright: ignore[reportPrivateUsage]
        buckets = index.rack_by_free
        for f in range(len(buckets) - 1, 0, -1):
            if buckets[f]:
                return f
        return 0

    def caps_fit(self) -> Callable[[int, float], bool]:
        """A relaxation of ``fits`` for jobs of ``cap`` GPUs in all and
        largest bound ``top``, wherever they are: at most ``cap`` GPUs join
        the largest free rack, and at most ``min(cap, GPUs per server)`` the
        largest free server."""
        state = self.state
        total = state.total_free
        top_rack = self._top_rack()
        top_server = state.free_index.largest()
        G = state.cluster.gpus_per_server
        levels_for = self._levels_for
        static = self._levels

        def fits(cap: int, top: float) -> bool:
            machine, rack, network = static if levels_for is None else levels_for(top)
            pool = total + cap
            return (
                network <= pool
                or (rack <= pool and rack <= top_rack + cap)
                or (machine <= pool and machine <= top_server + min(cap, G))
            )

        return fits

    def matters(self, b: float, jobs: list[Job]) -> bool:
        """The hints' ``lease_matters`` for the jobs expiring at ``b`` (True
        without one), asked with the clock at ``b``."""
        test = self._lease_matters
        if test is None:
            return True
        return asked_at(self.state, b, test, sorted(jobs, key=_START_ORDER))

    def relevel(self, t: float) -> float:
        """The level test brought up to ``t`` (``levels_at``, asked with the
        clock at ``t``); returns until when it holds (-inf: no way to)."""
        levels_at = self._levels_at
        if levels_at is None:
            return -math.inf
        levels = asked_at(self.state, t, levels_at)
        self._levels = levels[:3]
        return levels[3]
