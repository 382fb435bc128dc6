"""Invariants of the policies' scaling structures (issue 52).

Tiresias' pass tries only the first waiting job of each (level, demand)
class and skips the rack-level victim search when ``RackReach`` says no rack
can be emptied enough; both must take the decisions of the plain pass (the
shared ``PriorityPreemptive.schedule`` over the whole queue), bit for bit.
"""

from __future__ import annotations

import pandas as pd
import pytest
from ddl_gym.baselines import make_policy
from ddl_gym.baselines.common import PriorityPreemptive, victims_for
from ddl_gym.baselines.tiresias import RunningOrder, TiresiasPolicy

from ddl_gym.bench import fixed_regime_cluster, fixed_regime_trace
from ddl_gym.engine import simulate
from ddl_gym.perf import Level


class _PlainTiresias(TiresiasPolicy):
    """Tiresias with the shared pass over the whole queue in priority order."""

    def schedule(self, view):
        return PriorityPreemptive.schedule(self, view)

    def _pending_order(self, view):
        return sorted(m for members in self._pend_cls.values() for m in members)


def _run(policy, n_jobs: int):
    trace = fixed_regime_trace(n_jobs, seed=3)
    cluster = fixed_regime_cluster(n_jobs)
    return simulate(trace, cluster, policy, **{**policy.engine_kwargs(), "congestion": "moderate"})


@pytest.mark.parametrize("n_jobs", [1500, 3000])
def test_tiresias_pass_equals_the_plain_pass(n_jobs):
    fast = _run(make_policy("tiresias"), n_jobs)
    plain = _run(_PlainTiresias(), n_jobs)
    pd.testing.assert_frame_equal(fast.jobs, plain.jobs)
    pd.testing.assert_frame_equal(fast.series, plain.series)


def test_rack_reach_answers_as_the_victim_search(monkeypatch):
    """At every rack-level question, ``may_fit`` is True exactly when
    ``victims_for`` finds victims (its tables checked against the search)."""
    asked = {"yes": 0, "no": 0}
    policy = make_policy("tiresias")
    original = RunningOrder.may_fit

    def checked(self, pkey, gpus):
        got = original(self, pkey, gpus)
        view = checked.view
        job = view.job(pkey[1])
        found = victims_for(view, job, Level.RACK, self.worse_than(view, pkey))
        assert got == bool(found), (pkey, gpus)
        asked["yes" if got else "no"] += 1
        return got

    original_schedule = TiresiasPolicy.schedule

    def schedule(self, view):
        checked.view = view
        return original_schedule(self, view)

    monkeypatch.setattr(RunningOrder, "may_fit", checked)
    monkeypatch.setattr(TiresiasPolicy, "schedule", schedule)
    _run(policy, 3000)
    assert asked["yes"] > 0 and asked["no"] > 0  # both answers were checked


def test_first_rack_victim_is_the_victim_searchs_first(monkeypatch):
    import ddl_gym.baselines.tiresias as tiresias

    calls = {"found": 0, "none": 0}
    original = tiresias.first_rack_victim

    def checked(view, job, candidates):
        got = original(view, job, candidates)
        found = victims_for(view, job, Level.RACK, candidates)
        assert got is (found[0] if found else None)
        calls["found" if got is not None else "none"] += 1
        return got

    monkeypatch.setattr(tiresias, "first_rack_victim", checked)
    _run(make_policy("tiresias"), 3000)
    assert calls["found"] > 0


def test_dally_dry_pool_finds_as_the_packer(monkeypatch):
    """Dally's re-offer searches its dry pool beyond one server on a copy of
    the packer index (brought up to the pool's changes): every answer equals
    ``find_placement`` on the pool's own counts, one search after another."""
    from ddl_gym.baselines import dally

    from ddl_gym.engine.packer import find_placement

    searched: list[bool] = []  # per search: whether it was beyond one server
    find = dally._DryPool.find

    def checked(self, gpus, level):
        got = find(self, gpus, level)
        free = list(self.free)
        for server, f in self.server.items():
            free[server] = f
        S = self.S
        rack_free = [sum(free[r * S : (r + 1) * S]) for r in range(len(free) // S)]
        assert got == find_placement(free, rack_free, S, self.G, gpus, level)
        searched.append(self._index is not None)
        return got

    monkeypatch.setattr(dally._DryPool, "find", checked)
    _run(make_policy("dally"), 3000)
    assert any(searched)
