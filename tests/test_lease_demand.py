"""Dally's lease demand and level tests change no result.

With lazy leases Dally tells the engine, besides its efficiency floor, the
smallest waiting demand each expiring job could lose to (``needs``) and the
smallest waiting demand per level (``levels``); the engine then makes no
decision point at a lease boundary whose GPUs plus the free ones hold none
of them. These tests run Dally on a congested slice of the real Philly week
three ways (eager leases; lazy leases with the efficiency floor only; lazy
leases with every test) and ask for identical per-job tables, placement
histories and summaries, no job dropped and no GPU double-booked, and fewer
decision points with the tests than without.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest
from ddl_gym.baselines import make_policy
from ddl_gym.baselines.dally import DallyPolicy

from ddl_gym.engine import WAIT, Engine, EngineView, LeaseHints, Wait
from ddl_gym.topology import Cluster
from ddl_gym.traces import load_trace
from tests.conftest import PHILLY_WEEK
from tests.helpers import InvariantChecker


class FloorOnlyView(EngineView):
    """The view with the lease hints cut back to the efficiency floor (and
    the wake-up test): the run the demand and level tests must not change."""

    __slots__ = ()

    def hint(self, hints: LeaseHints) -> None:
        super().hint(LeaseHints(floor=hints.floor, wake_matters=hints.wake_matters))


@pytest.fixture(scope="module")
def philly_slice(data_dir) -> pd.DataFrame:
    """The Philly week's first 700 jobs of at most 16 GPUs, arrivals 5x as
    dense, on 96 GPUs: queues form, so leases expire while jobs wait and
    Dally preempts."""
    jobs = load_trace(data_dir / PHILLY_WEEK).jobs
    jobs = jobs[jobs["gpus"] <= 16].head(700).copy()
    jobs["arrival_s"] = jobs["arrival_s"] / 5.0
    return jobs.reset_index(drop=True)


def _run(trace, policy: DallyPolicy, view_type: type, lazy: bool, checker=None):
    cluster = Cluster(3, 4, 8, "nvswitch_ib")
    kwargs = {**policy.engine_kwargs(), "lazy_leases": lazy, "congestion": "moderate"}
    engine = Engine(trace, cluster, **kwargs)
    _drive(engine, policy, view_type(engine), checker)
    return engine.result(), engine.instant


def _drive(engine: Engine, policy, view: EngineView, checker=None) -> None:
    """Run ``policy`` through ``view`` (its own, not ``run_policy``'s) to the
    end, checking the invariants after every step if ``checker`` is given."""
    policy.reset(view, seed=0)
    while not engine.done:
        while True:
            action = policy.act(view)
            if action is WAIT or isinstance(action, Wait):
                break
            engine.apply(action)
            if checker is not None:
                checker.check(engine)
        engine.advance()
        if checker is not None:
            checker.check(engine)
    if checker is not None:
        checker.finish(engine)


@pytest.mark.parametrize("name", ["dally", "dally-1-2"])
def test_demand_and_level_tests_change_no_result(philly_slice, name):
    eager, eager_instants = _run(philly_slice, make_policy(name), EngineView, lazy=False)
    floor, floor_instants = _run(philly_slice, make_policy(name), FloorOnlyView, lazy=True)
    full_policy = make_policy(name)
    full, full_instants = _run(
        philly_slice, full_policy, EngineView, lazy=True, checker=InvariantChecker()
    )
    for other in (floor, full):
        assert other.jobs.equals(eager.jobs)
        assert other.placements.equals(eager.placements)
        assert other.summary == eager.summary
    assert eager.summary["completed"] == len(philly_slice)
    assert sum(eager.jobs["preemptions"]) > 0  # Dally's re-offer did take GPUs
    # the tests did skip decision points the floor alone makes
    assert full_instants < floor_instants < eager_instants


def test_compacting_the_event_heap_changes_no_result(philly_slice):
    """Dropping stale heap entries (what ``Engine._compact`` does once they
    outnumber the live ones) keeps the event order: compacting after every
    push gives the same run as never compacting."""

    class Eager(Engine):
        def _push(self, t, kind, job, version=0):
            super()._push(t, kind, job, version)
            self._compact()

    class Never(Engine):
        def _compact(self) -> None:
            pass

    results = []
    for engine_type in (Eager, Never):
        policy = make_policy("tiresias")
        engine = engine_type(
            philly_slice,
            Cluster(3, 4, 8, "nvswitch_ib"),
            congestion="heavy",
            **policy.engine_kwargs(),
        )
        _drive(engine, policy, EngineView(engine))
        results.append((engine.result(), engine.instant, len(engine._heap)))
    (a, ia, _), (b, ib, _) = results
    assert a.jobs.equals(b.jobs) and a.placements.equals(b.placements)
    assert a.summary == b.summary and ia == ib


@pytest.mark.parametrize("name", ["dally", "dally-1-2"])
def test_skipped_wake_ups_change_no_result(philly_slice, name):
    """Dally asks its delay-timer wake-ups with a test (``wake_matters``):
    a wake-up where the waiting jobs still fit nowhere at their levels makes
    no instant. Against a run whose test always says yes (every wake-up an
    instant, as before), the results are identical and there are fewer
    instants."""
    always = make_policy(name)
    always.wake_matters = lambda view: True  # bound into the test at reset
    before, before_instants = _run(philly_slice, always, EngineView, lazy=True)
    after, after_instants = _run(
        philly_slice, make_policy(name), EngineView, lazy=True, checker=InvariantChecker()
    )
    assert after.jobs.equals(before.jobs)
    assert after.placements.equals(before.placements)
    assert after.summary == before.summary
    assert after.summary["completed"] == len(philly_slice)
    assert after_instants < before_instants


@pytest.mark.parametrize("name", ["dally", "dally-1-2"])
def test_the_lease_test_and_levels_brought_up_to_date_change_no_result(philly_slice, name):
    """Dally's lease test (``lease_matters``, its re-offer dry-run at the
    boundary) passes over lease instants where nobody would lose GPUs, and
    ``levels_at`` renews the level test past its end without a decision
    point. Against the run with neither (every boundary the count and level
    tests keep is an instant, as before), identical results, fewer instants."""

    class WithoutBoth(EngineView):
        __slots__ = ()

        def hint(self, hints: LeaseHints) -> None:
            super().hint(replace(hints, lease_matters=None, levels_at=None))

    before, before_instants = _run(philly_slice, make_policy(name), WithoutBoth, lazy=True)
    after, after_instants = _run(
        philly_slice, make_policy(name), EngineView, lazy=True, checker=InvariantChecker()
    )
    assert after.jobs.equals(before.jobs)
    assert after.placements.equals(before.placements)
    assert after.summary == before.summary
    assert after.summary["preemptions"] > 0
    assert after_instants < before_instants


def test_demand_groups_change_no_result_on_a_busy_synthetic_cluster():
    """Jobs parked by demand wait in phase-ordered groups (``_PhaseGroup``):
    2,000 Philly-shaped synthetic jobs at an offered load of 0.8 on 512
    GPUs park many, take some out again by efficiency bound, and (with the
    stale-entry slack at 0) clean their groups often. Against the run with
    the efficiency floor only (no demand test, so no groups), the results
    are identical."""
    from ddl_gym import bench
    from ddl_gym.traces import synthetic_trace

    cluster = Cluster(8, 8, 8, "nvswitch_ib")
    rate = bench.scale_arrival_rate(0.8, 2000, cluster.num_gpus)
    trace = synthetic_trace(n_jobs=2000, seed=0, arrival_rate_per_h=rate, max_gpus=512)
    results = []
    for view_type, slack in ((FloorOnlyView, None), (EngineView, None), (EngineView, 0)):
        policy = make_policy("dally")
        engine = Engine(trace, cluster, **{**policy.engine_kwargs(), "congestion": "moderate"})
        if slack is not None:
            engine._skipper.leases.stale_slack = slack
        _drive(engine, policy, view_type(engine))
        results.append((engine.result(), engine.instant))
    (floor, floor_instants), *grouped = results
    for result, instants in grouped:
        assert result.jobs.equals(floor.jobs)
        assert result.placements.equals(floor.placements)
        assert result.summary == floor.summary
        assert instants < floor_instants
    assert floor.summary["completed"] == 2000
    assert floor.summary["preemptions"] > 0


class _CheckedReoffer(DallyPolicy):
    """Dally whose one-challenger re-offer (``_reoffer_one``) is checked,
    at every call that answers, against the full re-offer on the same
    state."""

    general_only = False
    answered = 0
    with_losers = 0

    def _reoffer_one(self, view, challenger, challenger_eff, expired, effs):
        if self.general_only:
            return None
        fast = super()._reoffer_one(view, challenger, challenger_eff, expired, effs)
        if fast is not None:
            self.general_only = True
            try:
                assert fast == self._reoffer(view, expired)
            finally:
                self.general_only = False
            self.answered += 1
            self.with_losers += bool(fast)
        return fast


def _checked(name: str) -> _CheckedReoffer:
    from dataclasses import fields

    policy = make_policy(name)
    return _CheckedReoffer(**{f.name: getattr(policy, f.name) for f in fields(policy) if f.init})


@pytest.mark.parametrize("name", ["dally", "dally-1-2"])
def test_one_challenger_reoffer_is_the_full_reoffer(philly_slice, name):
    """On the congested Philly slice (12 servers) the shortcut answers most
    re-offers, some with losers, and each answer is the full re-offer's."""
    policy = _checked(name)
    result, _ = _run(philly_slice, policy, EngineView, lazy=True)
    assert result.summary["completed"] == len(philly_slice)
    assert policy.answered > 100 and policy.with_losers > 10


def test_one_challenger_reoffer_on_a_cluster_of_many_servers():
    """Past ``_QUICK_FIT_SERVERS`` the full re-offer tests fits before it
    builds its pool: 2,000 synthetic jobs at load 0.9 on 136 servers."""
    from ddl_gym.baselines.dally import _QUICK_FIT_SERVERS

    from ddl_gym import bench
    from ddl_gym.traces import synthetic_trace

    cluster = Cluster(17, 8, 8, "nvswitch_ib")
    assert cluster.num_servers > _QUICK_FIT_SERVERS
    rate = bench.scale_arrival_rate(0.9, 2000, cluster.num_gpus)
    trace = synthetic_trace(n_jobs=2000, seed=1, arrival_rate_per_h=rate, max_gpus=32)
    policy = _checked("dally")
    engine = Engine(trace, cluster, **{**policy.engine_kwargs(), "congestion": "moderate"})
    _drive(engine, policy, EngineView(engine))
    assert engine.result().summary["completed"] == 2000
    assert policy.answered > 100 and policy.with_losers > 10
