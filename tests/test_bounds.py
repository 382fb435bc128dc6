"""The lower bound on mean JCT (ddl_gym.benchmarks.bounds): exact small cases
by hand, the engine's own run time of a job alone, the shape search against
brute force, and the invariant that no policy beats it on the quick cases."""

from __future__ import annotations

import itertools
import math

import pandas as pd
import pytest
from ddl_gym.baselines import POLICY_NAMES, make_policy

from ddl_gym.benchmarks.bounds import (
    alone_run_times,
    best_allreduce,
    case_lower_bound,
    fluid_srpt_total,
    jct_lower_bound,
    lightest_background,
    mean_jct_lower_bound,
)
from ddl_gym.engine import simulate
from ddl_gym.perf import Level, PerfModel, shape_of
from ddl_gym.profiles import get_profile
from ddl_gym.topology import FABRICS, Cluster, Stragglers, get_cluster, get_congestion

HOUR = 3600.0
MODEL = "resnet50"
T_C = get_profile(MODEL).iter_time_s


def _trace(jobs: list[tuple[float, int, float]], model: str = MODEL) -> pd.DataFrame:
    """Jobs as (arrival, GPUs, single-GPU work in seconds)."""
    return pd.DataFrame(
        {
            "job_id": [f"j{i}" for i in range(len(jobs))],
            "arrival_s": [a for a, _, _ in jobs],
            "gpus": [g for _, g, _ in jobs],
            "model": [model] * len(jobs),
            "iterations": [w / T_C for _, _, w in jobs],
            "iter_time_s": [T_C] * len(jobs),
        }
    )


def _mean_jct(trace: pd.DataFrame, cluster, policy: str = "fifo", congestion="none") -> float:
    p = make_policy(policy)
    res = simulate(trace, cluster, p, congestion=congestion, record_series=False)
    return float(res.summary["mean_jct_s"])


# -- exact small cases ---------------------------------------------------------
def test_fluid_srpt_by_hand():
    # (r=0, p=3), (r=1, p=1): the short one preempts at 1 and ends at 2, the
    # long one ends at 4: (4 - 0) + (2 - 1) = 5
    assert fluid_srpt_total([0.0, 1.0], [3.0, 1.0]) == pytest.approx(5.0)
    # all at 0: completions 1, 3, 6 in shortest-first order, whatever the input order
    assert fluid_srpt_total([0.0] * 3, [3.0, 1.0, 2.0]) == pytest.approx(10.0)
    # an idle gap: the second starts at its release
    assert fluid_srpt_total([0.0, 10.0], [2.0, 2.0]) == pytest.approx(4.0)
    assert fluid_srpt_total([], []) == 0.0


def test_one_job_alone_is_exactly_its_run():
    # one 1-GPU job: no communication, run time = work
    trace = _trace([(50.0, 1, 2 * HOUR)])
    lb = jct_lower_bound(trace, "seed64")
    assert lb.alone_total == pytest.approx(2 * HOUR, rel=1e-12)
    assert lb.mean == pytest.approx(_mean_jct(trace, "seed64"), rel=1e-12)
    assert lb.dominant == "alone"


@pytest.mark.parametrize("fabric", ["seed", "nvswitch_ib"])
@pytest.mark.parametrize("gpus", [2, 4, 8, 16, 32, 64])
@pytest.mark.parametrize("congestion", ["none", "heavy"])
def test_one_job_bound_equals_the_engine(fabric, gpus, congestion):
    """A one-job trace placed at once by FIFO (the packer's tightest shape)
    completes exactly at the bound when that shape is the fastest: the bound
    is the engine's run time at that placement; below it otherwise (the
    hierarchical model makes 8 x 4 racks faster than 8 x 2 x 2: its rack
    ring of 4 moves less than a NIC ring of 2 plus a rack ring of 2)."""
    cluster = get_cluster("4x2x8", fabric)
    trace = _trace([(0.0, gpus, 10 * HOUR)], model="vgg16")
    lb = jct_lower_bound(trace, cluster, congestion)
    perf = PerfModel(cluster)
    level = Level.MACHINE if gpus <= 8 else Level.RACK if gpus <= 16 else Level.NETWORK
    tightest = perf.tightest_shape(gpus, level)
    jct = _mean_jct(trace, cluster, congestion=congestion)
    if gpus <= 16:  # one server, one rack: nothing beats them on these fabrics
        assert lb.shapes[0] == tightest
    if lb.shapes[0] == tightest:
        assert lb.mean == pytest.approx(jct, rel=1e-12)
    else:
        assert lb.mean < jct


@pytest.mark.parametrize(
    ("cluster", "gpus", "tight"),
    [
        # PCIe servers: 3+3 GPUs on two racks beat 4+2 on one rack's servers
        (get_cluster("2x2x4", "v100_nvlink_100gbe"), 6, (6, 4, 2, 1)),
        # a shared fabric's NIC ring over 16 GPUs costs more than the rack ring of 2
        (get_cluster("4x2x8", "a100_nvlink_ib"), 16, (16, 8, 2, 1)),
    ],
)
def test_a_spread_shape_can_beat_the_tightest(cluster, gpus, tight):
    """Where the model makes a wider shape faster, the bound takes it: below
    the engine's run at the tightest placement (what FIFO gets alone)."""
    trace = _trace([(0.0, gpus, 10 * HOUR)], model="vgg16")
    lb = jct_lower_bound(trace, cluster)
    shape = lb.shapes[0]
    assert (shape.n, shape.g, shape.s, shape.r) != tight
    assert lb.mean < _mean_jct(trace, cluster)


def test_two_jobs_on_one_server_by_hand():
    cluster = Cluster(1, 1, 4, fabric=FABRICS["seed"])
    # two 4-GPU jobs at 0 needing 4 h and 8 h of single-GPU work (1 h and
    # 2 h of running on the whole server, communication aside): each alone
    # is p1, p2; the fluid machine (4 GPUs) runs areas 4 p1, 4 p2 at speed 4:
    # completions p1, p1 + p2, the same total as (a)'s p1 + p2 plus p1
    trace = _trace([(0.0, 4, 4 * HOUR), (0.0, 4, 8 * HOUR)], model="vgg16")
    p = alone_run_times(trace, cluster)[0]
    assert p[1] == pytest.approx(2 * p[0])
    lb = jct_lower_bound(trace, cluster)
    assert lb.alone_total == pytest.approx(p[0] + p[1])
    assert lb.fluid_total == pytest.approx(2 * p[0] + p[1])
    assert lb.mean == pytest.approx((2 * p[0] + p[1]) / 2)
    # shortest first on the server reaches it
    assert _mean_jct(trace, cluster, "sjf") == pytest.approx(lb.mean, rel=1e-12)
    # two 1-GPU jobs on the same server run side by side: (a) is exact, (b) is below
    small = _trace([(0.0, 1, 1 * HOUR), (0.0, 1, 2 * HOUR)])
    lb = jct_lower_bound(small, cluster)
    assert lb.dominant == "alone"
    assert lb.mean == pytest.approx(1.5 * HOUR)
    assert lb.fluid_total == pytest.approx((0.25 + 0.75) * HOUR)
    assert _mean_jct(small, cluster) == pytest.approx(lb.mean, rel=1e-12)


def test_fluid_bound_dominates_under_queueing():
    # one GPU, three jobs at 0 of 1, 2, 3 h: alone 6 h in all; queued
    # shortest first they end at 1, 3, 6 h: 10 h, and SJF reaches it
    cluster = Cluster(1, 1, 1, fabric=FABRICS["seed"])
    trace = _trace([(0.0, 1, 3 * HOUR), (0.0, 1, 1 * HOUR), (0.0, 1, 2 * HOUR)])
    lb = jct_lower_bound(trace, cluster)
    assert lb.alone_total == pytest.approx(6 * HOUR)
    assert lb.fluid_total == pytest.approx(10 * HOUR)
    assert lb.dominant == "fluid"
    assert mean_jct_lower_bound(trace, cluster) == pytest.approx(10 * HOUR / 3)
    assert _mean_jct(trace, cluster, "sjf") == pytest.approx(10 * HOUR / 3, rel=1e-12)
    # FIFO (arrival order 3, 1, 2 h) is above it: 3 + 4 + 6 = 13 h
    assert _mean_jct(trace, cluster, "fifo") == pytest.approx(13 * HOUR / 3, rel=1e-12)


def test_lightest_background_and_congestion():
    assert lightest_background(get_congestion("heavy")) == get_congestion("heavy").background
    diurnal = get_congestion("diurnal")
    assert lightest_background(diurnal) == min(f for _, f in diurnal.schedule or ())
    # a cross-rack job is no slower under congestion than the bound says
    trace = _trace([(0.0, 32, 10 * HOUR)], model="vgg16")
    none = mean_jct_lower_bound(trace, "seed64", "none")
    heavy = mean_jct_lower_bound(trace, "seed64", "heavy")
    assert heavy > none
    assert heavy <= _mean_jct(trace, "seed64", congestion="heavy") * (1 + 1e-12)


def test_stragglers_refused():
    cluster = Cluster(1, 1, 4, stragglers=Stragglers(sigma=0.1))
    with pytest.raises(ValueError, match="stragglers"):
        mean_jct_lower_bound(_trace([(0.0, 1, HOUR)]), cluster)


def test_empty_trace_has_no_mean():
    assert math.isnan(mean_jct_lower_bound(_trace([]), "seed64"))


# -- the shape search ----------------------------------------------------------
@pytest.mark.parametrize("fabric", sorted(FABRICS))
@pytest.mark.parametrize("background", [0.0, 0.6])
def test_best_allreduce_matches_brute_force(fabric, background):
    """Every placement of a 2-rack x 2-server x 4-GPU cluster (5^4 of them):
    the least all-reduce time per GPU count equals the bound's search."""
    cluster = Cluster(2, 2, 4, fabric=FABRICS[fabric])
    perf = PerfModel(cluster)
    bw, alpha = perf.uplink_share(background, 1), perf.uplink_latency(background)
    for model in ("resnet50", "vgg16"):
        least: dict[int, float] = {}
        for counts in itertools.product(range(5), repeat=4):
            placement = [(s, g) for s, g in enumerate(counts) if g > 0]
            if not placement:
                continue
            shape = shape_of(placement, cluster.servers_per_rack)
            ar = perf.allreduce_time(model, shape, bw, alpha)
            least[shape.n] = min(least.get(shape.n, math.inf), ar)
        for n, ar in least.items():
            got, shape = best_allreduce(perf, model, n, background)
            assert got == pytest.approx(ar, rel=1e-12), (model, n, shape)


# -- no policy beats it ----------------------------------------------------------
def test_no_policy_beats_the_bound_on_the_quick_cases(data_dir):
    """Every policy of the registry on every quick case and seed of
    ddl-gym-v1: the heuristics' shipped reference records (when they are
    there: their freshness is tests/test_benchmarks.py's), the others run."""
    from ddl_gym.benchmarks.policies import resolve_policy
    from ddl_gym.benchmarks.runner import run_case
    from ddl_gym.benchmarks.suite import get_suite

    suite = get_suite("ddl-gym-v1")
    stored: dict[tuple[str, str, int], float] = {}
    try:
        from ddl_gym.benchmarks.reference import load_reference

        for r in load_reference(suite.name).split("quick").records:
            stored[(r["policy"], r["case"], int(r["seed"]))] = float(r["mean_jct_s"])
    except (ImportError, LookupError):
        pass
    for case in suite.quick:
        for seed in case.seeds:
            bound = case_lower_bound(case, seed)
            assert bound > 0
            for name in POLICY_NAMES:
                jct = stored.get((name, case.name, seed))
                if jct is None:
                    jct = run_case(resolve_policy(name), case, seed, suite.name)["mean_jct_s"]
                assert jct >= bound, (case.name, seed, name)
