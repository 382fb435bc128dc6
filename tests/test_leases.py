"""Lazy leases: boundaries identical to the eager engine's, bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ddl_gym.baselines import make_policy

from ddl_gym.engine import Engine, EngineView, LeaseHints, Place, Wait, run_policy, simulate
from ddl_gym.engine.leases import _band, _band_ceiling, roll
from ddl_gym.perf import Level
from ddl_gym.topology import Cluster
from ddl_gym.traces import synthetic_trace
from tests.helpers import make_trace
from tests.test_engine import toy_fabric


def naive_roll(b: float, L: float, t: float, strict: bool) -> float:
    while b < t or (strict and b == t):
        b = b + L
    return b


@pytest.mark.parametrize("L", [20.0, 600.0, 0.1, 7.3, 1e-3 + 20.0])
def test_roll_equals_one_addition_at_a_time(L):
    rng = np.random.default_rng(int(L * 1000))
    starts = list(rng.uniform(0, 3e6, 60)) + list(rng.integers(0, 10**6, 20).astype(float))
    # just below powers of two, where sums cross into a coarser binade and round
    starts += [math.nextafter(2.0**k, 0.0) - L * rng.uniform(0, 3) for k in range(6, 22)]
    for b in starts:
        b = max(b, 1e-3)
        # L = 0.1 or 7.3 is no multiple of the float spacing: every step rounds
        # and both loops go one step at a time, so keep their spans short
        long = 20_000 * L if L in (20.0, 600.0) else 200 * L
        for span in (0.0, L, 3.5 * L, long):
            t = b + span * rng.uniform(0.5, 1.0)
            for strict in (False, True):
                assert roll(b, L, t, strict) == naive_roll(b, L, t, strict), (b, L, t)
        # exactly on a boundary some steps on (roll's jump lands on it)
        for k in (2, 3, 777):
            on = naive_roll(b, L, b + (k - 0.5) * L, strict=False)
            for strict in (False, True):
                assert roll(b, L, on, strict) == naive_roll(b, L, on, strict), (b, L, on)
    # exactly on a boundary: >= stops there, > steps past it
    b = 123.456
    on = naive_roll(b, L, b + 50 * L, strict=False)
    assert roll(b, L, on, strict=False) == on
    assert roll(b, L, on, strict=True) == on + L


def test_band_edges_hold_every_bound_of_the_band():
    # a demand group's ``top`` stays below its band's ceiling: the search
    # stops at the first band whose ceiling names too many GPUs
    rng = np.random.default_rng(0)
    edges = np.arange(0, 66) / 64
    tops = np.concatenate([rng.random(2000), edges, edges + 1e-9, np.nextafter(edges, -1)])
    for top in map(float, tops[tops >= 0]):
        band = _band(top)
        assert top < _band_ceiling(band)
        assert band == 0 or _band_ceiling(band - 1) <= top
    assert _band_ceiling(_band(math.inf)) == math.inf


def test_lazy_leases_report_expiries_only_while_a_job_waits():
    # x runs 0..100 on the only GPU; y arrives at 40 (a boundary of x) and
    # waits: lazy leases report 40 (an arrival instant), 60 and 80 only
    trace = make_trace([("x", 0.0, 1, "resnet18", 100.0, 1.0), ("y", 40.0, 1, "resnet18", 1, 1.0)])
    cluster = Cluster(1, 1, 1, toy_fabric())
    seen = {}
    for lazy in (False, True):
        engine = Engine(trace, cluster, lease_s=20.0, lazy_leases=lazy)
        engine.place(0)
        times = []
        while engine.advance():
            times.append((engine.now, [j.index for j in engine.lease_expired]))
            if engine.now == 100.0:
                engine.place(1)
        seen[lazy] = times
    assert seen[False][:5] == [(20.0, [0]), (40.0, [0]), (60.0, [0]), (80.0, [0]), (100.0, [])]
    assert seen[True][:4] == [(40.0, [0]), (60.0, [0]), (80.0, [0]), (100.0, [])]
    # and y's own leases are never reported: nobody waits once it runs
    assert all(not expired for t, expired in seen[True] if t > 100.0)


class Recorder:
    """Wraps a policy; records what it saw at every instant where a job waited."""

    def __init__(self, policy):
        self.policy = policy
        self.seen: list = []

    def reset(self, view, seed=None):
        self.policy.reset(view, seed=seed)

    def act(self, view):
        if view.pending:
            state = (view.now, sorted(j.index for j in view.lease_expired), sorted(view.events))
            if not self.seen or self.seen[-1] != state:
                self.seen.append(state)
        return self.policy.act(view)


@pytest.mark.parametrize("name", ["dally", "dally-1-2"])
def test_lazy_leases_show_dally_the_same_instants(name):
    # every instant with a waiting job, and its lease expiries, as the eager engine
    trace = synthetic_trace(n_jobs=120, seed=5)
    runs = {}
    for lazy in (False, True):
        rec = Recorder(make_policy(name))
        kwargs = {**rec.policy.engine_kwargs(), "lazy_leases": lazy, "congestion": "heavy"}
        result = simulate(trace, "seed64", rec, **kwargs)
        runs[lazy] = (rec.seen, result)
    assert runs[True][0] == runs[False][0]
    assert runs[True][1].jobs.equals(runs[False][1].jobs)
    assert runs[True][1].summary == runs[False][1].summary
    assert len(runs[True][1].series) < len(runs[False][1].series)


def test_dally_lease_floor_skips_only_instants_that_change_nothing():
    """With lazy leases Dally sets an efficiency floor (``LeaseHints``):
    instants where only leases of jobs that cannot lose their GPUs expire are
    not made at all. On a trace where waiting jobs have run before (so their
    efficiency is high) that removes most decision points; results stay
    identical to the eager engine's and every instant Dally still sees is one
    the eager engine showed it, with the same expiries and events."""
    trace = synthetic_trace(n_jobs=150, seed=1, arrival_rate_per_h=120.0, max_gpus=64)
    runs = {}
    for lazy in (False, True):
        rec = Recorder(make_policy("dally"))
        kwargs = {**rec.policy.engine_kwargs(), "lazy_leases": lazy, "congestion": "heavy"}
        result = simulate(trace, "seed64", rec, **kwargs)
        runs[lazy] = (rec.seen, result)
    eager_seen, eager = runs[False]
    lazy_seen, lazy = runs[True]
    assert lazy.jobs.equals(eager.jobs)
    assert lazy.placements.equals(eager.placements)
    assert lazy.summary == eager.summary
    assert all(state in eager_seen for state in lazy_seen)
    assert len(lazy_seen) < len(eager_seen) / 5  # the floor did skip instants


def test_efficiency_bound_holds_until_the_next_rerate():
    """The engine's per-job bound (what the floor compares with) is never
    below the live efficiency Dally reads, at any instant of a run."""
    trace = synthetic_trace(n_jobs=80, seed=3, arrival_rate_per_h=120.0, max_gpus=64)
    engine = Engine(trace, "seed64", lease_s=20.0, lazy_leases=True, congestion="heavy")
    policy = make_policy("dally")
    view = EngineView(engine)
    policy.reset(view, seed=0)
    checked = 0
    while not engine.done:
        for job in engine.running.values():
            assert engine.efficiency(job) <= engine._skipper.leases.bound[job.index]
            checked += 1
        while (action := policy.act(view)) is not None and not isinstance(action, Wait):
            engine.apply(action)
        engine.advance()
    assert checked > 100


def test_lazy_leases_restart_at_the_same_instant():
    # a job preempted and placed again at one instant starts a fresh lease
    trace = make_trace([("x", 0.0, 1, "resnet18", 100.0, 1.0), ("y", 5.0, 1, "resnet18", 50, 1.0)])
    engine = Engine(trace, Cluster(1, 1, 2, toy_fabric()), lease_s=20.0, lazy_leases=True)
    engine.place(0)
    engine.advance()  # t = 5: y arrives
    engine.preempt(0)
    engine.place(0)  # x again, lease from 5; y still waits
    engine.apply(Place(1))
    assert not engine.pending
    expiries = []
    while engine.advance():
        expiries += engine.lease_expired
    assert expiries == []  # nobody waited afterwards
    assert engine.result().summary["completed"] == 2.0


def test_run_policy_lazy_invariants():
    from tests.helpers import InvariantChecker

    checker = InvariantChecker()
    policy = make_policy("dally")
    engine = Engine(synthetic_trace(n_jobs=80, seed=2), "seed64", **policy.engine_kwargs())

    class Checked:
        def reset(self, view, seed=None):
            policy.reset(view, seed)

        def act(self, view):
            checker.check(engine)
            return policy.act(view)

    p = Checked()
    p.reset(EngineView(engine))
    run_policy(engine, p)
    checker.finish(engine)


def test_tiny_lease_late_in_a_run_still_moves_forward():
    """A lease below the float resolution of the clock (1e-9 s at t = 1e12 s)
    must give a boundary strictly later than now, as the eager timers do;
    otherwise rolling it forward would loop for ever."""
    t = 1e12
    assert roll(t, 1e-9, t, strict=True) == math.nextafter(t, math.inf)
    assert roll(t - 1.0, 0.25, t, strict=True) == t + 0.25  # exact sums unchanged


@pytest.mark.parametrize("L", [20.0, 7.3, 0.1])
def test_expire_at_finds_exactly_the_jobs_with_a_boundary_then(L):
    """``expire_at`` tells a boundary without rolling it forward when it lies
    in the clock's binade: against boundaries stepped one addition at a
    time, for starts whose boundaries cross into a coarser binade (where
    sums round), starts a few leases apart (shared boundaries) and starts a
    float spacing apart (the same phase bucket, other boundaries)."""
    from ddl_gym.engine.job import Job
    from ddl_gym.engine.leases import LazyLeases

    top = 2.0**19  # boundaries from below it cross into [2^19, 2^20)
    base = [top - 7 * L - 0.123, top - 40 * L, top + 3.0, math.nextafter(top, 0.0)]
    starts = []
    for s in base:
        starts += [s, s + L + L + L, s + math.ulp(s), s + 3 * math.ulp(s)]
    jobs = [Job(i, f"j{i}", 0.0, 1, "resnet18", 1.0, 1.0) for i in range(len(starts))]
    leases = LazyLeases(L)
    steps = {}
    for job, s in zip(jobs, starts, strict=True):
        job.started_at = s
        leases.start(job, s)
        b, seq = s, []
        for _ in range(200):  # (past every time visited below)
            b = b + L
            seq.append(b)
        steps[job.index] = seq
    hits = 0
    for t in sorted({b for seq in steps.values() for b in seq[:60]}):
        got = [job.index for job in leases.expire_at(t, jobs)]
        want = [j for j, seq in steps.items() if t in seq]
        assert got == sorted(want, key=lambda j: (starts[j], j)), t
        hits += len(got)
    assert hits >= 60 * len(base)


@pytest.mark.parametrize("answer", [False, True])
def test_a_boundary_the_hints_say_no_to_makes_no_instant(answer):
    """The seam without a policy: the engine asks the hints' ``lease_matters``
    at each boundary the count test keeps (a job waits), with the clock at
    the boundary and the expiring jobs; False passes over it, True makes it
    an instant that reports the expiry. The clock is back where it was."""
    cluster = Cluster(2, 1, 2, toy_fabric())
    trace = make_trace(
        [("x", 0.0, 4, "resnet18", 1000.0, 0.5), ("y", 5.0, 2, "resnet18", 10.0, 0.5)]
    )
    engine = Engine(trace, cluster, lease_s=20.0, lazy_leases=True)
    engine.place(0, Level.NETWORK)
    seen: list[tuple[float, list[int]]] = []

    def lease_matters(expiring) -> bool:
        seen.append((engine.now, [job.index for job in expiring]))
        return answer

    engine.hint(LeaseHints(needs=((0.0, 1),), lease_matters=lease_matters))
    engine.advance()  # y arrives and waits: the leases are armed
    assert engine.now == 5.0 and engine.pending
    engine.advance()
    if answer:
        assert engine.now == 20.0 and engine.events_now == [("lease", 0)]
        assert engine.lease_expired == [engine.jobs[0]]
        assert seen == [(20.0, [0])]
    else:
        assert engine.events_now == [("completion", 0)]
        assert len(seen) >= 2
        assert seen == [(20.0 * k, [0]) for k in range(1, len(seen) + 1)]
        assert engine.now > seen[-1][0]
