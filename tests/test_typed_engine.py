"""The engine on typed clusters (engine/typed.py), by hand on tiny cases."""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd
import pytest

from ddl_gym.engine import Engine
from ddl_gym.engine.actions import InvalidAction, Place
from ddl_gym.perf import Level, PerfModel, shape_of
from ddl_gym.topology import Cluster, GpuKind, Link
from ddl_gym.traces import TraceError
from ddl_gym.type_speed import relative_speed, speed_source

K80_RESNET50 = 0.1588  # Gavel-measured ResNet-50 (batch 32) K80/V100 throughput


def trace(*rows: tuple, **extra: list) -> pd.DataFrame:
    """Jobs (id, gpus, model, iterations, iter_time_s), all arriving at 0."""
    ids, gpus, models, its, tis = zip(*rows, strict=True)
    df = pd.DataFrame(
        {
            "job_id": list(ids),
            "arrival_s": [0.0] * len(rows),
            "gpus": list(gpus),
            "model": list(models),
            "iterations": [float(x) for x in its],
            "iter_time_s": [float(x) for x in tis],
        }
    )
    for name, values in extra.items():
        df[name] = values
    return df


def k80_v100(**kw) -> Cluster:
    """2 racks x 2 servers x 4 GPUs: rack 0 K80, rack 1 V100."""
    return Cluster(
        2,
        2,
        4,
        "seed",
        gpu_kinds=(GpuKind("K80"), GpuKind("V100-16GB")),
        server_kind=(0, 0, 1, 1),
        **kw,
    )


def run_all(engine: Engine) -> None:
    while engine.advance():
        pass


def test_iteration_time_on_each_type() -> None:
    # resnet50, 1,000 iterations of 0.1 s (V100 time) on one server of 4 GPUs:
    # 25 s on V100; on K80 the compute time is 0.1 / 0.1588 per iteration
    df = trace(("v", 4, "resnet50", 1000, 0.1), ("k", 4, "resnet50", 1000, 0.1))
    e = Engine(df, k80_v100())
    e.place(0, Level.MACHINE, gpu_type=1)
    e.place(1, Level.MACHINE, gpu_type=0)
    v, k = e.jobs
    assert v.placement[0][0] in (2, 3) and k.placement[0][0] in (0, 1)
    pm = PerfModel(e.cluster)
    shape = shape_of(v.placement, 2)
    for job, tc in ((v, 0.1), (k, 0.1 / K80_RESNET50)):
        exposed = pm.exposed_comm("resnet50", tc, pm.allreduce_time("resnet50", shape))
        assert job.t_iter == pytest.approx(tc + exposed, rel=1e-12)
    run_all(e)
    res = e.result()
    ends = dict(zip(res.jobs["job_id"], res.jobs["end_s"], strict=True))
    assert ends["v"] == pytest.approx(1000 * v.t_iter / 4, rel=1e-12)
    assert ends["k"] == pytest.approx(1000 * k.t_iter / 4, rel=1e-12)
    assert list(res.jobs["gpu_type"]) == ["V100-16GB", "K80"]
    # GPU-hours per type add up to the jobs' GPU time
    assert res.summary["gpu_h_V100-16GB"] == pytest.approx(4 * ends["v"] / 3600)
    assert res.summary["gpu_h_K80"] == pytest.approx(4 * ends["k"] / 3600)
    assert res.summary["gpu_h_K80"] + res.summary["gpu_h_V100-16GB"] == pytest.approx(
        res.jobs["gpu_time_s"].sum() / 3600
    )


def test_mixed_placement_runs_at_the_slowest_member() -> None:
    # one rack of a K80 and a V100 server, mixing allowed: an 8-GPU job
    # spans both and computes at K80 speed
    c = Cluster(
        1,
        2,
        4,
        "seed",
        gpu_kinds=(GpuKind("K80"), GpuKind("V100-16GB")),
        server_kind=(0, 1),
        mix_types=True,
    )
    df = trace(("m", 8, "alexnet", 100, 0.05))
    e = Engine(df, c)
    e.place(0, Level.RACK)
    job = e.jobs[0]
    assert job.kind == -1
    tc = 0.05 / relative_speed("alexnet", "K80")
    pm = PerfModel(c)
    ar = pm.allreduce_time("alexnet", shape_of(job.placement, 2))
    assert job.t_iter == pytest.approx(tc + pm.exposed_comm("alexnet", tc, ar), rel=1e-12)
    run_all(e)
    assert e.result().jobs["gpu_type"].tolist() == ["mixed"]


def test_without_mixing_a_job_never_spans_types() -> None:
    c = Cluster(
        1, 2, 4, "seed", gpu_kinds=(GpuKind("K80"), GpuKind("V100-16GB")), server_kind=(0, 1)
    )
    with pytest.raises(TraceError, match="row 1.*'gpus'.*hold only 4"):
        Engine(trace(("m", 8, "alexnet", 100, 0.05)), c)


def test_a_types_gpu_link_sets_its_all_reduce() -> None:
    slow = Link(1e9, 5e-6)
    c = k80_v100()
    c_slow = replace(c, gpu_kinds=(GpuKind("K80"), GpuKind("V100-16GB", gpu_link=slow)))
    df = trace(("j", 4, "vgg11", 100, 0.1))
    times = []
    for cluster in (c, c_slow):
        e = Engine(df, cluster)
        e.place(0, Level.MACHINE, gpu_type=1)
        times.append(e.jobs[0].t_iter)
    pm = PerfModel(replace(c, fabric=replace(c.fabric, gpu_link=slow)))
    shape = shape_of(((2, 4),), 2)
    ar = pm.allreduce_time("vgg11", shape)
    assert times[1] == pytest.approx(0.1 + pm.exposed_comm("vgg11", 0.1, ar), rel=1e-12)
    assert times[1] > times[0]


def test_accepted_types_and_memory() -> None:
    c = Cluster(
        1,
        3,
        4,
        "seed",
        gpu_kinds=(GpuKind("K80"), GpuKind("V100-16GB"), GpuKind("V100-32GB")),
        server_kind=(0, 1, 2),
    )
    df = trace(
        ("any", 1, "resnet50", 10, 0.1),
        ("v100", 1, "resnet50", 10, 0.1),
        ("big", 1, "resnet50", 10, 0.1),
        gpu_types=["", "V100M16|V100-32GB", ""],
        gpu_mem_gib=[float("nan"), float("nan"), 20.0],
    )
    e = Engine(df, c)
    assert [j.accepts for j in e.jobs] == [(0, 1, 2), (1, 2), (2,)]
    with pytest.raises(InvalidAction, match="does not accept GPU type K80"):
        e.apply(Place(1, Level.MACHINE, gpu_type=0))
    with pytest.raises(InvalidAction, match="unknown GPU type index 5"):
        e.apply(Place(1, Level.MACHINE, gpu_type=5))
    assert e.check(Place(2, Level.MACHINE, gpu_type=1)) is not None
    e.apply(Place(2, Level.MACHINE))
    assert e.jobs[2].placement == ((2, 1),)


def test_engine_choice_is_the_tightest_then_the_first_listed_type() -> None:
    c = k80_v100()
    df = trace(("a", 2, "resnet50", 10, 0.1), ("b", 4, "resnet50", 10, 0.1))
    e = Engine(df, c)
    # both types have whole free servers: the first listed (K80) wins a tie
    assert e.placement_for(e.jobs[1], Level.NETWORK) == [(0, 4)]
    # fill K80 down to 1 + 1 free: a 2-GPU job then fits K80 only across its
    # two servers (rack level) but one V100 server, which is tighter
    e2 = Engine(
        trace(
            ("x", 3, "resnet50", 1e6, 0.1),
            ("y", 3, "resnet50", 1e6, 0.1),
            ("b", 2, "resnet50", 10, 0.1),
        ),
        c,
    )
    e2.place(0, Level.MACHINE, gpu_type=0)
    e2.place(1, Level.MACHINE, gpu_type=0)
    assert (e2.jobs[0].placement, e2.jobs[1].placement) == (((0, 3),), ((1, 3),))
    assert e2.placement_for(e2.jobs[2], Level.NETWORK) == [(2, 2)]
    # on K80 alone it is a rack placement
    assert e2.placement_for(e2.jobs[2], Level.NETWORK, gpu_type=0) == [(0, 1), (1, 1)]


def test_servers_of_different_sizes() -> None:
    c = Cluster(
        1,
        3,
        8,
        "seed",
        gpu_kinds=(GpuKind("T4"), GpuKind("V100-32GB")),
        server_kind=(0, 0, 1),
        server_gpus=(2, 4, 8),
    )
    assert c.num_gpus == 14 and c.type_capacities() == [6, 8]
    e = Engine(trace(("t", 4, "resnet50", 10, 0.1), ("u", 4, "resnet50", 10, 0.1)), c)
    assert e.free == [2, 4, 8]
    e.place(0, Level.MACHINE, gpu_type=0)
    assert e.jobs[0].placement == ((1, 4),)
    assert e.check(Place(1, Level.MACHINE, gpu_type=0)) is not None
    assert e.check(Place(1, Level.RACK, gpu_type=0)) is not None  # 2 T4 left
    run_all_placing(e)
    assert e.done


def run_all_placing(e: Engine) -> None:
    """FIFO by hand: place what fits, else wait."""
    while not e.done:
        for job in list(e.pending):
            if e.placement_for(job, Level.NETWORK) is not None:
                e.place(job.index)
        e.advance()


def test_untyped_cluster_ignores_types_and_refuses_a_type_index() -> None:
    df = trace(("a", 2, "resnet50", 10, 0.1), gpu_types=["T4"])
    e = Engine(df, Cluster(1, 1, 4, "seed"))
    assert e.types is None
    with pytest.raises(InvalidAction, match="untyped"):
        e.apply(Place(0, Level.MACHINE, gpu_type=0))
    e.place(0)
    run_all(e)
    assert "gpu_type" not in e.result().jobs.columns


def test_bad_types_are_named() -> None:
    with pytest.raises(ValueError, match="unknown GPU type 'Z9'"):
        GpuKind("Z9")
    with pytest.raises(ValueError, match="server_kind must give each of the 4 servers"):
        Cluster(2, 2, 4, gpu_kinds=(GpuKind("K80"),), server_kind=(0,))
    with pytest.raises(ValueError, match=r"server_gpus\[1\] must be an integer in 0..4"):
        Cluster(1, 2, 4, server_gpus=(4, 5))
    with pytest.raises(TraceError, match="row 2.*'gpu_types'.*unknown GPU type 'X'"):
        Engine(
            trace(
                ("a", 1, "resnet50", 1, 0.1), ("b", 1, "resnet50", 1, 0.1), gpu_types=["", "K80|X"]
            ),
            k80_v100(),
        )
    # G2 has no numbers: the cluster must state an assumed speed
    with pytest.raises(ValueError, match="G2 has no speed"):
        Engine(
            trace(("a", 1, "resnet50", 1, 0.1)),
            Cluster(1, 1, 8, gpu_kinds=(GpuKind("G2"),), server_kind=(0,)),
        )
    assert speed_source("resnet50", "G2", assumed=1.0) == (1.0, "assumed")
    assert speed_source("resnet50", "K80") == (K80_RESNET50, "measured")
    assert speed_source("vgg11", "A100-40GB")[1] == "datasheet"


def test_typed_accounting_over_a_random_trace() -> None:
    """Every job ends, runs only on types it accepts, and GPU-hours per type
    add up, under a FIFO that lets the engine choose the type."""
    import numpy as np

    rng = np.random.default_rng(7)
    c = Cluster(
        2,
        2,
        4,
        "seed",
        gpu_kinds=(GpuKind("K80"), GpuKind("P100"), GpuKind("V100-16GB")),
        server_kind=(0, 1, 2, 2),
    )
    specs = ["", "K80", "P100|V100-16GB", "V100-16GB", "K80|P100"]
    n = 60
    df = pd.DataFrame(
        {
            "job_id": [f"j{i}" for i in range(n)],
            "arrival_s": np.sort(rng.uniform(0, 500, n)),
            "gpus": rng.choice([1, 2, 4], n),
            "model": rng.choice(["resnet50", "vgg11", "transformer"], n),
            "iterations": rng.uniform(100, 2000, n),
            "iter_time_s": rng.uniform(0.05, 0.2, n),
            "gpu_types": rng.choice(specs, n),
        }
    )
    e = Engine(df, c)
    run_all_placing(e)
    res = e.result()
    kind_of = {s: c.type_names[k] for s, k in enumerate(c.server_kind)}
    accepted = {
        row.job_id: set(row.gpu_types.split("|")) if row.gpu_types else set(c.type_names)
        for row in e.trace.jobs.itertuples()
    }
    for row in res.placements.itertuples():
        assert kind_of[row.server] in accepted[row.job_id]
    total = sum(res.summary[f"gpu_h_{t}"] for t in c.type_names)
    assert total == pytest.approx(res.jobs["gpu_time_s"].sum() / 3600)
    assert res.summary["completed"] == n
    assert not math.isnan(res.summary["mean_jct_s"])


@pytest.mark.parametrize("policy", ["fifo", "gandiva", "tiresias", "dally"])
def test_a_typed_cluster_of_equal_mixable_types_runs_as_untyped(policy: str) -> None:
    """Two types of equal speed and link with mixing allowed leave nothing
    for the types to change: every job's result is the untyped one, bit for
    bit (the typed machinery itself changes no schedule)."""
    from ddl_gym.baselines import make_policy

    from ddl_gym.bench_typed import typed_variant
    from ddl_gym.engine import simulate
    from ddl_gym.traces import synthetic_trace

    tr = synthetic_trace(n_jobs=300, seed=3, arrival_rate_per_h=60.0, max_gpus=32)
    base = Cluster(4, 2, 8)
    typed = replace(typed_variant(base, ("V100-16GB", "V100-32GB")), mix_types=True)
    assert len(set(typed.server_kind)) == 2
    results = [simulate(tr, c, make_policy(policy), congestion="moderate") for c in (base, typed)]
    cols = [c for c in results[0].jobs.columns]
    pd.testing.assert_frame_equal(results[0].jobs[cols], results[1].jobs[cols])
    for key, value in results[0].summary.items():
        assert results[1].summary[key] == value, key
