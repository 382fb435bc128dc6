"""Baselines: each policy's defining behaviour on small hand-made scenarios,
and every policy on every real trace with the engine invariants holding."""

from __future__ import annotations

import math
import random

import pytest
from ddl_gym.baselines import POLICY_NAMES, AutoTuner, make_policy
from ddl_gym.baselines.common import size_level

from ddl_gym.engine import Engine, EngineView, Wait, run_policy, simulate
from ddl_gym.perf import Level
from ddl_gym.topology import Cluster
from ddl_gym.traces import synthetic_trace
from tests.helpers import InvariantChecker, make_trace

LONG = 3e4  # iterations: a filler that outlives the scenario (~1000 s on 3 GPUs)


def run(trace, cluster, policy, **kw):
    """Simulate with the policy's own engine settings (overridable)."""
    return simulate(trace, cluster, policy, **{**policy.engine_kwargs(), **kw})


def rows(result):
    return result.jobs.set_index("job_id")


# -- registry ----------------------------------------------------------------
def test_registry_names_and_protocol():
    expected = {
        "fifo",
        "consolidation",
        "sjf",
        "srtf",
        "tiresias",
        "gandiva",
        "dally-1-2",
        "dally-6-12",
        "dally",
        "dally-delay",
        "random",
    }
    assert expected <= set(POLICY_NAMES)
    for name in POLICY_NAMES:
        policy = make_policy(name)
        assert policy.name == name
        assert callable(policy.reset) and callable(policy.act)
        assert isinstance(policy.engine_kwargs(), dict)
    assert make_policy("dally").engine_kwargs() == {
        "restore_s_per_gpu": 1.0,
        "lease_s": 20.0,
        "lazy_leases": True,
    }
    assert make_policy("gandiva").engine_kwargs() == {"restore_s_per_gpu": 0.0}
    assert make_policy("dally-6-12").rack_timer == 6
    assert make_policy("dally-1-2", rack_timer=3).rack_timer == 3
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("nope")


# -- Dally -------------------------------------------------------------------
def fragmented(gpus: int, arrival: float = 1.0) -> list[tuple]:
    """Two racks of two 4-GPU servers, each server holding a long 3-GPU
    job (one GPU free per server), then job X of ``gpus`` GPUs."""
    fillers = [(f"f{i}", 0.0, 3, "resnet50", LONG, 0.1) for i in range(4)]
    return make_trace([*fillers, ("X", arrival, gpus, "resnet50", 100.0, 0.1)])


SMALL = Cluster(2, 2, 4, "seed")


def test_fragmented_scenario_is_as_intended():
    e = Engine(fragmented(2), SMALL)
    for i in range(4):
        e.place(i, Level.MACHINE)
    assert e.free == [1, 1, 1, 1]


def test_dally_waits_exactly_rack_timer_leases_then_takes_the_rack():
    # X fits no machine but one rack: it waits 1 lease (20 s), then takes it
    r = rows(run(fragmented(2), SMALL, make_policy("dally-delay"), lease_s=20.0))
    assert r.loc["X", "start_s"] == pytest.approx(1.0 + 20.0)
    assert r.loc["X", "starts_rack"] == 1 and r.loc["X", "starts_network"] == 0
    r = rows(run(fragmented(2), SMALL, make_policy("dally-delay", rack_timer=3)))
    assert r.loc["X", "start_s"] == pytest.approx(1.0 + 60.0)


def test_dally_waits_network_timer_before_crossing_racks():
    # 3 GPUs: two free per rack, so only a cross-rack placement exists
    r = rows(run(fragmented(3), SMALL, make_policy("dally-delay")))
    assert r.loc["X", "start_s"] == pytest.approx(1.0 + 40.0)
    assert r.loc["X", "starts_network"] == 1
    # a job larger than a rack skips both waits
    big = Cluster(2, 1, 4, "seed")
    trace = make_trace([("X", 1.0, 6, "resnet50", 100.0, 0.1)])
    r = rows(run(trace, big, make_policy("dally-delay")))
    assert r.loc["X", "start_s"] == pytest.approx(1.0)


def test_dally_preempts_well_placed_jobs_for_a_new_one_at_lease_expiry():
    # with layer 2 the new job (efficiency 0) wins a whole machine from the
    # fillers at their first lease expiry (t = 20 s), before its rack timer
    result = run(fragmented(2), SMALL, make_policy("dally-1-2"))
    r = rows(result)
    assert r.loc["X", "start_s"] == pytest.approx(20.0)
    assert r.loc["X", "starts_machine"] == 1
    assert r.loc["f0", "preemptions"] == 1  # the filler on the best-fit server
    assert result.summary["preemptions"] == 1


def test_auto_tuner_matches_the_formula():
    tuner = AutoTuner(window_h=24.0)
    for w in (1.0, 2.0, 3.0, 10.0):
        tuner.record(4, Level.MACHINE, w, now=0.0)
    for w in (30.0, 40.0):
        tuner.record(4, Level.RACK, w, now=0.0)
    mean, std = 4.0, math.sqrt(12.5)
    rack = min(math.ceil(0.8 * 24), max(6, math.ceil(mean + 2 * std)))
    net = min(24, max(12, math.ceil(35.0 + 2 * 5.0)))
    assert tuner.timers(4, now=10.0) == (rack, net) == (12, 24)
    assert tuner.timers(8, now=10.0) == (6, 12)  # empty history counts as 1
    # small waits: the floors 6 and 12 hold
    tuner.record(2, Level.MACHINE, 0.5, now=0.0)
    tuner.record(2, Level.RACK, 3.0, now=0.0)
    assert tuner.timers(2, now=10.0) == (6, 12)
    # the window slides: after 24 h the history is gone
    assert tuner.timers(4, now=24 * 3600.0 + 1.0) == (6, 12)
    # the caps: ceil(0.8 H) and H
    small = AutoTuner(window_h=10.0)
    small.record(1, Level.MACHINE, 100.0, now=0.0)
    small.record(1, Level.RACK, 100.0, now=0.0)
    assert small.timers(1, now=0.0) == (8, 10)


@pytest.mark.parametrize("window_h", [24.0, 10.0, 5.0, 2.5])
def test_auto_tuner_floors_bound_every_timer(window_h):
    """``floors`` (which lets ``allowed_level`` skip the timers of a job
    that waited less) is never above what the formula gives."""
    tuner = AutoTuner(window_h=window_h)
    floors = tuner.floors()
    assert floors == (min(math.ceil(0.8 * window_h), 6), int(min(window_h, 12)))
    rng = random.Random(7)
    for step in range(300):
        gpus = rng.choice((1, 2, 4, 8))
        level = rng.choice((Level.MACHINE, Level.RACK))
        tuner.record(gpus, level, rng.expovariate(0.3), now=step * 600.0)
        rack, net = tuner.timers(gpus, now=step * 600.0)
        assert rack >= floors[0] and net >= floors[1]
    assert tuner.timers(16, now=0.0) >= floors  # (no history)


def test_auto_tuner_drops_old_waits_before_adding():
    """A wait recorded drops those that left the window first, whether or
    not the timers were asked in between: the sums then do not depend on
    when (or whether) the policy asked."""
    asked, quiet = AutoTuner(window_h=1.0), AutoTuner(window_h=1.0)
    for tuner in (asked, quiet):
        tuner.record(4, Level.MACHINE, 0.1, now=0.0)
    asked.timers(4, now=5000.0)  # drops the first wait
    for tuner in (asked, quiet):
        tuner.record(4, Level.MACHINE, 0.7, now=5000.0)
    a, q = asked.windows[(4, Level.MACHINE)], quiet.windows[(4, Level.MACHINE)]
    assert list(q.samples) == [(5000.0, 0.7)]
    assert (a.total, a.total_sq) == (q.total, q.total_sq)


def test_tuner_watch_names_the_recorded_and_the_expired_demands():
    from ddl_gym.baselines.dally import _TunerWatch

    day = 24 * 3600.0
    tuner = AutoTuner(window_h=24.0)
    watch = _TunerWatch()
    assert watch.quiet(tuner, 0.0) and watch.until() == math.inf
    tuner.record(4, Level.MACHINE, 2.0, now=100.0)
    tuner.record(8, Level.RACK, 3.0, now=200.0)
    assert not watch.quiet(tuner, 300.0)
    assert watch.changed(tuner, 300.0) == {4, 8}
    assert watch.quiet(tuner, 300.0)  # nothing since
    for gpus in (4, 8):
        tuner.timers(gpus, 300.0)
        watch.watch(gpus, tuner.stable_until(gpus))
    # each demand holds until its oldest wait leaves the window
    assert 100.0 + day - 1e-3 < watch.until() < 100.0 + day
    assert watch.quiet(tuner, 100.0 + day - 1.0)
    assert not watch.quiet(tuner, 100.0 + day)
    assert watch.changed(tuner, 100.0 + day) == {4}  # 8's wait is still in
    assert watch.changed(tuner, 200.0 + day) == {8}
    # an earlier time seen for a demand counts; a later one does not replace it
    watch.watch(2, 50.0)
    watch.watch(2, 60.0)
    assert watch.until() == 50.0 and watch.changed(tuner, 50.0) == {2}
    # a demand with no wait in its window holds until one is recorded
    tuner.timers(16, 0.0)
    assert tuner.stable_until(16) == math.inf


def test_auto_tuned_dally_uses_tuned_timers():
    # empty history: timers 6 / 12 leases, so X waits 6 leases for a rack
    pol = make_policy("dally", preempt=False)
    r = rows(run(fragmented(2), SMALL, pol))
    assert r.loc["X", "start_s"] == pytest.approx(1.0 + 6 * 20.0)


# -- Tiresias ----------------------------------------------------------------
def tiresias_log(trace, cluster, policy, until: float):
    engine = Engine(trace, cluster, restore_s_per_gpu=0.0)
    view = EngineView(engine)
    policy.reset(view)
    log = []
    while not engine.done and engine.now < until:
        action = policy.act(view)
        if isinstance(action, Wait):
            engine.advance()
        else:
            log.append((engine.now, type(action).__name__, engine.jobs[action.job].job_id))
            engine.apply(action)
    return log


def test_tiresias_demotes_at_threshold_and_promotes_the_starving():
    one = Cluster(1, 1, 4, "seed")
    trace = make_trace([("A", 0.0, 4, "resnet50", 1e6, 0.1), ("B", 10.0, 1, "resnet50", 1e6, 0.1)])
    pol = make_policy("tiresias", thresholds_gpu_s=(100.0,), starve_factor=2.0, starve_min_s=0.0)
    log = tiresias_log(trace, one, pol, until=100.0)
    assert log == [
        (0.0, "Place", "A"),
        # A (4 GPUs) reaches 100 GPU-s at t = 25: demoted, B (queue 0) takes over
        (25.0, "Preempt", "A"),
        (25.0, "Place", "B"),
        # A ran 25 s; after waiting 2 x 25 s it is promoted to queue 0 and,
        # arrived first, preempts B (still in queue 0 with 50 GPU-s)
        (75.0, "Preempt", "B"),
        (75.0, "Place", "A"),
    ]
    # without promotion A waits for B to be demoted too (1 GPU: t = 125)
    pol = make_policy("tiresias", thresholds_gpu_s=(100.0,), starve_factor=1e9)
    log = tiresias_log(trace, one, pol, until=200.0)
    assert [e for e in log if e[0] > 25.0][:2] == [(125.0, "Preempt", "B"), (125.0, "Place", "A")]


def test_tiresias_keeps_sensitive_models_within_a_rack():
    e = Engine(make_trace([("m", 0.0, 8, "mobilenet_v3", 10.0, 0.1)]), "seed64")
    view = EngineView(e)
    pol = make_policy("tiresias")
    pol.reset(view)
    job = e.jobs[0]
    assert pol.sensitive(view, job) and pol.level_of(view, job) == Level.RACK
    e2 = Engine(make_trace([("v", 0.0, 8, "vgg11", 10.0, 0.1)]), "seed64")
    assert not pol.sensitive(EngineView(e2), e2.jobs[0])
    # fragmented cluster: the sensitive 2-GPU job waits, an insensitive one crosses
    cl = Cluster(2, 1, 4, "seed")
    fill = [("f0", 0.0, 3, "vgg11", LONG, 0.1), ("f1", 0.0, 3, "vgg11", LONG, 0.1)]
    e3 = Engine(make_trace([*fill, ("s", 1.0, 2, "mobilenet_v3", 10.0, 0.1)]), cl)
    pol.reset(EngineView(e3))
    e3.place(0, Level.MACHINE)
    e3.place(1, Level.MACHINE)
    e3.advance()
    assert isinstance(pol.act(EngineView(e3)), Wait)


# -- Gandiva -----------------------------------------------------------------
def test_gandiva_migrates_a_fragmented_job_when_a_machine_frees():
    cl = Cluster(2, 1, 4, "seed")  # two racks of one 4-GPU server
    trace = make_trace(
        [
            ("A", 0.0, 2, "resnet50", 100.0, 0.1),  # short, on server 0
            ("B", 0.0, 3, "resnet50", LONG, 0.1),  # long, on server 1
            ("C", 1.0, 3, "resnet50", 1e6, 0.1),  # 2 + 1 across racks
        ]
    )
    result = run(trace, cl, make_policy("gandiva"))
    r = rows(result)
    a_end = r.loc["A", "end_s"]
    assert r.loc["C", "starts_network"] == 1 and r.loc["C", "starts_machine"] == 1
    assert r.loc["C", "preemptions"] == 1 and r.loc["C", "level"] == "machine"
    assert r.loc["C", "overhead_s"] == 0.0  # no checkpoint cost
    assert r.loc["C", "queueing_s"] == pytest.approx(0.0)
    assert a_end < r.loc["C", "end_s"]
    # without migration C stays across racks
    r2 = rows(run(trace, cl, make_policy("gandiva", migrate=False)))
    assert r2.loc["C", "preemptions"] == 0 and r2.loc["C", "level"] == "network"


def test_gandiva_prefers_servers_of_the_same_demand():
    cl = Cluster(1, 2, 4, "seed")
    pol = make_policy("gandiva")
    trace = make_trace(
        [
            ("a", 0.0, 2, "resnet50", LONG, 0.1),
            ("b", 0.0, 1, "resnet50", LONG, 0.1),
            ("c", 1.0, 1, "resnet50", 10.0, 0.1),
            ("d", 1.0, 2, "resnet50", 10.0, 0.1),
        ]
    )
    e = Engine(trace, cl)
    view = EngineView(e)
    pol.reset(view)
    e.place(0, Level.MACHINE)  # a: server 0 (2 free left)
    e.place(1, Level.MACHINE)  # b: best fit -> server 0 (1 free left)
    e.advance()
    # c (1 GPU) would land on server 0 next to a 2-GPU job (mixed); d (2 GPUs)
    # lands on empty server 1: d first, although c arrived first in the queue
    assert pol.act(view).job == 3


# -- consolidation, SJF, SRTF, FIFO, random ---------------------------------
def test_strict_consolidation_never_crosses_racks():
    trace = synthetic_trace(n_jobs=120, seed=1, max_gpus=32, arrival_rate_per_h=60)
    result = run(trace, "seed64", make_policy("consolidation"), congestion="heavy")
    jobs = result.jobs
    rack = 16  # seed64: 2 servers x 8 GPUs per rack
    assert (jobs.loc[jobs.gpus <= rack, "starts_network"] == 0).all()
    assert (jobs.loc[jobs.gpus <= 8, "starts_rack"] == 0).all()
    assert result.summary["completed"] == len(jobs)
    assert size_level(Cluster(4, 2, 8, "seed"), 17) == Level.NETWORK


def lengths_trace():
    # A: long 4-GPU job running alone; B arrives, short but wants all 4 GPUs
    return make_trace(
        [("A", 0.0, 4, "resnet50", 4e5, 0.1), ("B", 100.0, 4, "resnet50", 400.0, 0.1)]
    )


def test_srtf_clairvoyant_preempts_for_shorter_remaining_work():
    one = Cluster(1, 1, 4, "seed")
    r = rows(run(lengths_trace(), one, make_policy("srtf"), clairvoyant=True))
    assert r.loc["B", "start_s"] == pytest.approx(100.0)
    assert r.loc["A", "preemptions"] == 1


def test_srtf_refuses_remaining_work_when_not_clairvoyant():
    one = Cluster(1, 1, 4, "seed")
    # a long B would lose under clairvoyance; blind, B has attained nothing
    # and wins by least attained service
    trace = make_trace(
        [("A", 0.0, 4, "resnet50", 400.0 * 4, 0.1), ("B", 10.0, 4, "resnet50", 1e6, 0.1)]
    )
    seen = rows(run(trace, one, make_policy("srtf"), clairvoyant=True))
    assert seen.loc["B", "start_s"] > 10.0 and seen.loc["A", "preemptions"] == 0
    # the view raises PermissionError on remaining_work: completing proves it
    blind = rows(run(trace, one, make_policy("srtf"), clairvoyant=False))
    assert blind.loc["B", "start_s"] == pytest.approx(10.0)
    assert blind.loc["A", "preemptions"] == 1
    e = Engine(trace, one, clairvoyant=False)
    with pytest.raises(PermissionError):
        EngineView(e).remaining_work(e.jobs[0])


def test_sjf_orders_by_work_or_by_size():
    one = Cluster(1, 1, 4, "seed")
    trace = make_trace(
        [
            ("run", 0.0, 4, "resnet50", 1000.0, 0.1),
            ("big-short", 1.0, 4, "resnet50", 100.0, 0.1),
            ("small-long", 2.0, 2, "resnet50", 1e5, 0.1),
        ]
    )
    seen = rows(run(trace, one, make_policy("sjf"), clairvoyant=True))
    assert seen.loc["big-short", "start_s"] < seen.loc["small-long", "start_s"]
    blind = rows(run(trace, one, make_policy("sjf"), clairvoyant=False))
    assert blind.loc["small-long", "start_s"] < blind.loc["big-short", "start_s"]


def test_random_is_seeded_and_valid():
    trace = synthetic_trace(n_jobs=60, seed=2, max_gpus=16)
    a = run(trace, "seed64", make_policy("random"), seed=5)
    b = run(trace, "seed64", make_policy("random"), seed=5)
    assert a.jobs.equals(b.jobs)
    c = run(trace, "seed64", make_policy("random", preempt_prob=0.2), seed=1)
    assert c.summary["completed"] == len(trace)


# -- every policy on every trace, invariants checked ------------------------
class Checked:
    """Wraps a policy; checks the engine invariants every ``every`` calls."""

    def __init__(self, policy, engine: Engine, every: int) -> None:
        self.policy, self.engine, self.every = policy, engine, every
        self.checker = InvariantChecker()
        self.calls = 0

    def reset(self, view, seed=None):
        self.policy.reset(view, seed=seed)

    def act(self, view):
        self.calls += 1
        # every arrival and completion instant, and every ``every``-th call
        if self.calls % self.every == 0 or any(k != "lease" for k, _ in view.events):
            self.checker.check(self.engine)
        return self.policy.act(view)


def run_checked(trace, cluster, name: str, every: int, policy_kw=None, **kw):
    policy = make_policy(name, **(policy_kw or {}))
    engine = Engine(trace, cluster, **{**policy.engine_kwargs(), "record_series": False, **kw})
    checked = Checked(policy, engine, every)
    checked.reset(EngineView(engine), seed=0)
    run_policy(engine, checked)
    checked.checker.finish(engine)
    return engine


DEFAULT_JOBS = 300


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_every_policy_on_the_default_trace_with_invariants(name):
    from ddl_gym.traces import default_trace

    engine = run_checked(default_trace(0), "seed64", name, every=1, congestion="moderate")
    assert engine.result().summary["completed"] == DEFAULT_JOBS


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_every_policy_completes_every_real_trace(all_traces, name):
    # Affordable: invariants checked at every event instant but lease expiries
    # and every 50th call, and the lease-based policies run with 10-minute
    # leases (their
    # timers scale with it): the seed's 20 s leases make millions of lease
    # instants on the week-long traces, which scripts/compare.py pays, not CI.
    # Likewise Tiresias runs without starvation promotion here (promotion
    # churns thousands of preemptions on the overloaded seed traces; it is
    # tested above and on the default trace with every step checked).
    policy_kw = {}
    if make_policy(name).engine_kwargs().get("lease_s"):
        policy_kw = {"lease_s": 600.0}
    if name == "tiresias":
        policy_kw = {"starve_factor": math.inf}
    for trace_name, trace in all_traces.items():
        # the seed's traces on the seed's 64-GPU cluster, the others on 512 GPUs
        cluster = "seed64" if "dally" in trace_name else "seed512"
        engine = run_checked(
            trace, cluster, name, every=50, policy_kw=policy_kw, congestion="moderate"
        )
        assert engine.n_done == len(trace.jobs), (name, trace_name)
