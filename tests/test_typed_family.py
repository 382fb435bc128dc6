"""The typed benchmark family (ddl_gym/benchmarks/typed_family.py): splits
never share data, every case runs to completion on a small setting, no job
runs on a type it does not accept, same seed gives the same result."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest
from ddl_gym.baselines import TYPED_NAMES, make_policy

from ddl_gym.benchmarks.provenance import case_inputs
from ddl_gym.benchmarks.suite import SUITES, Case, Suite, suite_hash
from ddl_gym.benchmarks.suite_v3 import HEURISTICS_V3
from ddl_gym.benchmarks.typed_family import (
    HEURISTICS_TYPED,
    LOAD_TARGETS,
    TypedWorkload,
    design_scales,
    missing_data,
    quick_best,
    typed_cases,
    v100_equivalent_gpus,
)
from ddl_gym.benchmarks.workload import SYNTHETIC, Workload
from ddl_gym.engine import simulate
from ddl_gym.gpu_types import get_gpu_type
from ddl_gym.topology import get_cluster
from ddl_gym.traces.openb_types import NODE_LIST
from ddl_gym.typed_clusters import gavel_cluster

CASES = typed_cases()
QUICK = typed_cases(quick=True)
ALL = (*CASES, *QUICK)
SMALL = 40  # jobs per run in the run tests: seconds for all of them


def test_heuristic_set_is_v3_plus_typed() -> None:
    assert HEURISTICS_TYPED == (*HEURISTICS_V3, *TYPED_NAMES)


def test_every_case_has_a_load_target_and_a_frozen_scale() -> None:
    for case in ALL:
        assert case.name in LOAD_TARGETS
        assert case.workload.arrival_scale != 1.0, case.name  # set at design time
    assert len({c.name for c in ALL}) == len(ALL)
    assert {c.split for c in CASES} == {"train", "validation", "test"}


def _draws(case: Case) -> set[int]:
    return {case.workload.seed_offset + s for s in case.seeds}


def test_synthetic_splits_are_distinct_generator_seeds() -> None:
    syn = [c for c in ALL if c.workload.source == SYNTHETIC]
    for i, a in enumerate(syn):
        for b in syn[i + 1 :]:
            if a.workload.synthetic == b.workload.synthetic and type(a.workload) is type(
                b.workload
            ):
                assert not _draws(a) & _draws(b), (a.name, b.name)
    # never a seed of v1-v3's synthetic cases (0.., 500.., 1000.., 2000.., 4000..)
    for c in syn:
        assert all(d >= 6000 for d in _draws(c)), c.name


def test_openb_splits_are_disjoint_parts() -> None:
    spec = [c for c in CASES if "spec33" in c.name]
    parts = {c.split: c.workload.part for c in spec}
    assert parts["train"][1] <= parts["validation"][0]
    assert parts["validation"][1] <= parts["test"][0]
    dev = [c for c in CASES if c.name == "openb-dev@openb"]
    assert dev and dev[0].split == "train"


def _pods(case: Case, seed: int = 0) -> set[str]:
    """The source pods a case's jobs were drawn from (resampled ids: pod~slot)."""
    jobs = case.workload.build(seed).jobs
    return {str(j).split("~")[0] for j in jobs["job_id"]}


@pytest.mark.needs_data
def test_openb_splits_share_no_pod() -> None:
    by_split: dict[str, set[str]] = {"train": set(), "validation": set(), "test": set()}
    ran = []
    for case in CASES:
        if case.family != "alibaba" or missing_data(case):
            continue
        ran.append(case.name)
        base = dataclasses.replace(case.workload, resample=False, arrival_scale=1.0)
        jobs = base.build(0).jobs
        by_split[case.split] |= {str(j) for j in jobs["job_id"]}
        assert _pods(case) <= {str(j) for j in jobs["job_id"]}  # bodies from its own part
    assert "openb-dev@openb" in ran
    assert not by_split["train"] & by_split["validation"]
    assert not by_split["train"] & by_split["test"]
    assert not by_split["validation"] & by_split["test"]


def test_type_rule_shares_and_determinism() -> None:
    case = next(c for c in CASES if c.name == "gen-train@vah384")
    a, b = case.workload.build(1).jobs, case.workload.build(1).jobs
    pd.testing.assert_frame_equal(a, b)
    only = (a["gpu_types"] != "").mean()
    mem = a["gpu_mem_gib"].notna().mean()
    assert 0.12 < only < 0.28 and 0.08 < mem < 0.22  # 0.2 and 0.15 over 400 jobs
    assert set(a.loc[a["gpu_types"] != "", "gpu_types"]) == {"A100-80GB|H100"}
    other = case.workload.build(2).jobs
    assert not other["gpu_types"].equals(a["gpu_types"])  # each seed its own draw


def test_typed_workload_without_rules_is_the_plain_workload() -> None:
    spec = next(c for c in CASES if c.name == "gen-train@vah384").workload.synthetic
    plain = Workload(SYNTHETIC, synthetic=spec, seed_offset=3)
    typed = TypedWorkload(SYNTHETIC, synthetic=spec, seed_offset=3)
    pd.testing.assert_frame_equal(plain.build(0).jobs, typed.build(0).jobs)


def test_missing_file_gives_the_fetch_command() -> None:
    case = dataclasses.replace(CASES[0], workload=Workload("traces/nope/none.csv"))
    why = missing_data(case)
    assert why is not None and "fetch" in why


def _small(case: Case) -> Case:
    return dataclasses.replace(case, workload=dataclasses.replace(case.workload, head=SMALL))


def _accepts(row: pd.Series, type_name: str) -> bool:
    types = row.get("gpu_types", "")
    if isinstance(types, str) and types and type_name not in types.split("|"):
        return False
    need = row.get("gpu_mem_gib", math.nan)
    return bool(pd.isna(need) or get_gpu_type(type_name).memory_gib >= need)


# the openb cases read the data dir; the synthetic ones need none
_RUNS = [
    pytest.param(c, id=c.name, marks=[pytest.mark.needs_data] if c.shape == "openb" else [])
    for c in ALL
]


@pytest.mark.parametrize("case", _RUNS)
def test_case_runs_on_accepted_types_and_repeats(case: Case) -> None:
    why = missing_data(case)
    if why:
        pytest.skip(why)
    small = _small(case)
    cluster = small.cluster()
    trace = small.workload.build(0)
    jobs = trace.jobs.set_index("job_id")
    for name in ("fifo", "gavel" if case.family == "alibaba" else "dally-typed"):
        result = simulate(trace, cluster, make_policy(name), seed=0, congestion=case.congestion)
        assert result.summary["completed"] == len(trace.jobs), (case.name, name)
        for job_id, type_name in zip(result.jobs["job_id"], result.jobs["gpu_type"], strict=True):
            assert type_name in cluster.type_names, (case.name, name, job_id, type_name)
            assert _accepts(jobs.loc[job_id], type_name), (case.name, name, job_id, type_name)
    again = simulate(
        small.workload.build(0), cluster, make_policy("gavel"), seed=0, congestion=case.congestion
    )
    first = simulate(trace, cluster, make_policy("gavel"), seed=0, congestion=case.congestion)
    pd.testing.assert_frame_equal(first.jobs, again.jobs)
    assert first.summary == again.summary


def test_quick_best_reports_a_best_per_case() -> None:
    case = _small(next(c for c in QUICK if c.name == "quick-gen@vah384"))
    (row,) = quick_best([case], heuristics=("fifo", "gavel"))
    assert row["best"] in ("fifo", "gavel")
    assert row["best"] == min(row["mean_jct_s"], key=row["mean_jct_s"].get)
    assert all(0 <= c <= 8.557 for c in row["comm"].values())


def test_v100_equivalent_capacity_by_hand() -> None:
    # 4 each of K80 (0.247), P100 (0.813), V100 (1.0): 4 x 2.06 = 8.24
    assert v100_equivalent_gpus(gavel_cluster(gpus_per_type=4)) == pytest.approx(8.24)
    assert v100_equivalent_gpus(get_cluster("2x2x4", "pcie_25gbe")) == 16.0


def test_frozen_scale_is_what_the_design_gives() -> None:
    name = "quick-gavel@kpv108"
    case = next(c for c in QUICK if c.name == name)
    assert design_scales([name], log=lambda _: None) == {name: case.workload.arrival_scale}


def test_family_fits_a_suite_and_hashes_its_inputs() -> None:
    # ready for the next version: a Suite takes the cases as they are
    suite = Suite("typed-family-draft", CASES, QUICK, heuristics=HEURISTICS_TYPED)
    assert len(suite_hash(suite)) == 64
    for case in ALL:
        inputs = case_inputs(case)
        if case.shape == "openb":
            assert NODE_LIST in inputs and case.workload.source in inputs, case.name
        else:
            assert inputs == (), case.name
    assert "typed-family-draft" not in SUITES  # not registered


def test_gavel_multi_gpu_jobs_use_distributed_models_and_keep_work() -> None:
    case = next(c for c in CASES if c.name == "gavel-train@kpv108")
    w = case.workload
    assert isinstance(w, TypedWorkload)
    jobs = w.build(0).jobs
    plain = Workload(
        w.source, synthetic=w.synthetic, seed_offset=w.seed_offset, iter_times=w.iter_times
    )
    plain = dataclasses.replace(plain, arrival_scale=w.arrival_scale).build(0).jobs
    multi = jobs["gpus"] > 1
    assert multi.any()
    assert set(jobs.loc[multi, "model"]) <= {m for m, _ in w.multi_gpu_models}
    assert set(jobs.loc[~multi, "model"]) >= {"a3c", "recommendation"}
    assert (plain.loc[multi, "model"] != jobs.loc[multi, "model"]).any()  # some were redrawn
    work = jobs["iterations"] * jobs["iter_time_s"]
    pd.testing.assert_series_equal(work, plain["iterations"] * plain["iter_time_s"], rtol=1e-12)
