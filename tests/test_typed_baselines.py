"""The typed-cluster baselines (issue 53), by hand on tiny typed clusters:
gavel, tiresias-typed, gandiva-typed, dally-typed.

The cluster: 2 racks x 2 servers x 4 GPUs, rack 0 K80 (servers 0, 1), rack 1
V100 (servers 2, 3). ResNet-50 at 0.1 s per iteration (V100 time) runs 1,000
iterations on one 4-GPU server in 25 s on V100 and 1000 x 0.1 / 0.1588 / 4
= 157.43 s on K80 (no exposed communication inside a server on this fabric;
tests/test_typed_engine.py checks both)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from ddl_gym.baselines import (
    POLICY_NAMES,
    TYPED_NAMES,
    TYPED_PARENT,
    TiresiasPolicy,
    TypedDallyPolicy,
    make_policy,
)

from ddl_gym.engine import Engine, EngineView, PolicyEngineWarning, Wait, run_policy, simulate
from ddl_gym.perf import Level
from ddl_gym.topology import Cluster, GpuKind
from ddl_gym.traces import synthetic_trace
from tests.helpers import InvariantChecker

K80_RESNET50 = 0.1588  # Gavel-measured ResNet-50 K80/V100 throughput
ON_V100 = 1000 * 0.1 / 4  # 25 s
ON_K80 = 1000 * 0.1 / K80_RESNET50 / 4  # 157.43 s
LEASE = 20.0


def k80_v100() -> Cluster:
    return Cluster(
        2, 2, 4, gpu_kinds=(GpuKind("K80"), GpuKind("V100-16GB")), server_kind=(0, 0, 1, 1)
    )


def trace(rows: list[tuple], gpu_types: list[str] | None = None) -> pd.DataFrame:
    """Rows of (job_id, arrival_s, gpus, iterations), ResNet-50 at 0.1 s."""
    ids, arrivals, gpus, its = zip(*rows, strict=True)
    df = pd.DataFrame(
        {
            "job_id": list(ids),
            "arrival_s": [float(a) for a in arrivals],
            "gpus": list(gpus),
            "model": ["resnet50"] * len(rows),
            "iterations": [float(i) for i in its],
            "iter_time_s": [0.1] * len(rows),
        }
    )
    if gpu_types is not None:
        df["gpu_types"] = gpu_types
    return df


def rows(result) -> pd.DataFrame:
    return result.jobs.set_index("job_id")


LONG = 1e6  # iterations: outlives every scenario


# -- registry ------------------------------------------------------------------
def test_registry() -> None:
    assert set(TYPED_NAMES) == {"gavel", "tiresias-typed", "gandiva-typed", "dally-typed"}
    assert not set(TYPED_NAMES) & set(POLICY_NAMES)  # type-blind sets unchanged
    for name in TYPED_NAMES:
        policy = make_policy(name)
        assert policy.name == name
        assert policy.deterministic
        assert getattr(policy, "type_aware", False)  # no type-blind leniency in run_policy
    # dally-typed is auto-tuned Dally plus the type timer, with Dally's engine settings
    assert make_policy("dally-typed").engine_kwargs() == make_policy("dally").engine_kwargs()
    timed = make_policy("dally-typed", type_timer=2)
    assert isinstance(timed, TypedDallyPolicy) and timed.type_timer == 2
    with pytest.raises(ValueError, match="no reference version"):
        make_policy("dally-typed", reference=True)


# -- untyped clusters: the parents' results ------------------------------------
@pytest.mark.parametrize("name", sorted(TYPED_PARENT))
def test_untyped_equals_parent(name: str) -> None:
    tr = synthetic_trace(n_jobs=150, seed=3, arrival_rate_per_h=2000, max_gpus=16)
    cluster = Cluster(4, 4, 4)
    got = simulate(tr, cluster, make_policy(name))
    want = simulate(tr, cluster, make_policy(TYPED_PARENT[name]))
    pd.testing.assert_frame_equal(got.jobs, want.jobs)
    assert got.summary == want.summary


# -- the fast type free: taken (the engine's type-blind rule takes K80, listed first)
@pytest.mark.parametrize("name", ["tiresias-typed", "gandiva-typed", "dally-typed", "gavel"])
def test_fastest_type_when_free(name: str) -> None:
    r = rows(simulate(trace([("X", 0, 4, 1000)]), k80_v100(), make_policy(name)))
    assert r.loc["X", "gpu_type"] == "V100-16GB"
    assert r.loc["X", "end_s"] == pytest.approx(ON_V100)
    blind = rows(simulate(trace([("X", 0, 4, 1000)]), k80_v100(), make_policy("tiresias")))
    assert blind.loc["X", "gpu_type"] == "K80"
    assert blind.loc["X", "end_s"] == pytest.approx(ON_K80)


# -- the fast type busy ------------------------------------------------------------
def busy_v100(filler_iterations: float) -> pd.DataFrame:
    """Two 4-GPU fillers take both V100 servers at 0; X (4 GPUs, 1,000
    iterations) arrives at 1 with both K80 servers free."""
    return trace(
        [
            ("f0", 0, 4, filler_iterations),
            ("f1", 0, 4, LONG),
            ("X", 1, 4, 1000),
        ]
    )


@pytest.mark.parametrize("name", ["tiresias-typed", "gandiva-typed"])
def test_busy_fast_type_falls_back_to_slow(name: str) -> None:
    # never held back for a type: X starts at once on K80, 1 + 157.43 s,
    # although a V100 server frees at 40 s (f0: 1,600 iterations on V100)
    r = rows(simulate(busy_v100(1600), k80_v100(), make_policy(name)))
    assert list(r.loc[["f0", "f1"], "gpu_type"]) == ["V100-16GB", "V100-16GB"]
    assert r.loc["f0", "end_s"] == pytest.approx(40.0)
    assert r.loc["X", "gpu_type"] == "K80"
    assert r.loc["X", "end_s"] == pytest.approx(1 + ON_K80)


def test_dally_typed_waits_for_the_fast_type() -> None:
    # without preemption (layer 2 off): X waits for a V100 (type timer 6
    # leases = 120 s); f0 ends at 40 s, X takes its server: 40 + 25 = 65 s,
    # well before the 1 + 157.43 s it would end on K80 at once
    policy = make_policy("dally-typed", preempt=False)
    r = rows(simulate(busy_v100(1600), k80_v100(), policy))
    assert r.loc["X", "gpu_type"] == "V100-16GB"
    assert r.loc["X", "start_s"] == pytest.approx(40.0)
    assert r.loc["X", "end_s"] == pytest.approx(40.0 + ON_V100)


def test_dally_typed_takes_the_slow_type_when_its_timer_fires() -> None:
    # V100 stays busy: X takes K80 when its type timer fires, at
    # 1 + 6 x 20 = 121 s, and ends at 121 + 157.43 s; with a 2-lease timer
    # at 41 s
    for timer in (6.0, 2.0):
        policy = make_policy("dally-typed", preempt=False, type_timer=timer)
        r = rows(simulate(busy_v100(LONG), k80_v100(), policy))
        fires = 1 + timer * LEASE
        assert r.loc["X", "gpu_type"] == "K80"
        assert r.loc["X", "start_s"] == pytest.approx(fires)
        assert r.loc["X", "end_s"] == pytest.approx(fires + ON_K80)
    # type-blind Dally never waits for a type: the engine's rule put the
    # fillers on K80 (listed first), and X starts at once on what is free
    r = rows(simulate(busy_v100(LONG), k80_v100(), make_policy("dally", preempt=False)))
    assert list(r.loc[["f0", "f1"], "gpu_type"]) == ["K80", "K80"]
    assert r.loc["X", "start_s"] == pytest.approx(1.0)


def test_dally_typed_reoffer_wins_a_fast_server() -> None:
    # with layer 2: at the fillers' first lease end (20 s) X (efficiency 0)
    # challenges them (efficiency 1) for V100 GPUs only (its type timer has
    # not fired): one filler loses its server, X starts there at 20 s and
    # ends at 45 s; no K80 job is disturbed (there is none), nobody runs on K80
    r = rows(simulate(busy_v100(LONG), k80_v100(), make_policy("dally-typed")))
    assert r.loc["X", "gpu_type"] == "V100-16GB"
    assert r.loc["X", "start_s"] == pytest.approx(LEASE)
    assert r.loc["X", "end_s"] == pytest.approx(LEASE + ON_V100)
    assert r.loc[["f0", "f1"], "preemptions"].sum() == 1


# -- Tiresias' preemption on the right type -----------------------------------------
def test_tiresias_typed_preempts_on_the_waiting_jobs_type() -> None:
    # thresholds of 100 GPU-s: A and C (V100 only) and K (K80 only) are
    # demoted at 25 s. B (V100 only) arrives at 50 in the top queue: the worst
    # running job is K, but its K80 GPUs are no use to B; tiresias-typed
    # preempts C (the worst on V100): B runs 50..75 s. C restarts at 75 after
    # a 4 s restore with 50 s of its 25,000 s done: ends at 75 + 4 + 24,950.
    df = trace(
        [("A", 0, 4, LONG), ("C", 0, 4, LONG), ("K", 0, 4, LONG), ("B", 50, 4, 1000)],
        gpu_types=["V100-16GB", "V100-16GB", "K80", "V100-16GB"],
    )
    r = rows(simulate(df, k80_v100(), make_policy("tiresias-typed", thresholds_gpu_s=(100.0,))))
    assert r.loc["B", "start_s"] == 50.0
    assert r.loc["B", "end_s"] == pytest.approx(75.0)
    assert list(r["preemptions"]) == [0, 1, 0, 0]
    assert r.loc["C", "end_s"] == pytest.approx(75 + 4 + LONG * 0.025 - 50)
    # the type-blind parent also preempts K (it counts free GPUs of any type)
    blind = rows(simulate(df, k80_v100(), make_policy("tiresias", thresholds_gpu_s=(100.0,))))
    assert blind.loc["K", "preemptions"] == 1


# -- Gavel ------------------------------------------------------------------------------
def test_gavel_round_moves_a_job_to_the_fast_type() -> None:
    # rounds of 100 s. Round at 0: f0, f1 take both V100 servers. X arrives at
    # 1: between rounds nobody is preempted, X starts on K80 (work-conserving).
    # f0 ends at 40. Round at 100: X's rate (normalised service per GPU-second
    # in the system) is 0.1588, f1's 1: X goes first and takes a V100. X is
    # preempted on K80 after 99 s (99 x 4 x 0.1588 / 0.1 = 628.85 iterations
    # done) and restarts on V100 after a 4 s restore: ends at
    # 104 + (1000 - 628.85) x 0.025 = 113.28 s.
    r = rows(simulate(busy_v100(1600), k80_v100(), make_policy("gavel", round_s=100.0)))
    done = 99 * 4 * K80_RESNET50 / 0.1
    assert r.loc["X", "start_s"] == pytest.approx(1.0)
    assert r.loc["X", "preemptions"] == 1
    assert r.loc["X", "gpu_type"] == "V100-16GB"  # the type it finished on
    assert r.loc["X", "end_s"] == pytest.approx(104 + (1000 - done) * 0.1 / 4)
    assert r.loc["f1", "preemptions"] == 0  # f1 keeps its V100: both fit


def test_gavel_shares_the_fast_type_over_rounds() -> None:
    # one V100 server's worth of fast GPUs, three long 4-GPU jobs that all
    # accept both types (one K80 server idle would be a waste: 2 servers each)
    c = Cluster(1, 2, 4, gpu_kinds=(GpuKind("K80"), GpuKind("V100-16GB")), server_kind=(0, 1))
    df = trace([("a", 0, 4, LONG), ("b", 0, 4, LONG), ("c", 0, 4, LONG)])
    policy = make_policy("gavel", round_s=100.0)
    e = Engine(df, c, **policy.engine_kwargs())
    policy.reset(EngineView(e))
    on_v100: dict[str, int] = {"a": 0, "b": 0, "c": 0}
    view = EngineView(e)
    while e.now < 1000:
        while True:
            action = policy.act(view)
            if isinstance(action, Wait):
                break
            e.apply(action)
        for job in e.running.values():
            if job.kind == 1 and e.now % 100 == 0:
                on_v100[job.job_id] += 1
        e.advance()
    # a round at 0, 100, ..., 900: the V100 goes to the one furthest behind,
    # so every job has it in some rounds
    assert all(n >= 2 for n in on_v100.values()), on_v100


def two_servers(fast: str = "V100-16GB", slow: str = "K80") -> Cluster:
    """One rack: server 0 of type 0 (``slow``), server 1 of type 1 (``fast``)."""
    return Cluster(1, 2, 4, gpu_kinds=(GpuKind(slow), GpuKind(fast)), server_kind=(0, 1))


def test_gavel_never_moves_between_equally_fast_types() -> None:
    # V100-16GB (type 0) and V100-32GB (type 1): equal speed for ResNet-50.
    # f (400 iterations, 10 s) takes type 0 at 0 (ties to the first type); A
    # arrives at 1 and starts on type 1. f ends at 10. Round at 100: type 0 is
    # free and as fast as A's own, nobody waits: A stays (the old rule moved
    # it to type 0, the plan's tie-break, for nothing). A ends at 1 + 250 s.
    c = two_servers(fast="V100-32GB", slow="V100-16GB")
    df = trace([("f", 0, 4, 400), ("A", 1, 4, 10_000)])
    r = rows(simulate(df, c, make_policy("gavel", round_s=100.0)))
    assert r.loc["A", "gpu_type"] == "V100-32GB"
    assert list(r["preemptions"]) == [0, 0]
    assert r.loc["A", "end_s"] == pytest.approx(1 + 10_000 * 0.1 / 4)


def test_gavel_no_fairness_swap_when_nobody_waits() -> None:
    # a and b (4 GPUs each) arrive at 0: a (index 0) takes the V100, b the
    # K80. Round at 100: b's rate is 0.1588, a's 1, but nobody waits and no
    # V100 is free: nobody moves (the old rule swapped them, two preemptions
    # a round). b ends at 157.43 s, a at 10,000 x 0.1 / 4 = 250 s.
    df = trace([("a", 0, 4, 10_000), ("b", 0, 4, 1000)])
    r = rows(simulate(df, two_servers(), make_policy("gavel", round_s=100.0)))
    assert list(r["gpu_type"]) == ["V100-16GB", "K80"]
    assert list(r["preemptions"]) == [0, 0]
    assert r.loc["a", "end_s"] == pytest.approx(250.0)
    assert r.loc["b", "end_s"] == pytest.approx(ON_K80)


def test_gavel_waiting_job_with_less_service_takes_the_fast_type_at_the_round() -> None:
    # a (10,000 iterations) takes the V100, b (1,500) the K80 at 0; c (1,000)
    # arrives at 50 and waits: no free room, and nobody is preempted between
    # rounds. Round at 100, order by rate: c 0, b 0.1588, a 1. c fits no free
    # room, so the round is planned with displacement: c takes the V100 a
    # holds; b stays (the V100 is taken); a is displaced and sits out (no
    # free room). c runs 100 .. 125 on V100 (a new job: no restore); a (4,000
    # iterations done) restarts on the V100 at 125, when c ends, and ends at
    # 125 + 4 s restore + 6,000 x 0.1 / 4 = 279 s; the round at 200 moves
    # nobody (nobody waits). b ends at 1,500 x 0.1 / 0.1588 / 4 = 236.15 s.
    df = trace([("a", 0, 4, 10_000), ("b", 0, 4, 1500), ("c", 50, 4, 1000)])
    r = rows(simulate(df, two_servers(), make_policy("gavel", round_s=100.0)))
    assert r.loc["c", "start_s"] == pytest.approx(100.0)
    assert r.loc["c", "end_s"] == pytest.approx(100.0 + ON_V100)
    assert r.loc["c", "gpu_type"] == "V100-16GB"
    assert r.loc["a", "preemptions"] == 1
    assert r.loc["a", "end_s"] == pytest.approx(279.0)
    assert r.loc["b", "preemptions"] == 0
    assert r.loc["b", "end_s"] == pytest.approx(1.5 * ON_K80)


@pytest.mark.parametrize("restore", [20.0, 21.0])
def test_gavel_move_pays_for_its_restore_over_the_round(restore: float) -> None:
    # busy_v100(1600): X runs on K80 from 1; a V100 server is free from 40.
    # Round at 100 (R = 100 s): X (4 GPUs) moves if (R - 4 x restore) x 1 >=
    # 1.1 x R x 0.1588 = 17.47: restore 20 s/GPU (pause 80 s): 20 >= 17.47,
    # X moves and ends at 100 + 80 + (1000 - done) x 0.025; restore 21 s/GPU
    # (pause 84 s): 16 < 17.47, X stays on K80 and ends at 1 + 157.43 s.
    policy = make_policy("gavel", round_s=100.0)
    with pytest.warns(PolicyEngineWarning, match="restore_s_per_gpu"):  # not gavel's 1 s
        r = rows(simulate(busy_v100(1600), k80_v100(), policy, restore_s_per_gpu=restore))
    done = 99 * 4 * K80_RESNET50 / 0.1
    if restore == 20.0:
        assert r.loc["X", "preemptions"] == 1
        assert r.loc["X", "end_s"] == pytest.approx(180 + (1000 - done) * 0.1 / 4)
    else:
        assert r.loc["X", "preemptions"] == 0
        assert r.loc["X", "gpu_type"] == "K80"
        assert r.loc["X", "end_s"] == pytest.approx(1 + ON_K80)


def test_gavel_move_margin_must_be_non_negative() -> None:
    with pytest.raises(ValueError, match="move_margin"):
        make_policy("gavel", move_margin=-0.1)


# -- invariants on random typed traces -------------------------------------------------
def random_typed(seed: int, n: int = 50) -> tuple[pd.DataFrame, Cluster]:
    rng = np.random.default_rng(seed)
    c = Cluster(
        2,
        2,
        4,
        gpu_kinds=(GpuKind("K80"), GpuKind("P100"), GpuKind("V100-16GB")),
        server_kind=(0, 1, 2, 2),
    )
    specs = ["", "K80", "P100|V100-16GB", "V100-16GB", "K80|P100"]
    df = pd.DataFrame(
        {
            "job_id": [f"j{i}" for i in range(n)],
            "arrival_s": np.sort(rng.uniform(0, 600, n)),
            "gpus": rng.choice([1, 2, 4], n),
            "model": rng.choice(["resnet50", "vgg11", "transformer", "resnet18"], n),
            "iterations": rng.uniform(100, 3000, n),
            "iter_time_s": rng.uniform(0.05, 0.2, n),
            "gpu_types": rng.choice(specs, n),
        }
    )
    return df, c


@pytest.mark.parametrize("name", TYPED_NAMES)
@pytest.mark.parametrize("seed", [1, 2])
def test_accepted_types_only_and_every_job_completes(name: str, seed: int) -> None:
    df, c = random_typed(seed)
    res = simulate(df, c, make_policy(name))
    kind_of = {s: c.type_names[k] for s, k in enumerate(c.server_kind)}
    accepted = {
        str(row.job_id): set(str(row.gpu_types).split("|")) if row.gpu_types else set(c.type_names)
        for row in df.itertuples()
    }
    assert len(res.placements) > 0
    pl = res.placements
    for job_id, server in zip(pl["job_id"].tolist(), pl["server"].tolist(), strict=True):
        assert kind_of[server] in accepted[job_id], (job_id, server)
    assert res.summary["completed"] == len(df)
    assert res.summary.get("deferred_places", 0) == 0
    total = sum(res.summary[f"gpu_h_{t}"] for t in c.type_names)
    assert total == pytest.approx(res.jobs["gpu_time_s"].sum() / 3600)
    # same seed, same result
    again = simulate(df, c, make_policy(name))
    pd.testing.assert_frame_equal(res.jobs, again.jobs)


# -- Gandiva's migration stays on the job's type -----------------------------------------
def test_gandiva_typed_migrates_within_its_type() -> None:
    # a and b (3 GPUs each, V100 only) take one V100 server each, one GPU
    # left on each. X (2 GPUs, any type) arrives at 1: the fastest type that
    # fits is V100, across its two servers (one rack), though a K80 server
    # is empty. b ends at 900 x 0.1 / 3 = 30 s: X moves to one V100 server
    # (a strictly tighter level on its own type), not to the empty K80
    # servers, where the engine's type-blind rule (tightest level, K80 listed
    # first) would put it.
    df = trace(
        [("a", 0, 3, LONG), ("b", 0, 3, 900), ("X", 1, 2, 20000)],
        gpu_types=["V100-16GB", "V100-16GB", ""],
    )
    res = simulate(df, k80_v100(), make_policy("gandiva-typed"))
    r = rows(res)
    assert r.loc["b", "end_s"] == pytest.approx(30.0)
    assert r.loc["X", "preemptions"] == 1
    assert r.loc["X", "gpu_type"] == "V100-16GB"
    pl = res.placements[res.placements["job_id"] == "X"].sort_values(["start_s", "server"])
    first = pl[pl["start_s"] == 1.0]
    second = pl[pl["start_s"] > 1.0]
    assert sorted(first["server"]) == [2, 3] and list(first["gpus"]) == [1, 1]
    assert list(second["server"]) == [3] and list(second["gpus"]) == [2]
    assert second["start_s"].iloc[0] == pytest.approx(r.loc["b", "end_s"])


# -- engine invariants at every decision, on one type or mixed ---------------------------
class TypeChecked:
    """Wraps a policy: the engine's invariants and every running job on one
    type it accepts (or, mixing allowed, on types it accepts) at each call."""

    def __init__(self, policy, engine: Engine) -> None:
        self.policy, self.engine = policy, engine
        self.checker = InvariantChecker()

    def reset(self, view, seed=None):
        self.policy.reset(view, seed=seed)

    def act(self, view):
        e = self.engine
        self.checker.check(e)
        kinds = e.cluster.server_kind
        for job in e.running.values():
            on = {kinds[s] for s, _ in job.placement}
            assert on <= set(job.accepts), (job.job_id, on, job.accepts)
            assert len(on) == 1 or e.cluster.mix_types
        return self.policy.act(view)


@pytest.mark.parametrize("mix", [False, True])
@pytest.mark.parametrize("name", TYPED_NAMES)
def test_invariants_at_every_decision(name: str, mix: bool) -> None:
    df, c = random_typed(3, n=80)
    if mix:
        # three 4-GPU servers of different types in one rack, mixing allowed:
        # 8-GPU jobs that accept any type must span types
        c = Cluster(
            1,
            3,
            4,
            gpu_kinds=(GpuKind("K80"), GpuKind("P100"), GpuKind("V100-16GB")),
            server_kind=(0, 1, 2),
            mix_types=True,
        )
        df.loc[df.index[::7], ["gpus", "gpu_types"]] = [8, ""]
    policy = make_policy(name)
    engine = Engine(df, c, **policy.engine_kwargs())
    checked = TypeChecked(policy, engine)
    checked.reset(EngineView(engine), seed=0)
    run_policy(engine, checked)
    checked.checker.finish(engine)
    if mix:
        assert "mixed" in set(engine.result().jobs["gpu_type"])


# -- the typed code paths on one type: the parents' decisions ---------------------------
@pytest.mark.parametrize("name", sorted(TYPED_PARENT))
def test_one_type_cluster_equals_parent_on_untyped(name: str) -> None:
    # a typed cluster of one type at V100 speed runs the typed passes (typed
    # re-offer, victims on a type, moves within a type, classes by accepted
    # types) on the same GPUs as the untyped cluster: same decisions, bit for
    # bit, preemptions and migrations included
    tr = synthetic_trace(n_jobs=200, seed=0, arrival_rate_per_h=1500, max_gpus=16)
    one = Cluster(4, 4, 4, gpu_kinds=(GpuKind("V100-16GB"),), server_kind=(0,) * 16)
    got = simulate(tr, one, make_policy(name)).jobs
    want = simulate(tr, Cluster(4, 4, 4), make_policy(TYPED_PARENT[name])).jobs
    assert set(got["gpu_type"]) == {"V100-16GB"}
    pd.testing.assert_frame_equal(got.drop(columns=["gpu_type"]), want)
    assert want["preemptions"].sum() > 0


def test_equally_fast_types_take_the_tightest_placement() -> None:
    # one rack: two V100-16GB servers with 3 GPUs busy each, one V100-32GB
    # server free (same speed). X (2 GPUs) fits the 16GB type only across
    # two servers, the 32GB type on one: speed ties, locality decides (on
    # V100 one server runs 1,000 iterations on 2 GPUs in 50 s)
    c = Cluster(
        1,
        3,
        4,
        gpu_kinds=(GpuKind("V100-16GB"), GpuKind("V100-32GB")),
        server_kind=(0, 0, 1),
    )
    df = trace(
        [("f0", 0, 3, LONG), ("f1", 0, 3, LONG), ("X", 1, 2, 1000)],
        gpu_types=["V100-16GB", "V100-16GB", ""],
    )
    for name in ("tiresias-typed", "gandiva-typed", "dally-typed"):
        res = simulate(df, c, make_policy(name))
        pl = res.placements
        assert sorted(pl[pl["job_id"] != "X"]["server"]) == [0, 1], name
        assert list(pl[pl["job_id"] == "X"]["server"]) == [2], name
        assert rows(res).loc["X", "end_s"] == pytest.approx(1 + 1000 * 0.1 / 2), name


@pytest.mark.parametrize("mix", [False, True])
def test_dally_typed_lease_hints_skip_only_idle_boundaries(mix: bool) -> None:
    # Dally's lease hints count free GPUs of every type (more than a typed
    # job may use): lazy leases must then give the results of eager ones
    import warnings

    from ddl_gym.engine.simulate import PolicyEngineWarning

    df, c = random_typed(4, n=120)
    if mix:
        c = Cluster(
            1,
            4,
            4,
            gpu_kinds=(GpuKind("K80"), GpuKind("P100"), GpuKind("V100-16GB")),
            server_kind=(0, 1, 2, 2),
            mix_types=True,
        )
    for kw in ({}, {"auto_tune": False, "type_timer": 1.0}):
        lazy = simulate(df, c, make_policy("dally-typed", **kw))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PolicyEngineWarning)
            eager = simulate(df, c, make_policy("dally-typed", **kw), lazy_leases=False)
        pd.testing.assert_frame_equal(lazy.jobs, eager.jobs)
        assert lazy.jobs["preemptions"].sum() > 0


# -- tiresias-typed's victim search against a plain dry run ---------------------------
def plain_victims(view, job, level, k: int, candidates) -> list | None:
    """The rule of ``victims_on_types`` for one type, written plainly: the
    free GPUs of type ``k`` copied, victims on ``k`` added from the front
    until the packer places the job there, unneeded ones dropped front to
    back (``victims_for``'s rule)."""
    from ddl_gym.baselines.common import placement_on

    kinds = view.cluster.server_kind
    base = [f if kinds[s] == k else 0 for s, f in enumerate(view.free_per_server)]

    def fits(released) -> bool:
        trial = list(base)
        for v in released:
            for server, g in v.placement:
                trial[server] += g
        return placement_on(view.cluster, trial, job.gpus, level) is not None

    chosen = []
    for victim in candidates:
        if victim.kind == k:
            chosen.append(victim)
            if fits(chosen):
                break
    else:
        return None
    for victim in list(chosen[:-1]):
        rest = [v for v in chosen if v is not victim]
        if fits(rest):
            chosen = rest
    return chosen


class VictimsChecked:
    """Wraps tiresias-typed: at each call, for every waiting job that fits
    on none of its types, ``victims_on_types`` equals the plain dry run tried
    type by type (counts how many such searches found victims)."""

    def __init__(self, policy) -> None:
        self.policy = policy
        self.searches = self.found = 0

    def reset(self, view, seed=None):
        self.policy.reset(view, seed=seed)

    def act(self, view):
        from ddl_gym.baselines.typed import fastest_fitting, victims_on_types

        p = self.policy
        if view.pending and view.cluster.typed:
            p._sync_running(view)
            worse = p._worse_than(view)
            for job in view.pending:
                level = p.level_of(view, job)
                order = p._types(view, job)
                if fastest_fitting(view, job, level, order) is not None:
                    continue
                pkey = (p.key(view, job), job.index)
                got = victims_on_types(view, job, level, order, worse(pkey))
                want = None
                for k in order:
                    plain = plain_victims(view, job, level, k, worse(pkey))
                    if plain is not None:
                        want = (k, plain)
                        break
                self.searches += 1
                self.found += want is not None
                assert (got is None) == (want is None), job.job_id
                if got is not None and want is not None:
                    assert got[0] == want[0]
                    assert [v.index for v in got[1]] == [v.index for v in want[1]]
        return p.act(view)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tiresias_typed_victims_equal_plain_dry_run(seed: int) -> None:
    # mixed racks (a rack holds servers of two types), 1-16 GPU jobs with
    # consolidation-sensitive models (rack level) and accepted-type sets
    rng = np.random.default_rng(seed)
    c = Cluster(
        2,
        4,
        4,
        gpu_kinds=(GpuKind("K80"), GpuKind("P100"), GpuKind("V100-16GB")),
        server_kind=(0, 2, 0, 2, 1, 2, 1, 2),
    )
    tr = synthetic_trace(n_jobs=120, seed=seed, arrival_rate_per_h=4000, max_gpus=8).jobs.copy()
    tr["gpu_types"] = rng.choice(["", "", "K80|P100", "V100-16GB", "P100|V100-16GB"], len(tr))
    checked = VictimsChecked(make_policy("tiresias-typed"))
    engine = Engine(tr, c, **checked.policy.engine_kwargs())
    checked.reset(EngineView(engine), seed=0)
    run_policy(engine, checked)
    assert checked.found > 0 and checked.searches > checked.found


# -- a job larger than every rack (server) of its types -------------------------------
def split_v100() -> Cluster:
    # 2 racks x 2 servers x 4 GPUs, each rack one K80 and one V100 server:
    # the 8 V100s are split over the two racks (4 per rack)
    return Cluster(
        2, 2, 4, gpu_kinds=(GpuKind("K80"), GpuKind("V100-16GB")), server_kind=(0, 1, 0, 1)
    )


def small_v100_servers() -> Cluster:
    # one rack: a 4-GPU K80 server and two 2-GPU V100 servers
    return Cluster(
        1,
        3,
        4,
        gpu_kinds=(GpuKind("K80"), GpuKind("V100-16GB")),
        server_kind=(0, 1, 1),
        server_gpus=(4, 2, 2),
    )


@pytest.mark.parametrize("name", TYPED_NAMES)
def test_job_larger_than_every_rack_of_its_type_runs_across_racks(name: str) -> None:
    # X (8 GPUs, V100 only, ResNet-18: consolidation-sensitive for Tiresias,
    # so rack level; a rack-sized job for Dally, so rack level until its
    # network timer) fits no rack's V100s: as the parents' job larger than
    # any rack, it goes across racks at once, on servers 1 and 3, at its
    # arrival (the cluster is empty). Before, tiresias-typed waited for a
    # rack forever (StalledError) and dally-typed for its network timer.
    # k (4 GPUs, K80 only) runs meanwhile on a K80 server.
    c = split_v100()
    df = trace([("X", 0, 8, 1000), ("k", 0, 4, 1000)], gpu_types=["V100-16GB", "K80"])
    df.loc[0, "model"] = "resnet18"
    if name == "tiresias-typed":
        engine = Engine(df, c)
        view = EngineView(engine)
        parent = TiresiasPolicy()
        parent.reset(view, seed=0)
        assert parent.level_of(view, engine.jobs[0]) == Level.RACK  # the case of the bug
    res = simulate(df, c, make_policy(name))
    assert res.summary["completed"] == 2
    r = rows(res)
    assert r.loc["X", "gpu_type"] == "V100-16GB" and r.loc["k", "gpu_type"] == "K80"
    assert r.loc["X", "preemptions"] == 0
    pl = res.placements[res.placements["job_id"] == "X"]
    assert sorted(pl["server"]) == [1, 3] and list(pl["gpus"]) == [4, 4]
    assert list(pl["start_s"]) == [0.0, 0.0]


@pytest.mark.parametrize("name", TYPED_NAMES)
def test_job_larger_than_every_server_of_its_type_takes_a_rack(name: str) -> None:
    # Y (4 GPUs, V100 only) fits one server's GPUs by the cluster's size but
    # no V100 server (2 GPUs each): dally-typed lets it take a rack at once
    # (both V100 servers) as Dally's job larger than a server, instead of
    # waiting for its rack timer; every policy starts it at its arrival
    df = trace([("Y", 0, 4, 1000)], gpu_types=["V100-16GB"])
    res = simulate(df, small_v100_servers(), make_policy(name))
    assert res.summary["completed"] == 1
    pl = res.placements
    assert sorted(pl["server"]) == [1, 2] and list(pl["gpus"]) == [2, 2]
    assert list(pl["start_s"]) == [0.0, 0.0]


def test_type_size_level_reads_racks_and_servers_of_the_accepted_types() -> None:
    from ddl_gym.baselines.typed import type_size_level

    c = split_v100()
    assert type_size_level(c, (1,), 4) == Level.MACHINE
    assert type_size_level(c, (1,), 8) == Level.NETWORK  # 4 V100s per rack
    assert type_size_level(c, (0, 1), 8) == Level.NETWORK  # one type per placement
    mixable = Cluster(2, 2, 4, gpu_kinds=c.gpu_kinds, server_kind=c.server_kind, mix_types=True)
    assert type_size_level(mixable, (0, 1), 8) == Level.RACK  # a rack's K80s and V100s
    assert type_size_level(mixable, (1,), 8) == Level.NETWORK
    small = small_v100_servers()
    assert type_size_level(small, (1,), 2) == Level.MACHINE
    assert type_size_level(small, (1,), 4) == Level.RACK  # no 4-GPU V100 server
    assert type_size_level(small, (0, 1), 4) == Level.MACHINE  # the K80 server


# -- tiresias-typed's preemption on a mix_types cluster: over the union of the types ------
def mixable_k80_v100() -> Cluster:
    # 2 racks x 2 servers x 4 GPUs, each rack one K80 server and one V100
    # server (servers 0, 2 K80; 1, 3 V100), mixed placements allowed
    return Cluster(
        2,
        2,
        4,
        gpu_kinds=(GpuKind("K80"), GpuKind("V100-16GB")),
        server_kind=(0, 1, 0, 1),
        mix_types=True,
    )


def filled_then_x(kinds: list[str], x_types: str) -> pd.DataFrame:
    """One 4-GPU filler per server, pinned to its server's type (``kinds``,
    in server order: they take servers 0, 1, ... at 0), and X (8 GPUs,
    ResNet-18: consolidation-sensitive, so rack level) arriving at 1000 s.
    By then every filler has 4 x 1000 s > 1 GPU-hour of service (Tiresias'
    second queue) and X none: X is better than all of them, and among the
    fillers (same queue, same arrival) the later index is the worse."""
    n = len(kinds)
    df = trace(
        [(f"f{i}", 0, 4, LONG) for i in range(n)] + [("X", 1000, 8, 1000)],
        gpu_types=[*kinds, x_types],
    )
    df.loc[n, "model"] = "resnet18"
    return df


def started(res, job_id: str) -> tuple[float, list[int]]:
    pl = res.placements[res.placements["job_id"] == job_id]
    first = pl[pl["start_s"] == pl["start_s"].min()]
    return float(first["start_s"].iloc[0]), sorted(first["server"])


def test_tiresias_typed_mixable_every_type_uses_the_parents_search() -> None:
    # X accepts both types: no rack holds 8 GPUs of one type, so one type at
    # a time (before) found no victims and X waited until f3 ended (25,000 s).
    # The parent's search over the whole cluster, worst first: f3 (server 3,
    # rack 1: 4 GPUs there), then f2 (server 2, rack 1: 8): both preempted
    # at 1000 s, X starts there at once, over both types (mixed); f0 and f1
    # (rack 0) are never preempted.
    res = simulate(
        filled_then_x(["K80", "V100-16GB", "K80", "V100-16GB"], ""),
        mixable_k80_v100(),
        make_policy("tiresias-typed"),
    )
    r = rows(res)
    assert started(res, "X") == (1000.0, [2, 3])
    assert r.loc["X", "gpu_type"] == "mixed"
    assert list(r.loc[["f0", "f1", "f2", "f3"], "preemptions"]) == [0, 0, 1, 1]
    assert res.summary["completed"] == 5


def test_tiresias_typed_mixable_subset_searches_the_union_of_its_types() -> None:
    # 2 racks x 3 servers: K80, P100, V100 in each (servers 0-2, 3-5). X
    # accepts K80 and V100: each rack holds 8 of them together, 4 of each.
    # Victims over the union, worst first: f5 (V100, rack 1: 4 GPUs there),
    # f4 (P100: frees nothing X may use, passed over), f3 (K80, rack 1: 8).
    # f5 and f3 are preempted at 1000 s and X starts on servers 3 and 5; the
    # P100 fillers keep running. One type at a time found none (4 per rack).
    c = Cluster(
        2,
        3,
        4,
        gpu_kinds=(GpuKind("K80"), GpuKind("P100"), GpuKind("V100-16GB")),
        server_kind=(0, 1, 2, 0, 1, 2),
        mix_types=True,
    )
    kinds = ["K80", "P100", "V100-16GB"] * 2
    res = simulate(filled_then_x(kinds, "K80|V100-16GB"), c, make_policy("tiresias-typed"))
    r = rows(res)
    assert started(res, "X") == (1000.0, [3, 5])
    assert r.loc["X", "gpu_type"] == "mixed"
    assert [r.loc[f"f{i}", "preemptions"] for i in range(6)] == [0, 0, 0, 1, 0, 1]


def test_victims_on_union_in_one_call() -> None:
    # the state of the test above at 1000 s, asked directly: both victims
    # (f5, then f3) in one search, in the order given; the P100 filler
    # passed over; none at machine level (8 > a server)
    from ddl_gym.baselines.typed import victims_on_types, victims_on_union

    c = Cluster(
        2,
        3,
        4,
        gpu_kinds=(GpuKind("K80"), GpuKind("P100"), GpuKind("V100-16GB")),
        server_kind=(0, 1, 2, 0, 1, 2),
        mix_types=True,
    )
    df = filled_then_x(["K80", "P100", "V100-16GB"] * 2, "K80|V100-16GB")
    engine = Engine(df, c)
    view = EngineView(engine)
    engine.advance()  # the fillers' arrivals at 0
    for i in range(6):
        engine.place(i, Level.MACHINE, c.server_kind[i])
    jobs = {j.job_id: j for j in engine.jobs}
    worst_first = [jobs[f"f{i}"] for i in (5, 4, 3, 2, 1, 0)]
    x = jobs["X"]
    got = victims_on_union(view, x, Level.RACK, x.accepts, worst_first)
    assert got is not None and [v.job_id for v in got] == ["f5", "f3"]
    assert victims_on_union(view, x, Level.NETWORK, x.accepts, worst_first) is not None
    assert victims_on_union(view, x, Level.MACHINE, x.accepts, worst_first) is None
    assert victims_on_types(view, x, Level.RACK, (2, 0), worst_first) is None


def plain_union_victims(view, job, level, candidates) -> list | None:
    """The rule of ``victims_on_union``, written plainly: the free GPUs of
    the job's accepted types copied, victims' GPUs on those types added from
    the front (victims with none there passed over) until the packer places
    the job on them, unneeded ones dropped front to back."""
    from ddl_gym.baselines.common import placement_on

    kinds = view.cluster.server_kind
    ok = set(job.accepts)
    base = [f if kinds[s] in ok else 0 for s, f in enumerate(view.free_per_server)]

    def fits(released) -> bool:
        trial = list(base)
        for v in released:
            for server, g in v.placement:
                if kinds[server] in ok:
                    trial[server] += g
        return placement_on(view.cluster, trial, job.gpus, level) is not None

    chosen = []
    for victim in candidates:
        if any(kinds[s] in ok for s, _ in victim.placement):
            chosen.append(victim)
            if fits(chosen):
                break
    else:
        return None
    for victim in list(chosen[:-1]):
        rest = [v for v in chosen if v is not victim]
        if fits(rest):
            chosen = rest
    return chosen


class UnionVictimsChecked:
    """Wraps tiresias-typed on a mix_types cluster: at each call, for every
    waiting job that fits nowhere, ``victims_on_union`` equals the plain dry
    run (counts the searches and those that found victims)."""

    def __init__(self, policy) -> None:
        self.policy = policy
        self.searches = self.found = 0

    def reset(self, view, seed=None):
        self.policy.reset(view, seed=seed)

    def act(self, view):
        from ddl_gym.baselines.typed import fastest_fitting, victims_on_union

        p = self.policy
        if view.pending:
            p._sync_running(view)
            worse = p._worse_than(view)
            for job in view.pending:
                level = p.level_of(view, job)
                if fastest_fitting(view, job, level, p._types(view, job)) is not None:
                    continue
                pkey = (p.key(view, job), job.index)
                got = victims_on_union(view, job, level, job.accepts, worse(pkey))
                want = plain_union_victims(view, job, level, worse(pkey))
                self.searches += 1
                self.found += want is not None
                assert (got is None) == (want is None), job.job_id
                if got is not None and want is not None:
                    assert [v.index for v in got] == [v.index for v in want]
        return p.act(view)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tiresias_typed_union_victims_equal_plain_dry_run(seed: int) -> None:
    # mixed racks, mixing allowed, 1-16 GPU jobs (some larger than a rack's
    # GPUs of one type), consolidation-sensitive models, accepted-type sets
    rng = np.random.default_rng(seed)
    c = Cluster(
        2,
        4,
        4,
        gpu_kinds=(GpuKind("K80"), GpuKind("P100"), GpuKind("V100-16GB")),
        server_kind=(0, 2, 0, 2, 1, 2, 1, 2),
        mix_types=True,
    )
    tr = synthetic_trace(n_jobs=120, seed=seed, arrival_rate_per_h=4000, max_gpus=16).jobs.copy()
    tr["gpu_types"] = rng.choice(["", "K80|P100", "V100-16GB", "P100|V100-16GB"], len(tr))
    checked = UnionVictimsChecked(make_policy("tiresias-typed"))
    engine = Engine(tr, c, **checked.policy.engine_kwargs())
    checked.reset(EngineView(engine), seed=0)
    run_policy(engine, checked)
    assert checked.found > 0 and checked.searches > checked.found
    assert engine.result().summary["completed"] == len(tr)
