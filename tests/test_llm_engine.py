"""LLM jobs in the engine (issue 54): the trace's layout column, iteration
times from ddl_gym.llm under the placement, whole TP groups per server."""

from __future__ import annotations

import pandas as pd
import pytest
from ddl_gym.baselines.fifo import FifoPolicy  # pyright: ignore[reportMissingImports]

from ddl_gym.engine import Engine, simulate
from ddl_gym.engine.packer import find_placement, find_placement_units
from ddl_gym.llm import DEFAULT_PARAMS, PEAK_FLOPS, Layout, get_shape, iteration_time, links_of
from ddl_gym.perf import Level, Shape
from ddl_gym.topology import FABRICS, Cluster, GpuKind
from ddl_gym.traces import TraceError, validate

COLUMNS = ["job_id", "arrival_s", "gpus", "model", "iterations", "iter_time_s", "layout"]


def trace(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLUMNS)


def test_layout_column_is_validated_and_named_by_row():
    rows = [("a", 0, 16, "llama2_7b", 5, 1.0, "TP8-dp2"), ("b", 1, 2, "resnet50", 5, 1.0, "")]
    ok = validate(trace(rows), "t.csv")
    assert list(ok["layout"]) == ["tp8-pp1-dp2", ""]
    with pytest.raises(TraceError, match=r"row 1 .*field 'layout'.*asks for 8"):
        validate(trace([("a", 0, 8, "llama2_7b", 5, 1.0, "tp8-dp2")]), "t.csv")
    with pytest.raises(ValueError, match="needs a transformer"):
        Engine(trace([("a", 0, 8, "resnet50", 5, 1.0, "tp8")]), Cluster(1, 1, 8))


def test_llm_job_alone_ends_after_its_iterations_at_the_models_time():
    # tp4 x dp2 of Llama-2 7B on two 4-GPU servers of a DGX-like fabric
    fabric = FABRICS["a100_nvlink_ib"]
    cluster = Cluster(1, 2, 4, fabric)
    lay = Layout(tp=4, pp=1, dp=2, micro_batches=8)
    r = simulate(trace([("a", 0.0, 8, "llama2_7b", 10, 9.9, lay.spec())]), cluster, FifoPolicy())
    links = links_of(fabric, 4, link_eff=DEFAULT_PARAMS.link_eff)
    peak = PEAK_FLOPS["A100-80GB"]
    it = iteration_time(get_shape("llama2_7b"), lay, Shape(8, 4, 2, 1), links, peak)
    assert it.dp > 0 and it.tp > 0
    assert r.jobs.loc[0, "end_s"] == pytest.approx(10 * it.total, rel=1e-12)
    assert r.jobs.loc[0, "comm_s"] == pytest.approx(10 * (it.tp + it.pp + it.dp), rel=1e-9)


def test_packer_keeps_tp_groups_whole_unless_allowed():
    # two 3-GPU jobs leave 1 + 1 free GPUs; a tp2 job may not split its TP group
    cluster = Cluster(1, 2, 4, FABRICS["a100_nvlink_ib"])
    rows = [
        ("x", 0.0, 3, "resnet50", 1e6, 0.1, ""),
        ("y", 0.0, 3, "resnet50", 1e6, 0.1, ""),
        ("z", 0.0, 2, "llama2_7b", 10, 1.0, "tp2"),
    ]
    for split, expected in ((False, None), (True, [(0, 1), (1, 1)])):
        engine = Engine(trace(rows), cluster, llm_split_tp=split)
        engine.place(0, Level.MACHINE)
        engine.place(1, Level.MACHINE)
        assert engine.free == [1, 1]
        assert engine.placement_for(engine.jobs[2], Level.RACK) == expected


def test_find_placement_units_is_find_placement_on_blocks():
    free = [2, 4, 8, 6]
    assert find_placement_units(free, 2, 8, 8, Level.NETWORK, 4) == [(2, 8)]
    assert find_placement_units([2, 6, 2, 6], 2, 8, 8, Level.NETWORK, 4) == [(1, 4), (3, 4)]
    assert find_placement_units([2, 6, 2, 6], 2, 8, 8, Level.RACK, 4) is None
    assert find_placement_units(free, 2, 8, 6, Level.NETWORK, 1) == find_placement(
        free, [6, 14], 2, 8, 6, Level.NETWORK
    )


def test_an_empty_layout_column_changes_nothing():
    rows = [
        ("a", 0.0, 4, "resnet50", 2000, 0.1),
        ("b", 5.0, 8, "bert_large", 500, 0.2),
        ("c", 7.0, 12, "vgg11", 800, 0.05),
    ]
    plain = pd.DataFrame(rows, columns=COLUMNS[:-1])
    with_col = plain.assign(layout="")
    a = simulate(plain, "seed64", FifoPolicy())
    b = simulate(with_col, "seed64", FifoPolicy())
    cols = ["start_s", "end_s", "comm_s"]
    assert a.jobs[cols].equals(b.jobs[cols])
    assert a.summary == b.summary


def test_unplaceable_tp_and_typed_clusters_are_errors():
    rows = [("a", 0.0, 16, "llama2_7b", 5, 1.0, "tp16")]
    with pytest.raises(ValueError, match="does not fit whole in servers of 8 GPUs"):
        Engine(trace(rows), Cluster(1, 2, 8, FABRICS["a100_nvlink_ib"]))
    Engine(trace(rows), Cluster(1, 2, 8, FABRICS["a100_nvlink_ib"]), llm_split_tp=True)
    typed = Cluster(1, 2, 8, FABRICS["a100_nvlink_ib"], gpu_kinds=(GpuKind("A100-80GB"),),
                    server_kind=(0, 0))  # fmt: skip
    with pytest.raises(ValueError, match="typed cluster"):
        Engine(trace([("a", 0.0, 8, "llama2_7b", 5, 1.0, "tp8")]), typed)


def test_cross_rack_llm_job_shares_the_uplink_with_a_data_parallel_job():
    # two one-server racks; a tp4 x dp2 job put on 4 + 4 GPUs (whole TP groups),
    # alone on the uplinks, then joined there by a data-parallel job
    fabric = FABRICS["a100_nvlink_ib"]
    cluster = Cluster(2, 1, 8, fabric)
    lay = Layout(tp=4, pp=1, dp=2, micro_batches=8)
    rows = [
        ("llm", 0.0, 8, "llama2_7b", 10, 1.0, lay.spec()),
        ("dp", 0.0, 8, "resnet50", 1e9, 0.1, ""),
    ]
    engine = Engine(trace(rows), cluster)
    llm, dp = engine.jobs
    perf, model, peak = engine.perf, get_shape("llama2_7b"), PEAK_FLOPS["A100-80GB"]
    shape = Shape(8, 4, 1, 2)

    def exposed(jobs_on_uplink: int) -> float:
        bw = perf.uplink_share(0.0, jobs_on_uplink)
        links = links_of(fabric, 8, bw, perf.uplink_latency(0.0), DEFAULT_PARAMS.link_eff)
        it = iteration_time(model, lay, shape, links, peak)
        return it.tp + it.pp + it.dp

    engine._start(llm, ((0, 4), (1, 4)))  # (the test's placement, not the packer's)
    assert llm.exposed == pytest.approx(exposed(1), rel=1e-12)
    engine._start(dp, ((0, 4), (1, 4)))
    assert llm.exposed == pytest.approx(exposed(2), rel=1e-12)
    assert exposed(2) > exposed(1)  # half the uplink: its DP all-reduce slows


def test_llm_slowdown_per_level():
    from ddl_gym.llm.engine_model import LLMPerf

    cluster = Cluster(2, 2, 8, FABRICS["a100_nvlink_ib"])
    perf = LLMPerf(cluster)
    lay = Layout(tp=4, pp=1, dp=2, micro_batches=8)
    assert perf.tightest_shape(lay, Level.MACHINE) == Shape(8, 8, 1, 1)
    assert perf.tightest_shape(lay, Level.RACK) == Shape(8, 4, 2, 1)
    assert perf.tightest_shape(lay, Level.NETWORK) == Shape(8, 4, 1, 2)
    assert perf.tightest_shape(Layout(tp=8), Level.RACK) is None  # a TP group of 8 stays whole
    s = [perf.slowdown("llama2_7b", lay, lv) for lv in Level]
    assert s[0] is not None and s[1] is not None and s[2] is not None
    assert 1.0 <= s[0] < s[1] <= s[2]
    heavy = perf.slowdown("llama2_7b", lay, Level.NETWORK, background=0.8)
    assert heavy is not None and heavy > s[2]
