"""The reference Dally (``baselines/dally_reference.py``) gives the fast
``DallyPolicy``'s results bit for bit, and does what the model says on
hand-checkable cases.

Equality is checked on result fingerprints (``tests/golden_results``: exact
summary, hashes of the per-job table and of the placement history): on
seeded synthetic traces (three cluster shapes, jobs crossing racks, heavy
congestion; every Dally variant), and against the golden cells on the real
weeks (Philly week at moderate congestion in the normal run; every cell with
``pytest --golden-full``).
"""

from __future__ import annotations

import pytest
from ddl_gym.baselines import DallyPolicy, ReferenceDally, make_policy
from ddl_gym.baselines.dally_reference import AutoTuner

from ddl_gym.engine import Engine, EngineView, Place, Preempt, simulate
from ddl_gym.perf import Level
from ddl_gym.topology import Cluster
from ddl_gym.traces import synthetic_trace
from ddl_gym.traces.synthetic import reference_iter_time
from tests.golden_results import (
    WORKLOADS,
    _workload,
    cells,
    differences,
    fingerprint,
    key,
    load_golden,
)
from tests.helpers import make_trace

VARIANTS = ("dally-delay", "dally-1-2", "dally-6-12", "dally")

# (cluster, synthetic trace arguments, seed): queues form, jobs are
# preempted, and jobs take rack and cross-rack placements in every shape
SYNTHETIC = [
    (Cluster(2, 2, 4, "seed"), dict(n_jobs=120, arrival_rate_per_h=60.0, max_gpus=12), 0),
    (Cluster(2, 2, 4, "seed"), dict(n_jobs=120, arrival_rate_per_h=60.0, max_gpus=12), 1),
    (Cluster(3, 2, 4, "seed"), dict(n_jobs=120, arrival_rate_per_h=90.0, max_gpus=16), 0),
    (Cluster(3, 2, 4, "seed"), dict(n_jobs=120, arrival_rate_per_h=90.0, max_gpus=16), 1),
    (Cluster(2, 4, 8, "nvswitch_ib"), dict(n_jobs=120, arrival_rate_per_h=600.0, max_gpus=48), 1),
    (Cluster(2, 4, 8, "nvswitch_ib"), dict(n_jobs=120, arrival_rate_per_h=600.0, max_gpus=48), 2),
]


def same_results(trace, cluster, name: str, **params) -> list[str]:
    """Differences between the fast and the reference policy (each with its
    own engine settings, as ``simulate`` applies them)."""
    fast = simulate(trace, cluster, make_policy(name, **params), congestion="heavy")
    ref = simulate(trace, cluster, make_policy(name, reference=True, **params), congestion="heavy")
    return differences(fingerprint(fast), fingerprint(ref))


@pytest.mark.parametrize("name", VARIANTS)
def test_equal_to_the_fast_policy_on_synthetic_traces(name):
    for cluster, kwargs, seed in SYNTHETIC:
        trace = synthetic_trace(seed=seed, **kwargs)
        assert same_results(trace, cluster, name) == [], (cluster.describe(), seed)


def test_equal_with_a_tuner_window_shorter_than_the_trace():
    # a 10-hour window on a 200-hour run: waits leave the window
    trace = synthetic_trace(seed=1, n_jobs=300, arrival_rate_per_h=20.0, max_gpus=16)
    assert same_results(trace, Cluster(3, 2, 4, "seed"), "dally", window_h=10.0) == []


GOLDEN_CELLS = [c for c in cells(WORKLOADS) if c[2] in VARIANTS]


@pytest.mark.parametrize("cell", GOLDEN_CELLS, ids=[key(*c) for c in GOLDEN_CELLS])
def test_equal_to_golden(cell, data_dir, request):
    workload, congestion, name = cell
    quick = workload == "philly-week-512" and congestion == "moderate"
    if not quick and not request.config.getoption("--golden-full"):
        pytest.skip("slow golden cell: run with --golden-full")
    scenario, trace, cluster = _workload(workload)
    scenario = scenario.replace(congestion=congestion)
    policy = make_policy(name, reference=True)
    kwargs = scenario.engine_kwargs(policy.engine_kwargs())  # as golden_results.run_one
    result = simulate(trace, cluster, policy, seed=0, **kwargs)
    assert differences(load_golden()[key(*cell)], fingerprint(result)) == []


# -- registry and engine settings --------------------------------------------
def test_registered_as_the_reference_twin_of_each_variant():
    for name in VARIANTS:
        fast, ref = make_policy(name), make_policy(name, reference=True)
        assert isinstance(fast, DallyPolicy) and isinstance(ref, ReferenceDally)
        assert ref.name == f"{name}-reference"
        for param in ("rack_timer", "network_timer", "preempt", "auto_tune", "window_h"):
            assert getattr(ref, param) == getattr(fast, param)
    assert make_policy("dally-6-12", reference=True, rack_timer=3).rack_timer == 3
    # eager leases, carried by the policy itself
    assert make_policy("dally", reference=True).engine_kwargs() == {
        "restore_s_per_gpu": 1.0,
        "lease_s": 20.0,
        "lazy_leases": False,
    }
    assert make_policy("dally-delay", reference=True).engine_kwargs()["lease_s"] is None
    with pytest.raises(ValueError, match="reference"):
        make_policy("fifo", reference=True)


# -- hand-checkable cases ----------------------------------------------------
LONG = 3e4  # iterations: a filler that outlives the scenario


def fragmented(gpus: int) -> object:
    """Two racks of two 4-GPU servers, each holding a long 3-GPU job (one
    GPU free per server), then job X of ``gpus`` GPUs at t = 1 s."""
    fillers = [(f"f{i}", 0.0, 3, "resnet50", LONG, 0.1) for i in range(4)]
    return make_trace([*fillers, ("X", 1.0, gpus, "resnet50", 100.0, 0.1)])


def run_reference(trace, cluster, name: str):
    return simulate(trace, cluster, make_policy(name, reference=True)).jobs.set_index("job_id")


def test_a_waiting_job_takes_the_wider_placement_exactly_when_its_timer_fires():
    small = Cluster(2, 2, 4, "seed")
    # 2 GPUs fit no server but one rack: after rack_timer = 1 lease (20 s)
    r = run_reference(fragmented(2), small, "dally-delay")
    assert r.loc["X", "start_s"] == 1.0 + 20.0
    assert r.loc["X", "starts_rack"] == 1
    # 3 GPUs fit only across racks: after network_timer = 2 leases
    r = run_reference(fragmented(3), small, "dally-delay")
    assert r.loc["X", "start_s"] == 1.0 + 40.0
    assert r.loc["X", "starts_network"] == 1


def test_a_new_job_wins_a_machine_at_the_first_lease_expiry():
    # with layer 2 the new job (efficiency 0) takes the best-fit server from
    # the fillers when their leases expire (20 s), before its rack timer
    r = run_reference(fragmented(2), Cluster(2, 2, 4, "seed"), "dally-1-2")
    assert r.loc["X", "start_s"] == 20.0 and r.loc["X", "starts_machine"] == 1
    assert r["preemptions"].to_dict() == {"f0": 1, "f1": 0, "f2": 0, "f3": 0, "X": 0}


def test_the_reoffer_goes_in_ascending_efficiency():
    """One rack of four 4-GPU servers. X (alexnet, 8 GPUs) runs on servers
    0-1 and is preempted at t = 5 s for B (resnet18, 8 GPUs: servers 0-1)
    and A (vgg11, 8 GPUs: servers 2-3). At t = 25 s both leases expire with
    X waiting: B is less efficient than X, A more (each by more than the
    margin). In ascending efficiency B keeps servers 0-1 (the packer's
    choice had X gone first), X takes A's servers, and A loses them."""
    models = {"X": "alexnet", "B": "resnet18", "A": "vgg11"}
    arrivals = {"X": 0.0, "B": 5.0, "A": 5.0}
    trace = make_trace(
        [(j, arrivals[j], 8, m, 1e9, reference_iter_time(m)) for j, m in models.items()]
    )
    X, B, A = 0, 1, 2
    for policy in (make_policy("dally-1-2", reference=True), make_policy("dally-1-2")):
        engine = Engine(trace, Cluster(1, 4, 4, "seed"), lease_s=20.0)
        view = EngineView(engine)
        assert engine.place(X, Level.RACK) == ((0, 4), (1, 4))
        engine.advance()  # t = 5: B and A arrive
        engine.preempt(X)
        assert engine.place(B, Level.RACK) == ((0, 4), (1, 4))
        assert engine.place(A, Level.RACK) == ((2, 4), (3, 4))
        engine.advance()
        assert engine.now == 25.0 and [j.index for j in view.lease_expired] == [B, A]
        eff_b, eff_a = view.efficiencies(view.lease_expired)
        eff_x = view.efficiency(engine.jobs[X])
        assert eff_b < eff_x - policy.margin and eff_x < eff_a - policy.margin
        policy.reset(view)
        assert policy.act(view) == Preempt(A)
        engine.apply(Preempt(A))
        assert policy.act(view) == Place(X, Level.RACK)
        assert engine.place(X, Level.RACK) == ((2, 4), (3, 4))


def test_the_auto_tuner_follows_the_formula_and_its_window():
    tuner = AutoTuner(window_h=24.0)
    assert tuner.timers(4, 0.0) == (6, 12)  # empty history: the floors
    for wait in (1.0, 2.0, 3.0, 10.0):  # mean 4, std sqrt(12.5): ceil(11.07) = 12
        tuner.record(4, Level.MACHINE, wait, now=0.0)
    for wait in (30.0, 40.0):  # mean 35, std 5: 45, capped at H = 24
        tuner.record(4, Level.RACK, wait, now=0.0)
    tuner.record(4, Level.NETWORK, 99.0, now=0.0)  # not a timer's wait
    assert tuner.timers(4, 0.0) == (12, 24)
    assert tuner.timers(8, 0.0) == (6, 12)  # per GPU demand
    assert tuner.timers(4, 24 * 3600.0 + 1.0) == (6, 12)  # the waits left the window
