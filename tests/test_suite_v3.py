"""ddl-gym-v3: breadth, splits, disjointness, per-seed draws, the design table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from ddl_gym.baselines import HEURISTICS, POLICY_NAMES, TUNED

from ddl_gym.benchmarks.suite import LEGACY_HEURISTICS, get_suite
from ddl_gym.benchmarks.suite_v3 import (
    FABRIC_PROVENANCE,
    LOAD_TARGETS,
    MAX_PREEMPTIONS,
    MEASURED_COMM_RANGE,
)
from ddl_gym.benchmarks.workload import Workload, resample_bodies, with_iter_times
from ddl_gym.traces import Trace

DESIGN = Path(__file__).resolve().parents[1] / "ddl_gym" / "benchmarks" / "v3_design.json"
V3 = get_suite("ddl-gym-v3")
FRESH_TEST_SOURCES = {
    "traces/philly/philly_2017-10-23_to_2017-10-29.csv",
    "traces/philly/philly_2017-11-20_to_2017-11-26.csv",
    "traces/philly/philly_2017-11-27_to_2017-12-03.csv",
    *(f"traces/sia_newtrace/workload-{i}.csv" for i in range(6, 11)),
}
MIN_SPREAD = 0.10  # worst / best heuristic mean JCT - 1, every test case


def _design() -> dict:
    return json.loads(DESIGN.read_text())


# -- definition ---------------------------------------------------------------------
def test_breadth_seeds_and_splits():
    cases = V3.cases
    assert {c.family for c in cases} >= {
        "seed", "philly", "alibaba", "pollux", "tiresias", "synthetic", "sia"
    }  # fmt: skip
    gpus = {c.cluster().num_gpus for c in cases}
    assert len({c.shape for c in cases}) >= 4
    assert min(gpus) == 16 and max(gpus) >= 1024
    for c in cases:
        need = {"test": 5, "validation": 5, "train": 3}[c.split]
        assert len(c.seeds) >= need and len(set(c.seeds)) == len(c.seeds), c.name
        assert c.name in LOAD_TARGETS
    assert 2 <= len(V3.quick) <= 3
    assert all(len(c.seeds) >= 5 for c in V3.quick)
    names = [c.name for c in V3.cases + V3.quick]
    assert len(names) == len(set(names))
    for split in ("train", "validation", "test"):
        assert V3.select(split), split


def test_every_seed_samples():
    """File cases resample per seed; synthetic ones draw from the generator."""
    for c in V3.cases + V3.quick:
        assert c.workload.resample or c.workload.source == "synthetic", c.name


def test_test_split_is_fresh_and_disjoint():
    """Test cases read only the new Philly weeks and Sia 6-10, and no train
    or validation case reads a test file; a file in train and validation is
    cut in parts that do not overlap; generator seeds differ per split."""
    test = V3.select("test")
    assert {c.workload.source for c in test} <= FRESH_TEST_SOURCES
    assert {c.family for c in test} == {"philly", "sia"}
    others = [c for c in V3.cases if c.split != "test"]
    assert not {c.workload.source for c in others} & FRESH_TEST_SOURCES
    parts: dict[str, dict[str, set]] = {}
    for c in others:
        w = c.workload
        key = w.source if w.source != "synthetic" else f"synthetic/{w.seed_offset}"
        parts.setdefault(key, {}).setdefault(c.split, set()).add(w.part)
    for source, by_split in parts.items():
        if len(by_split) < 2:
            continue
        train, val = by_split["train"], by_split["validation"]
        for a in train:
            for b in val:
                assert a[1] <= b[0] or b[1] <= a[0], (source, a, b)
    offsets = {
        s: {c.workload.seed_offset for c in V3.select(s) if c.workload.source == "synthetic"}
        for s in ("train", "validation")
    }
    offsets["quick"] = {c.workload.seed_offset for c in V3.quick if c.family == "synthetic"}
    seen: set[int] = set()
    for s, offs in offsets.items():
        spans = {o + k for o in offs for k in range(10)}
        assert not spans & seen, s
        seen |= spans


def test_validation_covers_every_test_regime():
    test, val = V3.select("test"), V3.select("validation")
    for attr in ("family", "shape", "fabric", "congestion"):
        assert {getattr(c, attr) for c in test} <= {getattr(c, attr) for c in val}, attr
    assert {(c.shape, c.fabric) for c in test} <= {(c.shape, c.fabric) for c in val}


def test_fabrics_have_provenance():
    for c in V3.cases + V3.quick:
        assert c.fabric in FABRIC_PROVENANCE, c.name


def test_heuristic_sets_are_frozen_per_suite():
    for name in ("ddl-gym-v1", "ddl-gym-v2"):
        assert get_suite(name).heuristics == LEGACY_HEURISTICS
        assert "heuristics" not in get_suite(name).definition()
    assert HEURISTICS == LEGACY_HEURISTICS  # the older suites' consumers see no new name
    assert set(V3.heuristics) == {*LEGACY_HEURISTICS, *TUNED}
    assert set(V3.heuristics) <= set(POLICY_NAMES)
    assert V3.definition()["heuristics"] == list(V3.heuristics)


# -- workload transformations ---------------------------------------------------
def _toy() -> Trace:
    jobs = pd.DataFrame(
        {
            "job_id": ["a", "b", "c", "d"],
            "arrival_s": [0.0, 10.0, 20.0, 30.0],
            "gpus": [1, 2, 4, 8],
            "model": ["resnet18", "resnet50", "resnet18", "vgg16"],
            "iterations": [100.0, 200.0, 300.0, 400.0],
            "iter_time_s": [0.5, 1.0, 0.5, 2.0],
        }
    )
    return Trace("toy", jobs)


def test_resample_keeps_arrivals_and_draws_bodies():
    src = _toy()
    bodies = {tuple(r) for r in src.jobs[["gpus", "model", "iterations"]].itertuples(index=False)}
    draws = []
    for seed in range(8):
        out = resample_bodies(src, seed).jobs
        assert out["arrival_s"].tolist() == [0.0, 10.0, 20.0, 30.0]
        assert out["job_id"].is_unique
        got = [tuple(r) for r in out[["gpus", "model", "iterations"]].itertuples(index=False)]
        assert set(got) <= bodies
        # the id names the source job whose body the slot carries
        for jid, g in zip(out["job_id"], out["gpus"], strict=True):
            assert src.jobs.set_index("job_id").loc[jid.split("~")[0], "gpus"] == g
        draws.append(tuple(got))
        again = resample_bodies(src, seed).jobs
        assert again.equals(out)  # same seed, same draw
    assert len(set(draws)) >= 6  # seeds differ (8 draws of 4^4 possible)
    assert draws[0] != tuple(
        tuple(r) for r in src.jobs[["gpus", "model", "iterations"]].itertuples(index=False)
    )


def test_iter_times_keep_single_gpu_work():
    src = _toy()
    out = with_iter_times(src, {"resnet18": 0.25}).jobs
    work_in = (src.jobs["iterations"] * src.jobs["iter_time_s"]).to_numpy()
    work_out = (out["iterations"] * out["iter_time_s"]).to_numpy()
    np.testing.assert_allclose(work_out, work_in)
    assert out["iter_time_s"].tolist() == [0.25, 1.0, 0.25, 2.0]


def test_older_workloads_keep_their_definition():
    """New Workload fields stay out of a case's definition at their defaults."""
    c = get_suite("ddl-gym-v1").cases[0]
    assert "resample" not in c.definition()["workload"]
    assert "iter_times" not in c.definition()["workload"]
    w = Workload("x.csv")
    assert w.resample is False and w.iter_times == ()


# -- data ------------------------------------------------------------------------
def _fingerprint(trace: Trace) -> tuple:
    j = trace.jobs
    return (len(j), tuple(j["gpus"]), tuple(j["model"]), round(float(j["iterations"].sum()), 6))


def test_every_seed_of_every_case_is_a_distinct_trace(data_dir):
    for c in V3.cases + V3.quick:
        prints = [_fingerprint(c.workload.build(s)) for s in c.seeds]
        assert len(set(prints)) == len(prints), c.name


def test_quick_cases_give_distinct_results_per_seed(data_dir):
    """Every heuristic of the suite, every quick case: each seed its own result."""
    from ddl_gym.benchmarks.policies import resolve_policy
    from ddl_gym.benchmarks.runner import run_case

    for c in V3.quick:
        for h in V3.heuristics:
            jct = [run_case(resolve_policy(h), c, s)["mean_jct_s"] for s in c.seeds]
            assert len(set(jct)) == len(jct), (c.name, h, jct)


# -- the design table ---------------------------------------------------------------
def test_design_table_covers_the_suite():
    table = _design()
    for c in (*V3.select("test"), *V3.select("validation"), *V3.quick):
        row = table[c.name]
        assert row["shape"] == c.shape and row["fabric"] == c.fabric, c.name
        assert row["congestion"] == c.congestion and row["seeds"] == list(c.seeds), c.name
        assert set(row["heuristics"]) == set(V3.heuristics), c.name


def test_design_comm_ratios_lie_in_the_measured_range():
    lo, hi = 0.0, MEASURED_COMM_RANGE["max"]
    for name, row in _design().items():
        for h, v in row["heuristics"].items():
            assert lo <= v["comm_min"] <= v["comm_max"] <= hi, (name, h, v)


def test_design_runs_finish_without_runaway_preemption():
    for name, row in _design().items():
        for h, v in row["heuristics"].items():
            assert v["max_preemptions"] < MAX_PREEMPTIONS, (name, h)
            assert v["unfinished"] == 0, (name, h)
            assert v["distinct_seeds"], (name, h)


def test_design_test_cases_discriminate():
    table = _design()
    for c in V3.select("test"):
        assert table[c.name]["spread"] >= 1 + MIN_SPREAD, c.name
