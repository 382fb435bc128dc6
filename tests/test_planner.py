"""The lookahead planner (baselines/planner.py): its size estimate, its
non-clairvoyance, and that it runs as a policy and as a benchmark policy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from ddl_gym.baselines import POLICY_NAMES, make_policy
from ddl_gym.baselines.planner import QUICK, PlannerPolicy, SizeDistribution

from ddl_gym.engine import WAIT, Engine, EngineView, Wait, simulate
from ddl_gym.traces import Trace

CLUSTER = "2x2x4"  # 16 GPUs in 2 racks: the candidates often disagree
# a quick planner (30-min rollouts) that plans at every instant its candidates disagree (the
# most planning: the strictest test of what its plans read)
PLAN = {**QUICK, "hold_s": 0.0, "horizon_s": 1800.0}


def small_trace(seed: int = 3, n: int = 40) -> Trace:
    """``n`` jobs of 1-8 GPUs, arriving faster than 16 GPUs serve them."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(300.0, n))
    jobs = pd.DataFrame(
        {
            "job_id": [f"j{i}" for i in range(n)],
            "arrival_s": arrivals,
            "gpus": rng.choice([1, 2, 4, 8], n),
            "model": rng.choice(["resnet50", "vgg11", "resnet18", "bert_large"], n),
            "iterations": np.ceil(rng.lognormal(np.log(20_000), 1.0, n)),
            "iter_time_s": 0.1,
        }
    )
    return Trace("planner-test", jobs)


def decisions(trace: Trace, until: float, **settings) -> tuple[list[tuple], PlannerPolicy]:
    """Run a quick planner on ``trace``; its actions at instants before
    ``until``, with their times."""
    policy = PlannerPolicy(**{**PLAN, **settings})
    engine = Engine(trace, CLUSTER, record_series=False, record_placements=False)
    view = EngineView(engine)
    policy.reset(view, seed=0)
    out: list[tuple] = []
    while not engine.done and engine.now < until:
        while True:
            action = policy.act(view)
            out.append((engine.now, action))
            if action is WAIT or isinstance(action, Wait):
                break
            engine.apply(action)
        engine.advance()
    return out, policy


def test_kaplan_meier_by_hand():
    # ended 1, 2, 3; one job has done 2.5 and goes on. At risk: 4 at 1, 3 at
    # 2, 1 at 3 -> survival 3/4, 1/2, 0: masses 1/4, 1/4, 1/2, no tail
    est = SizeDistribution.estimate(np.array([3.0, 1.0, 2.0]), np.array([2.5]), prior_s=10.0)
    assert est.values.tolist() == [1.0, 2.0, 3.0]
    assert np.allclose(est.masses, [0.25, 0.25, 0.5]) and est.tail == pytest.approx(0.0)
    rng = np.random.default_rng(0)
    assert est.draw_above(2.5, rng) == 3.0  # the only size above 2.5
    assert est.draw_above(3.0, rng) == 6.0  # nothing above: twice the largest
    # nothing ended yet: the prior stands in for the largest size
    none = SizeDistribution.estimate(np.array([]), np.array([5.0]), prior_s=10.0)
    assert none.tail == 1.0 and none.draw_above(5.0, rng) == 20.0
    assert none.draw_above(50.0, rng) == 100.0
    # censoring moves mass to the tail: one ended (1), one still going past 2
    cens = SizeDistribution.estimate(np.array([1.0]), np.array([2.0]), prior_s=10.0)
    assert np.allclose(cens.masses, [0.5]) and cens.tail == pytest.approx(0.5)


def test_decisions_ignore_unfinished_sizes_and_future_arrivals():
    trace = small_trace()
    full = simulate(trace, CLUSTER, PlannerPolicy(**PLAN), record_series=False)
    jobs = full.jobs.set_index("job_id")
    cut = float(trace.jobs["arrival_s"].iloc[24]) - 1.0  # 24 jobs have arrived
    before, policy = decisions(trace, cut)
    assert policy.stats.planned >= 5, "the candidates must disagree before the cut"

    # the same past; every job unfinished at the cut 5x larger (it stays
    # unfinished); every later arrival replaced by other jobs at other times
    other = trace.jobs.copy()
    ends = jobs.loc[other["job_id"], "end_s"].to_numpy(dtype=float)
    unfinished = (other["arrival_s"] < cut).to_numpy() & (ends > cut)
    assert unfinished.sum() >= 3
    other.loc[unfinished, "iterations"] *= 5
    later = other["arrival_s"] > cut
    rng = np.random.default_rng(99)
    other.loc[later, "arrival_s"] = cut + np.sort(rng.uniform(1.0, 5000.0, later.sum()))
    other.loc[later, "gpus"] = rng.choice([1, 8], later.sum())
    other.loc[later, "iterations"] = np.ceil(rng.uniform(1e3, 1e6, later.sum()))
    changed = Trace("changed", other)
    again, _ = decisions(changed, cut)
    assert again == before
    # the changes matter once they can be seen
    after = simulate(changed, CLUSTER, PlannerPolicy(**PLAN)).summary["mean_jct_s"]
    assert after != pytest.approx(full.summary["mean_jct_s"])


def test_planner_runs_and_is_deterministic():
    trace = small_trace(seed=5, n=30)
    a = simulate(trace, CLUSTER, PlannerPolicy(**QUICK), record_series=False)
    b = simulate(trace, CLUSTER, make_policy("planner", **QUICK), record_series=False)
    assert a.summary["completed"] == 30
    assert a.jobs["end_s"].tolist() == b.jobs["end_s"].tolist()  # same seed, same run


def test_one_candidate_is_that_heuristic():
    # nothing to choose between: the planner is the heuristic, bit for bit
    trace = small_trace(seed=7, n=30)
    plan = simulate(trace, CLUSTER, PlannerPolicy(candidates=("tiresias-c1",), **QUICK))
    alone = simulate(trace, CLUSTER, make_policy("tiresias-c1"))
    assert plan.jobs["end_s"].tolist() == alone.jobs["end_s"].tolist()


def test_registered_but_not_among_the_compared_policies():
    assert "planner" not in POLICY_NAMES
    made = make_policy("planner", futures=3)
    assert isinstance(made, PlannerPolicy) and made.futures == 3


def test_the_benchmark_resolves_it_by_name():
    from ddl_gym.benchmarks.policies import resolve_policy

    spec = resolve_policy("planner")
    assert spec.name == "planner" and not spec.clairvoyant
    assert isinstance(spec.factory(), PlannerPolicy)
    with pytest.raises(ValueError, match="did you mean 'planner'"):
        resolve_policy("planer")


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"futures": 0}, "futures"),
        ({"horizon_s": 0.0}, "horizon_s"),
        ({"margin": 1.0}, "margin"),
        ({"hold_s": -1.0}, "hold_s"),
        ({"candidates": ()}, "candidates"),
        ({"candidates": ("gandiva", "gandiva")}, "repeated"),
        ({"candidates": ("dally",)}, "leases"),
        ({"candidates": ("sjf",)}, "clairvoyance"),
        ({"candidates": ("nope",)}, "unknown policy"),
    ],
)
def test_bad_settings_name_the_field(settings, field):
    with pytest.raises(ValueError, match=field):
        PlannerPolicy(**settings)


@pytest.mark.needs_data
def test_planner_as_a_benchmark_policy_on_a_quick_case():
    from ddl_gym.benchmarks import evaluate

    scores = evaluate(
        "ddl_gym.baselines.planner:quick",
        suite="ddl-gym-v3",
        quick=True,
        cases=["quick-tiresias-60@gv100x16"],
        seeds=[0],
        progress=False,
    )
    rec = scores.records
    assert len(rec) == 1 and int(rec["completed"].iloc[0]) == 60
    assert rec["policy"].iloc[0] == "ddl_gym.baselines.planner:quick"
    assert rec["mean_jct_s"].iloc[0] > 0
