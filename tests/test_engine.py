"""Engine: exact small scenarios computed by hand, invariants, bad actions."""

from __future__ import annotations

import pytest
from ddl_gym.baselines.fifo import FifoPolicy

from ddl_gym.engine import (
    WAIT,
    Engine,
    EngineView,
    InvalidAction,
    LeaseHints,
    Place,
    Preempt,
    StalledError,
    Status,
    simulate,
)
from ddl_gym.engine.packer import FreeIndex, find_placement
from ddl_gym.perf import Level
from ddl_gym.profiles import get_profile
from ddl_gym.topology import Cluster, Fabric, Link
from tests.helpers import InvariantChecker, make_trace

B = get_profile("resnet18").total_grad_bytes  # bytes all-reduced per iteration


def toy_fabric() -> Fabric:
    # One gradient bucket, no overlap, no latency; a cross-rack ring of two
    # racks moves B bytes: 0.5 s alone on the uplinks, 1 s when two jobs share.
    return Fabric(
        name="toy",
        gpu_link=Link(1e15, 0.0),
        nic=Link(B / 0.5, 0.0),
        uplink=Link(1.0, 0.0),
        oversubscription=1.0,
        algorithm="hierarchical",
        bucket_bytes=1e12,
        overlap=0.0,
    )


class Scripted:
    """t=0: place B then C (both across racks, sharing rack 1's uplink).
    t=10: preempt C and place A. Later: place whatever fits, in queue order."""

    def reset(self, view: EngineView, seed=None) -> None:
        view.wake_at(10.0)

    def act(self, view: EngineView):
        if view.now == 10.0:
            if view.job(1).status == Status.RUNNING:
                return Preempt(1)
            if view.job(2).status == Status.PENDING:
                return Place(2, Level.NETWORK)
            return WAIT
        for job in view.pending:
            if view.can_place(job, Level.NETWORK):
                return Place(job.index, Level.NETWORK)
        return WAIT


def test_three_jobs_with_contention_and_preemption_by_hand():
    cluster = Cluster(3, 1, 2, toy_fabric())  # three racks of one 2-GPU server
    trace = make_trace(
        [
            ("B", 0.0, 3, "resnet18", 40.0, 0.5),
            ("C", 0.0, 3, "resnet18", 40.0, 0.5),
            ("A", 5.0, 1, "resnet18", 10.0, 2.0),
        ]
    )
    result = simulate(trace, cluster, Scripted(), restore_s_per_gpu=1.0)
    jobs = result.jobs.set_index("job_id")

    e = B / 1e15  # the in-server ring of 2 GPUs (tiny but exact)
    shared = 0.5 + e + 1.0  # t_iter of B and C while they share rack 1's uplink
    alone = 0.5 + e + 0.5
    # B: [(0,2),(1,1)], C: [(2,2),(1,1)]; both 3 GPUs, rate 3 / t_iter
    done_at_10 = 10 * 3 / shared
    b_end = 10 + (40 - done_at_10) * alone / 3
    # A: 1 GPU, no communication, runs 10..30 on server 1
    a_end = 10 + 10 * 2.0
    # C: back at B's end on [(0,2),(2,1)], alone; 3 s restore (1 s per GPU)
    c_end = b_end + 3.0 + (40 - done_at_10) * alone / 3

    assert jobs.loc["B", "end_s"] == pytest.approx(b_end, rel=1e-12)
    assert jobs.loc["A", "end_s"] == pytest.approx(a_end, rel=1e-12)
    assert jobs.loc["C", "end_s"] == pytest.approx(c_end, rel=1e-12)
    assert jobs.loc["A", "jct_s"] == pytest.approx(25.0)
    assert jobs.loc["B", "jct_s"] == pytest.approx(b_end)
    assert jobs.loc["C", "jct_s"] == pytest.approx(c_end)
    assert jobs.loc["A", "queueing_s"] == pytest.approx(5.0)
    assert jobs.loc["C", "queueing_s"] == pytest.approx(b_end - 10.0)
    assert jobs.loc["C", "preemptions"] == 1
    assert jobs.loc["C", "overhead_s"] == pytest.approx(3.0)
    # exposed communication: 1+e of every shared iteration, then 0.5+e alone
    b_comm = 10 * (1 + e) / shared + (b_end - 10) * (0.5 + e) / alone
    assert jobs.loc["B", "comm_s"] == pytest.approx(b_comm, rel=1e-12)
    c_comm = 10 * (1 + e) / shared + (c_end - b_end - 3.0) * (0.5 + e) / alone
    assert jobs.loc["C", "comm_s"] == pytest.approx(c_comm, rel=1e-12)
    assert jobs.loc["A", "comm_s"] == 0.0
    assert c_end < a_end and result.summary["makespan_s"] == pytest.approx(a_end)
    assert result.summary["preemptions"] == 1
    assert result.summary["alloc_network"] == 3 and result.summary["alloc_machine"] == 1


def test_fifo_by_hand_on_one_server():
    # Two 2-GPU jobs on one 2-GPU server: the second waits for the first.
    cluster = Cluster(1, 1, 2, toy_fabric())
    trace = make_trace([("x", 0.0, 2, "resnet18", 10.0, 1.0), ("y", 1.0, 2, "resnet18", 4.0, 1.0)])
    r = simulate(trace, cluster, FifoPolicy())
    e = B / 1e15
    x_end = 10 * (1 + e) / 2
    y_end = x_end + 4 * (1 + e) / 2
    assert list(r.jobs["end_s"]) == pytest.approx([x_end, y_end], rel=1e-12)
    assert r.summary["mean_jct_s"] == pytest.approx((x_end + y_end - 1.0) / 2)
    assert r.summary["gpu_utilization"] == pytest.approx(1.0)


def test_time_varying_congestion_rerates_cross_rack_jobs():
    from ddl_gym.topology import Congestion

    fabric = toy_fabric()
    cluster = Cluster(2, 1, 1, fabric)
    cong = Congestion("step", schedule=((0.0, 0.0), (5.0, 0.5)))
    trace = make_trace([("x", 0.0, 2, "resnet18", 30.0, 0.5)])
    r = simulate(trace, cluster, FifoPolicy(), congestion=cong)
    # t_iter 1.0 s (0.5 + 0.5) until t=5, then the uplink share halves: 1.5 s
    done_at_5 = 5 * 2 / 1.0
    end = 5 + (30 - done_at_5) * 1.5 / 2
    assert r.jobs.loc[0, "end_s"] == pytest.approx(end, rel=1e-12)


def test_packer_best_fit_and_levels():
    free = [3, 1, 4, 2]  # two racks of two 4-GPU servers
    rack_free = [4, 6]
    assert find_placement(free, rack_free, 2, 4, 1, Level.MACHINE) == [(1, 1)]
    assert find_placement(free, rack_free, 2, 4, 2, Level.MACHINE) == [(3, 2)]
    assert find_placement(free, rack_free, 2, 4, 5, Level.MACHINE) is None
    assert find_placement(free, rack_free, 2, 4, 5, Level.RACK) == [(2, 4), (3, 1)]
    assert find_placement(free, rack_free, 2, 4, 7, Level.RACK) is None
    assert find_placement(free, rack_free, 2, 4, 7, Level.NETWORK) == [(2, 4), (3, 2), (1, 1)]
    assert find_placement(free, rack_free, 2, 4, 11, Level.NETWORK) is None


def test_free_index_gives_the_packers_placement():
    """``FreeIndex.find`` (the engine's indexed packer) answers exactly as the
    scanning reference ``find_placement`` on random allocate/release sequences,
    for every size and level, including racks and the several-rack case."""
    import random

    rng = random.Random(7)
    for racks, S, G in ((3, 4, 8), (2, 2, 4), (5, 3, 2)):
        free = [G] * (racks * S)
        rack_free = [S * G] * racks
        index = FreeIndex(free, rack_free, S, G)
        held: list[list[tuple[int, int]]] = []
        for _ in range(400):
            if held and rng.random() < 0.45:
                for server, g in held.pop(rng.randrange(len(held))):
                    index.move(server, free[server], free[server] + g)
                    free[server] += g
                    rack_free[server // S] += g
                continue
            for gpus in range(1, racks * S * G + 1):
                for level in Level:
                    want = find_placement(list(free), list(rack_free), S, G, gpus, level)
                    got = index.find(gpus, level) if gpus <= sum(free) else None
                    assert got == want, (free, gpus, level)
            gpus = rng.choice([1, 1, 2, 3, G, G + 1, 2 * G, S * G + 1])
            placement = index.find(gpus, Level.NETWORK) if gpus <= sum(free) else None
            if placement is not None:
                for server, g in placement:
                    index.move(server, free[server], free[server] - g)
                    free[server] -= g
                    rack_free[server // S] -= g
                held.append(placement)
        assert sorted(s for b in index.by_free for s in b) == list(range(racks * S))


def test_free_index_best_fit_with_changed_servers_is_the_packers_first_step():
    """``FreeIndex.best_fit`` (a dry run's one-server choice, with some
    servers' free counts replaced) answers as ``find_placement`` on a copy
    of the counts with those replaced, for every size up to a server."""
    import random

    rng = random.Random(3)
    S, G, racks = 4, 8, 4
    for _ in range(300):
        free = [rng.randint(0, G) for _ in range(S * racks)]
        rack_free = [sum(free[r * S : (r + 1) * S]) for r in range(racks)]
        index = FreeIndex(free, rack_free, S, G)
        changed = {s: rng.randint(0, G) for s in rng.sample(range(S * racks), rng.randint(0, 6))}
        pool = list(free)
        for s, f in changed.items():
            pool[s] = f
        pool_racks = [sum(pool[r * S : (r + 1) * S]) for r in range(racks)]
        for gpus in range(1, G + 1):
            want = find_placement(pool, pool_racks, S, G, gpus, Level.MACHINE)
            got = index.best_fit(gpus, changed)
            assert (None if got is None else [(got, gpus)]) == want, (free, changed, gpus)


def test_invalid_actions_change_nothing():
    cluster = Cluster(1, 1, 2, toy_fabric())
    trace = make_trace([("x", 0.0, 2, "resnet18", 10.0, 1.0), ("y", 0.0, 2, "resnet18", 4.0, 1.0)])
    engine = Engine(trace, cluster)
    engine.place(0, Level.MACHINE)
    before = (list(engine.free), [j.status for j in engine.jobs], engine.now)
    for bad in (
        Place(1, Level.NETWORK),
        Place(0, Level.MACHINE),
        Preempt(1),
        Place(7),
        Preempt(-1),
    ):
        assert engine.check(bad) is not None
        with pytest.raises(InvalidAction):
            engine.apply(bad)
        assert (list(engine.free), [j.status for j in engine.jobs], engine.now) == before


def test_stall_is_reported():
    trace = make_trace([("x", 0.0, 1, "resnet18", 10.0, 1.0)])
    engine = Engine(trace, Cluster(1, 1, 1, toy_fabric()))
    with pytest.raises(StalledError, match="waited"):
        engine.advance()


def test_trace_errors_name_row_and_field():
    trace = make_trace([("x", 0.0, 1, "resnet18", 10.0, 1.0), ("y", 1.0, 9, "resnet18", 1.0, 1.0)])
    with pytest.raises(ValueError, match=r"row 2.*'gpus'"):
        Engine(trace, Cluster(1, 1, 8, toy_fabric()))


def test_leases_make_decision_points():
    trace = make_trace([("x", 0.0, 1, "resnet18", 100.0, 1.0)])
    engine = Engine(trace, Cluster(1, 1, 1, toy_fabric()), lease_s=20.0)
    engine.place(0)
    times = []
    while engine.advance():
        times.append((engine.now, [j.index for j in engine.lease_expired]))
    assert times == [(20.0, [0]), (40.0, [0]), (60.0, [0]), (80.0, [0]), (100.0, [])]


def test_same_result_every_run(seed_trace_path):
    from ddl_gym.traces import load_trace

    trace = load_trace(seed_trace_path)
    a = simulate(trace, "seed64", FifoPolicy(), congestion="heavy")
    b = simulate(trace, "seed64", FifoPolicy(), congestion="heavy")
    assert a.jobs.equals(b.jobs) and a.summary == b.summary


class CheckingFifo(FifoPolicy):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.checker = InvariantChecker()

    def act(self, view):
        self.checker.check(self.engine)
        return super().act(view)


def run_checked(trace, cluster, **kw):
    from ddl_gym.engine import run_policy

    engine = Engine(trace, cluster, **kw)
    policy = CheckingFifo(engine)
    run_policy(engine, policy)
    policy.checker.finish(engine)
    return engine


def test_invariants_on_every_real_trace(all_traces):
    from ddl_gym.topology import Cluster as C

    for name, trace in all_traces.items():
        # the seed's traces on the seed's 64-GPU cluster, the others on 512 GPUs
        cluster = "seed64" if "/dally/" in name else C(8, 8, 8, "pcie_25gbe")
        engine = run_checked(trace, cluster, congestion="diurnal")
        assert engine.result().summary["completed"] == len(trace), name


def test_invariants_with_preemptions_and_leases():
    import numpy as np

    from ddl_gym.engine import run_policy
    from ddl_gym.traces import synthetic_trace

    trace = synthetic_trace(n_jobs=150, seed=3)

    class Chaos:
        """Random valid actions, preemptions included."""

        def reset(self, view, seed=None):
            self.rng = np.random.default_rng(seed)

        def act(self, view):
            checker.check(engine)
            choices = [WAIT]
            for job in list(view.pending)[:5]:
                for level in Level:
                    if view.can_place(job, level):
                        choices.append(Place(job.index, level))
            if self.rng.random() < 0.1:
                choices += [Preempt(j.index) for j in view.running]
            action = choices[self.rng.integers(len(choices))]
            if action is WAIT and not view.n_running and len(choices) > 1:
                action = choices[1]  # waiting on an idle cluster would stall
            return action

    checker = InvariantChecker()
    engine = Engine(trace, "seed64", lease_s=600.0, congestion="moderate")
    policy = Chaos()
    policy.reset(EngineView(engine), seed=0)
    run_policy(engine, policy)
    checker.finish(engine)
    assert engine.result().summary["preemptions"] > 0


def test_placement_history_matches_run_times():
    cluster = Cluster(3, 1, 2, toy_fabric())
    trace = make_trace(
        [
            ("B", 0.0, 3, "resnet18", 40.0, 0.5),
            ("C", 0.0, 3, "resnet18", 40.0, 0.5),
            ("A", 5.0, 1, "resnet18", 10.0, 2.0),
        ]
    )
    r = simulate(trace, cluster, Scripted(), restore_s_per_gpu=1.0)
    p = r.placements
    # C ran twice (before and after its preemption) on two servers each time
    assert len(p[p.job_id == "C"]) == 4 and len(p[p.job_id == "A"]) == 1
    held = (p.end_s - p.start_s) * p.gpus
    gpu_time = held.groupby(p.job_id).sum()
    for job_id, row in r.jobs.set_index("job_id").iterrows():
        assert gpu_time[job_id] == pytest.approx(row.gpu_time_s)
    first = p[(p.job_id == "C")].sort_values(["start_s", "server"]).iloc[0]
    assert (first.server, first.rack, first.gpus, first.start_s, first.end_s) == (
        1,
        1,
        1,
        0.0,
        10.0,
    )


def test_live_attained_and_efficiency_include_the_running_segment():
    cluster = Cluster(2, 1, 2, toy_fabric())
    trace = make_trace([("x", 0.0, 2, "resnet18", 1000.0, 0.5)])
    engine = Engine(trace, cluster)
    engine.place(0, Level.MACHINE)
    engine.wake_at(10.0)
    engine.advance()
    job = engine.jobs[0]
    view = EngineView(engine)
    assert job.attained == 0.0 and view.attained(job) == pytest.approx(20.0)
    # one server: only the tiny in-server ring, t_iter = 0.5 + e
    e = B / 1e15
    assert job.efficiency == 0.0
    assert view.efficiency(job) == pytest.approx(0.5 / (0.5 + e), rel=1e-12)
    # several at once, in order: a job that never ran counts 0
    never = Engine(trace, cluster).jobs[0]
    assert view.efficiencies([never, job, never]) == [0.0, view.efficiency(job), 0.0]


def _victims_by_placement(view, job, level, candidates):
    """The reference ``victims_for``: the packer itself on copies of the free
    GPUs after each prefix of victims (as it was before the counting rewrite)."""
    from ddl_gym.baselines.common import fits, free_after

    cluster = view.cluster
    chosen = []
    for victim in candidates:
        chosen.append(victim)
        total = view.total_free + sum(v.gpus for v in chosen)
        if total >= job.gpus and fits(cluster, free_after(view, chosen), job.gpus, level):
            break
    else:
        return None
    for victim in list(chosen[:-1]):
        rest = [v for v in chosen if v is not victim]
        if fits(cluster, free_after(view, rest), job.gpus, level):
            chosen = rest
    return chosen


def test_victims_for_matches_the_packer():
    """``victims_for`` decides "fits" by free counts per server, rack and
    cluster; on random packed clusters it picks exactly the victims the packer
    itself (``find_placement`` on copies) would, for every level and size."""
    import random

    from ddl_gym.baselines.common import victims_for

    rng = random.Random(11)
    for racks, S, G in ((3, 4, 8), (2, 2, 4), (4, 2, 2)):
        cluster = Cluster(racks, S, G, toy_fabric())
        sizes = [1, 1, 2, 3, G, G + 1, 2 * G, S * G, S * G + 1]
        for trial in range(12):
            rows = [
                (f"j{i}", 0.0, rng.choice(sizes[:-1]), "resnet18", 1000.0, 1.0)
                for i in range(3 * racks * S)
            ]
            engine = Engine(make_trace(rows), cluster)
            if not engine.pending:
                engine.advance()  # the arrivals
            view = EngineView(engine)
            for job in list(engine.pending):
                level = rng.choice(list(Level))
                if engine.placement_for(job, level) is not None:
                    engine.place(job.index, level)
            running = list(view.running)
            for gpus in sorted(set(sizes)):
                probe = next((j for j in engine.pending if j.gpus == gpus), None)
                if probe is None:
                    continue
                for level in Level:
                    order = running[:]
                    rng.shuffle(order)
                    want = _victims_by_placement(view, probe, level, order)
                    got = victims_for(view, probe, level, order)
                    assert (got is None) == (want is None), (trial, gpus, level)
                    if got is not None:
                        assert [v.index for v in got] == [v.index for v in want]


def test_a_wake_up_whose_test_says_no_makes_no_instant():
    """The hints' ``wake_matters``: at a wake-up with nothing else happening
    the engine calls it with ``now`` at that time; False drops the wake-up (no
    instant, no series row), True keeps it; an instant that holds another
    event (here an arrival) is made without asking it."""
    cluster = Cluster(2, 1, 2, toy_fabric())
    trace = make_trace(
        [("x", 0.0, 2, "resnet18", 1000.0, 0.5), ("y", 30.0, 1, "resnet18", 10.0, 0.5)]
    )
    engine = Engine(trace, cluster)
    engine.place(0, Level.MACHINE)
    seen: list[float] = []

    def matters() -> bool:
        seen.append(engine.now)
        return engine.now == 20.0

    engine.hint(LeaseHints(wake_matters=matters))
    for t in (10.0, 20.0, 30.0):
        engine.wake_at(t)
    instants = engine.instant
    rows = len(engine.series)
    engine.advance()  # 10 s is skipped: the first instant is at 20 s
    assert engine.now == 20.0 and engine.events_now == [("wake", -1)]
    assert seen == [10.0, 20.0]
    assert engine.instant == instants + 1 and len(engine.series) == rows + 1
    engine.advance()  # an arrival with the wake-up at 30 s: an instant, no test
    assert engine.now == 30.0 and engine.events_now == [("arrival", 1), ("wake", -1)]
    assert seen == [10.0, 20.0]
    engine.hint(LeaseHints())  # no test: every wake-up makes an instant
    engine.wake_at(40.0)
    engine.advance()
    assert engine.now == 40.0 and engine.events_now == [("wake", -1)]


@pytest.mark.parametrize("enabled_before", [True, False])
def test_run_policy_pauses_the_cyclic_gc_and_puts_it_back(enabled_before):
    # the collector is off inside the run, as it was after it; results do
    # not depend on it
    import gc

    from ddl_gym.baselines import make_policy

    from ddl_gym.engine import run_policy
    from ddl_gym.traces import synthetic_trace

    trace = synthetic_trace(n_jobs=60, seed=3)
    seen = []

    class Watch:
        def __init__(self):
            self.inner = make_policy("dally")

        def engine_kwargs(self):
            return self.inner.engine_kwargs()

        def reset(self, view, seed=None):
            self.inner.reset(view, seed=seed)

        def act(self, view):
            seen.append(gc.isenabled())
            return self.inner.act(view)

    summaries = []
    was = gc.isenabled()
    try:
        for pause in (True, False):
            (gc.enable if enabled_before else gc.disable)()
            policy = Watch()
            engine = Engine(trace, "seed64", **policy.engine_kwargs())
            policy.reset(EngineView(engine), seed=0)
            seen.clear()
            run_policy(engine, policy, pause_gc=pause)
            assert gc.isenabled() == enabled_before
            assert set(seen) == ({False} if pause else {enabled_before})
            summaries.append(engine.result().summary)
    finally:
        (gc.enable if was else gc.disable)()
    assert summaries[0] == summaries[1]


def test_result_frames_are_the_frames_pandas_makes_of_the_lists():
    """``build_result`` hands number columns to pandas as numpy arrays: the
    frame (values and dtypes) is the one pandas makes of the plain lists."""
    import pandas as pd

    from ddl_gym.engine.metrics import _frame

    columns = {
        "ints": [3, 1, 2],
        "floats": [0.5, float("nan"), 2.0],
        "mixed": [1, 2.5, 3],
        "strings": ["a", "b", "c"],
        "missing": [1.0, None, 2.0],
        "big": [2**70, 1, 2],
    }
    names = tuple(columns)
    got = _frame(columns, names)
    want = pd.DataFrame(columns, columns=list(names))
    pd.testing.assert_frame_equal(got, want)
    assert list(got.dtypes) == list(want.dtypes)
    empty = {name: [] for name in names}
    pd.testing.assert_frame_equal(_frame(empty, names), pd.DataFrame(empty, columns=list(names)))
