"""Tests for ddl_gym.traces: adapters, bad input, transforms, synthetic traces."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ddl_gym.traces import (
    SCHEMA_COLUMNS,
    Trace,
    TraceError,
    TraceWarning,
    assign_models,
    check_fits,
    default_trace,
    discover_traces,
    find_data_dir,
    head,
    load_trace,
    save_trace,
    scale_load,
    shift_to_zero,
    synthetic_trace,
    validate,
    window,
)
from ddl_gym.traces.synthetic import (
    HELIOS_MODEL_MIX,
    PHILLY_ARRIVALS_PER_H,
    PHILLY_DURATION_MEDIAN_S,
    PHILLY_DURATION_SIGMA,
    PHILLY_GPU_MIX,
)

PHILLY_WEEK = "traces/philly/philly_2017-11-13_to_2017-11-19.csv"
ALIBABA = "traces/alibaba_openb/openb_pod_list_default_dev.csv"

# ---------------------------------------------------------------------------
# fixtures and helpers


@pytest.fixture(scope="module")
def data_dir() -> Path:
    d = find_data_dir()
    if d is None or not (d / "traces").is_dir():
        pytest.skip("../shared/data not found (set DDL_GYM_DATA to the developers' data dir)")
    return d


def load_quiet(path: Path, **kwargs) -> Trace:
    """Load a real trace, swallowing the expected TraceWarnings (sorting, skips)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        return load_trace(path, **kwargs)


def write_csv(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text.strip() + "\n")
    return p


PHILLY_OK = """
timestamp,duration,num_gpus,gpu_time,cluster
2017-11-13 00:00:00,100,1,100,vcA
2017-11-13 00:01:00,200,2,400,vcA
2017-11-13 00:02:00,300,4,1200,vcB
"""

TIRESIAS_OK = """
job_id,num_gpu,submit_time,iterations,model_name,duration,interval
0,1,0,100,vgg16,50,10
1,2,10,200,resnet50,80,10
2,4,20,300,inception3,90,10
"""

POLLUX_OK = """
name,time,application,num_replicas,batch_size
cifar10-0,0,cifar10,2,128
bert-1,5,bert,4,32
imagenet-2,9,imagenet,8,256
"""

ALIBABA_OK = """
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
pod-0,1000,1024,1,1000,,LS,Running,0,100,10
pod-1,1000,1024,0,0,,LS,Running,5,100,5
pod-2,1000,1024,1,500,,LS,Running,6,100,6
pod-3,1000,1024,8,1000,,LS,Succeeded,7,1007,7
pod-4,1000,1024,2,1000,,BE,Pending,8,100,
"""


def dally_job(job_id: str, arrival: int, gpus: int = 2, model: str = "ResNet50") -> dict:
    return {
        "job_id": job_id,
        "user": "u1",
        "model": model,
        "total_iterations": "1000",
        "time_per_iteration": "0.5",
        "max_parallelism": str(gpus),
        "arrival_time": str(arrival),
        "duration": "250",
    }


def write_json(tmp_path: Path, jobs: list, name: str = "jobs.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(jobs))
    return p


def assert_names(exc: pytest.ExceptionInfo, path: Path, row: int | str, field: str) -> None:
    msg = str(exc.value)
    assert path.name in msg, msg
    assert (f"row {row}" if isinstance(row, int) else row) in msg, msg
    assert repr(field) in msg or field in msg, msg


# ---------------------------------------------------------------------------
# well-formed small files


def test_small_files_load_with_schema(tmp_path: Path) -> None:
    files = {
        "philly.csv": PHILLY_OK,
        "tiresias.csv": TIRESIAS_OK,
        "pollux.csv": POLLUX_OK,
    }
    for name, text in files.items():
        tr = load_trace(write_csv(tmp_path, name, text))
        assert list(tr.jobs.columns[: len(SCHEMA_COLUMNS)]) == list(SCHEMA_COLUMNS)
        assert len(tr) == 3
        assert tr.jobs["gpus"].dtype == np.int64
        assert tr.jobs["arrival_s"].dtype == np.float64
        assert list(tr.jobs.index) == [0, 1, 2]
    tr = load_trace(write_json(tmp_path, [dally_job("a", 5), dally_job("b", 7, model="VGG")]))
    assert list(tr.jobs["model"]) == ["resnet50", "vgg11"]
    assert tr.jobs["arrival_s"].tolist() == [5.0, 7.0]  # the trace's own offsets kept


def test_philly_small_semantics(tmp_path: Path) -> None:
    tr = load_trace(write_csv(tmp_path, "p.csv", PHILLY_OK), seed=3)
    j = tr.jobs
    assert j["arrival_s"].tolist() == [0.0, 60.0, 120.0]
    assert j["job_id"].tolist() == ["philly-1", "philly-2", "philly-3"]
    assert j["vc"].tolist() == ["vcA", "vcA", "vcB"]
    np.testing.assert_allclose(j["iterations"] * j["iter_time_s"], [100, 400, 1200])


def test_tiresias_single_gpu_time(tmp_path: Path) -> None:
    j = load_trace(write_csv(tmp_path, "t.csv", TIRESIAS_OK)).jobs
    assert j["model"].tolist() == ["vgg16", "resnet50", "inception_v3"]
    np.testing.assert_allclose(j["iter_time_s"], [50 / 100, 80 * 2 / 200, 90 * 4 / 300])
    np.testing.assert_allclose(j["iterations"] * j["iter_time_s"], j["duration_s"] * j["gpus"])


def test_pollux_bucket_work(tmp_path: Path) -> None:
    from ddl_gym.traces.pollux import BUCKET_WORK_H

    j = load_trace(write_csv(tmp_path, "w.csv", POLLUX_OK)).jobs
    assert j["model"].tolist() == ["resnet18", "bert_base", "resnet50"]
    work_h = (j["iterations"] * j["iter_time_s"] / 3600).to_numpy()
    np.testing.assert_allclose(work_h, [BUCKET_WORK_H[0], BUCKET_WORK_H[1], BUCKET_WORK_H[3]])
    a = load_trace(write_csv(tmp_path, "w.csv", POLLUX_OK), work="log_uniform", seed=1).jobs
    b = load_trace(write_csv(tmp_path, "w.csv", POLLUX_OK), work="log_uniform", seed=1).jobs
    pd.testing.assert_frame_equal(a, b)


def test_alibaba_small_skips_and_round_up(tmp_path: Path) -> None:
    p = write_csv(tmp_path, "openb.csv", ALIBABA_OK)
    with pytest.warns(TraceWarning, match="openb.csv") as rec:
        tr = load_trace(p)
    msg = str(rec[0].message)
    assert "1 CPU-only" in msg and "1 never scheduled" in msg and "1 fractional" in msg
    assert tr.dropped == {"cpu_only": 1, "never_scheduled": 1, "fractional_gpu": 1}
    assert tr.jobs["job_id"].tolist() == ["pod-0", "pod-3"]
    assert tr.jobs["duration_s"].tolist() == [90.0, 1000.0]  # deletion - scheduled
    with pytest.warns(TraceWarning):
        tr2 = load_trace(p, fractional="round_up")
    assert tr2.jobs["job_id"].tolist() == ["pod-0", "pod-2", "pod-3"]
    assert tr2.jobs["gpus"].tolist() == [1, 1, 8]
    with pytest.raises(TraceError) as exc:
        load_trace(p, unscheduled="error")
    assert_names(exc, p, 5, "scheduled_time")


# ---------------------------------------------------------------------------
# bad input: every case names file, row and field


def test_missing_column(tmp_path: Path) -> None:
    p = write_csv(tmp_path, "nogpus.csv", "timestamp,duration\n2017-11-13 00:00:00,5")
    # Without num_gpus the file is not recognisably Philly; force the family.
    with pytest.raises(TraceError) as exc:
        load_trace(p, family="philly")
    assert_names(exc, p, "header row", "num_gpus")


def test_missing_column_tiresias(tmp_path: Path) -> None:
    text = "job_id,num_gpu,submit_time,iterations,duration,interval\n0,1,0,100,50,10"
    p = write_csv(tmp_path, "t.csv", text)
    with pytest.raises(TraceError) as exc:
        load_trace(p, family="tiresias")
    assert_names(exc, p, "header row", "model_name")


def test_unrecognised_file(tmp_path: Path) -> None:
    p = write_csv(tmp_path, "weird.csv", "a,b\n1,2")
    with pytest.raises(TraceError, match="weird.csv"):
        load_trace(p)


def test_non_numeric_value(tmp_path: Path) -> None:
    p = write_csv(tmp_path, "p.csv", PHILLY_OK.replace(",200,2,", ",abc,2,"))
    with pytest.raises(TraceError, match="non-numeric") as exc:
        load_trace(p)
    assert_names(exc, p, 2, "duration")


def test_non_numeric_json(tmp_path: Path) -> None:
    jobs = [dally_job("a", 1), dally_job("b", 2), dally_job("c", 3)]
    jobs[2]["total_iterations"] = "lots"
    p = write_json(tmp_path, jobs)
    with pytest.raises(TraceError, match="non-numeric") as exc:
        load_trace(p)
    assert_names(exc, p, 3, "total_iterations")


def test_negative_value(tmp_path: Path) -> None:
    p = write_csv(tmp_path, "t.csv", TIRESIAS_OK.replace("2,10,200", "2,-10,200"))
    with pytest.raises(TraceError, match="negative") as exc:
        load_trace(p)
    assert_names(exc, p, 2, "submit_time")


def test_negative_gpus(tmp_path: Path) -> None:
    p = write_csv(tmp_path, "w.csv", POLLUX_OK.replace(",bert,4,", ",bert,-4,"))
    with pytest.raises(TraceError) as exc:
        load_trace(p)
    assert_names(exc, p, 2, "num_replicas")


@pytest.mark.parametrize("bad", ["", "NaN"])
def test_empty_or_nan_value(tmp_path: Path, bad: str) -> None:
    p = write_csv(tmp_path, "w.csv", POLLUX_OK.replace("imagenet-2,9,", f"imagenet-2,{bad},"))
    with pytest.raises(TraceError, match="empty or NaN") as exc:
        load_trace(p)
    assert_names(exc, p, 3, "time")


def test_missing_key_in_json(tmp_path: Path) -> None:
    jobs = [dally_job("a", 1), dally_job("b", 2)]
    del jobs[1]["model"]
    p = write_json(tmp_path, jobs)
    with pytest.raises(TraceError, match="empty") as exc:
        load_trace(p)
    assert_names(exc, p, 2, "model")


def test_json_not_objects(tmp_path: Path) -> None:
    p = write_json(tmp_path, [dally_job("a", 1), 42])
    with pytest.raises(TraceError) as exc:
        load_trace(p, family="dally")
    assert_names(exc, p, 2, "*")


def test_duplicate_job_id(tmp_path: Path) -> None:
    p = write_csv(tmp_path, "t.csv", TIRESIAS_OK.replace("2,4,20", "0,4,20"))
    with pytest.raises(TraceError, match="duplicate job id '0'") as exc:
        load_trace(p)
    assert_names(exc, p, 3, "job_id")
    assert "first seen at row 1" in str(exc.value)


def test_duplicate_job_id_json(tmp_path: Path) -> None:
    p = write_json(tmp_path, [dally_job("a", 1), dally_job("b", 2), dally_job("a", 3)])
    with pytest.raises(TraceError, match="duplicate") as exc:
        load_trace(p)
    assert_names(exc, p, 3, "job_id")


def test_unsorted_arrivals_warn_and_sort(tmp_path: Path) -> None:
    text = TIRESIAS_OK.replace("1,2,10,", "1,2,30,")  # row 2 now after row 3
    p = write_csv(tmp_path, "t.csv", text)
    with pytest.warns(TraceWarning, match="not sorted") as rec:
        tr = load_trace(p)
    msg = str(rec[0].message)
    assert "t.csv" in msg and "row 3" in msg and "submit_time" in msg
    assert tr.jobs["arrival_s"].tolist() == [0.0, 20.0, 30.0]
    assert tr.jobs["job_id"].tolist() == ["0", "2", "1"]
    assert tr.source_rows.tolist() == [1, 3, 2]


def test_unsorted_stable(tmp_path: Path) -> None:
    jobs = [dally_job("a", 5), dally_job("b", 1), dally_job("c", 5), dally_job("d", 1)]
    with pytest.warns(TraceWarning):
        tr = load_trace(write_json(tmp_path, jobs))
    assert tr.jobs["job_id"].tolist() == ["b", "d", "a", "c"]


@pytest.mark.parametrize(
    ("name", "text", "old", "new", "row", "field"),
    [
        ("t.csv", TIRESIAS_OK, "resnet50", "lenet", 2, "model_name"),
        ("w.csv", POLLUX_OK, ",imagenet,", ",mnist,", 3, "application"),
    ],
)
def test_unknown_model(tmp_path, name, text, old, new, row, field) -> None:
    p = write_csv(tmp_path, name, text.replace(old, new))
    with pytest.raises(TraceError, match="unknown model name") as exc:
        load_trace(p)
    assert_names(exc, p, row, field)


def test_unknown_model_json(tmp_path: Path) -> None:
    p = write_json(tmp_path, [dally_job("a", 1), dally_job("b", 2, model="GPT-5")])
    with pytest.raises(TraceError, match="GPT-5") as exc:
        load_trace(p)
    assert_names(exc, p, 2, "model")


def test_zero_gpus(tmp_path: Path) -> None:
    p = write_csv(tmp_path, "p.csv", PHILLY_OK.replace(",300,4,", ",300,0,"))
    with pytest.raises(TraceError, match="must be > 0") as exc:
        load_trace(p)
    assert_names(exc, p, 3, "num_gpus")
    p = write_json(tmp_path, [dally_job("a", 1, gpus=0)])
    with pytest.raises(TraceError) as exc:
        load_trace(p)
    assert_names(exc, p, 1, "max_parallelism")


def test_fractional_gpus_rejected(tmp_path: Path) -> None:
    p = write_csv(tmp_path, "t.csv", TIRESIAS_OK.replace("1,2,10", "1,2.5,10"))
    with pytest.raises(TraceError, match="non-integer") as exc:
        load_trace(p)
    assert_names(exc, p, 2, "num_gpu")


def test_philly_zero_duration(tmp_path: Path) -> None:
    p = write_csv(tmp_path, "p.csv", PHILLY_OK.replace(",200,2,400,", ",0,2,0,"))
    with pytest.raises(TraceError, match="zero duration") as exc:
        load_trace(p)
    assert_names(exc, p, 2, "duration")
    with pytest.warns(TraceWarning, match="skipped 1 of 3"):
        tr = load_trace(p, zero_duration="skip")
    assert tr.jobs["job_id"].tolist() == ["philly-1", "philly-3"]
    assert tr.dropped == {"zero_duration": 1}


def test_bad_timestamp(tmp_path: Path) -> None:
    p = write_csv(tmp_path, "p.csv", PHILLY_OK.replace("2017-11-13 00:02:00", "yesterday"))
    with pytest.raises(TraceError, match="yesterday") as exc:
        load_trace(p)
    assert_names(exc, p, 3, "timestamp")


def test_ragged_row(tmp_path: Path) -> None:
    p = write_csv(tmp_path, "t.csv", TIRESIAS_OK.replace("1,2,10,200", "1,2,10,7,200"))
    with pytest.raises(TraceError, match="cannot parse") as exc:
        load_trace(p)
    assert_names(exc, p, 2, "*")


def test_blank_lines_keep_row_numbers(tmp_path: Path) -> None:
    lines = TIRESIAS_OK.strip().splitlines()
    lines.insert(2, "")  # blank line between data rows 1 and 3
    lines[3] = lines[3].replace("resnet50", "lenet")
    p = tmp_path / "t.csv"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError) as exc:
        load_trace(p)
    assert_names(exc, p, 3, "model_name")


def test_check_fits(tmp_path: Path) -> None:
    p = write_csv(tmp_path, "t.csv", TIRESIAS_OK)
    tr = load_trace(p)
    check_fits(tr, 4)
    with pytest.raises(TraceError, match="asks for 4 GPUs") as exc:
        check_fits(tr, 2)
    assert_names(exc, p, 3, "gpus")


def test_validate_frame_errors() -> None:
    good = pd.DataFrame(
        {
            "job_id": ["a", "b"],
            "arrival_s": [0.0, 1.0],
            "gpus": [1, 2],
            "model": ["resnet50", "bert_large"],
            "iterations": [10.0, 20.0],
            "iter_time_s": [0.1, 0.2],
            "extra": [1, 2],
        }
    )
    out = validate(good, "mem.csv")
    assert list(out.columns) == list(SCHEMA_COLUMNS)  # extra column dropped
    for col, val, match in [
        ("iterations", np.nan, "empty or NaN"),
        ("iter_time_s", 0.0, "must be > 0"),
        ("gpus", 0, "must be > 0"),
        ("arrival_s", -1.0, "negative"),
        ("model", "lenet", "unknown model"),
    ]:
        bad = good.copy()
        bad[col] = bad[col].astype(object)
        bad.loc[1, col] = val
        with pytest.raises(TraceError, match=match) as exc:
            validate(bad, "mem.csv")
        msg = str(exc.value)
        assert "mem.csv" in msg and "row 2" in msg and col in msg
    with pytest.raises(TraceError, match="header row"):
        validate(good.drop(columns="model"), "mem.csv")


# ---------------------------------------------------------------------------
# transformations


def small_trace(arrivals: list[float]) -> Trace:
    n = len(arrivals)
    df = pd.DataFrame(
        {
            "job_id": [f"j{i}" for i in range(n)],
            "arrival_s": arrivals,
            "gpus": [1] * n,
            "model": ["resnet50"] * n,
            "iterations": [100.0] * n,
            "iter_time_s": [0.1] * n,
        }
    )
    return Trace(name="small", jobs=validate(df, "small"), source=None)


def test_window_shift_scale_head() -> None:
    tr = small_trace([10.0, 20.0, 40.0, 70.0])
    w = window(tr, 15.0, 70.0)
    assert w.jobs["job_id"].tolist() == ["j1", "j2"]
    assert w.jobs["arrival_s"].tolist() == [5.0, 25.0]
    assert list(w.jobs.index) == [0, 1]
    assert window(tr, 10.0, 20.0).jobs["job_id"].tolist() == ["j0"]  # [start, end)
    assert shift_to_zero(tr).jobs["arrival_s"].tolist() == [0.0, 10.0, 30.0, 60.0]
    assert scale_load(tr, 2.0).jobs["arrival_s"].tolist() == [10.0, 15.0, 25.0, 40.0]
    assert scale_load(tr, 0.5).jobs["arrival_s"].tolist() == [10.0, 30.0, 70.0, 130.0]
    assert head(tr, 2).jobs["job_id"].tolist() == ["j0", "j1"]
    assert tr.jobs["arrival_s"].tolist() == [10.0, 20.0, 40.0, 70.0]  # input untouched
    with pytest.raises(ValueError):
        scale_load(tr, 0.0)
    with pytest.raises(ValueError):
        window(tr, 5.0, 5.0)


def test_window_keeps_source_rows(tmp_path: Path) -> None:
    tr = load_trace(write_csv(tmp_path, "t.csv", TIRESIAS_OK))
    w = window(tr, 5.0, 100.0)
    assert w.source_rows.tolist() == [2, 3]
    with pytest.raises(TraceError, match="row 3"):
        check_fits(w, 2)


def test_assign_models_rule_and_determinism() -> None:
    df = pd.DataFrame(
        {"gpus": [1, 1, 8, 64] * 50, "duration_s": [60.0, 7200.0, 7200.0, 3.6e4] * 50}
    )
    a = assign_models(df, seed=0)
    pd.testing.assert_frame_equal(a, assign_models(df, seed=0))
    assert not a["model"].equals(assign_models(df, seed=1)["model"])
    from ddl_gym.traces.transform import GPU_TIME_MODEL_MIX

    gpu_h = df["gpus"] * df["duration_s"] / 3600
    for b, (lo, hi) in enumerate([(0, 1), (1, 10), (10, 100), (100, np.inf)]):
        sel = (gpu_h >= lo) & (gpu_h < hi)
        assert set(a.loc[sel, "model"]) <= set(GPU_TIME_MODEL_MIX[b])
    u = assign_models(df, seed=0, rule="uniform")
    assert u["model"].nunique() > 10


def test_save_and_reload(tmp_path: Path) -> None:
    tr = synthetic_trace(n_jobs=50, seed=4)
    p = tmp_path / "saved.csv"
    save_trace(tr, p)
    back = load_trace(p)
    pd.testing.assert_frame_equal(back.jobs, tr.jobs)


# ---------------------------------------------------------------------------
# synthetic generator


def test_synthetic_deterministic() -> None:
    a = synthetic_trace(n_jobs=200, seed=7)
    pd.testing.assert_frame_equal(a.jobs, synthetic_trace(n_jobs=200, seed=7).jobs)
    b = synthetic_trace(n_jobs=200, seed=8)
    assert not a.jobs["model"].equals(b.jobs["model"])
    pd.testing.assert_frame_equal(default_trace(3).jobs, default_trace(3).jobs)


def test_synthetic_matches_calibration() -> None:
    n = 40_000
    j = synthetic_trace(n_jobs=n, seed=123).jobs
    gpu_p = pd.Series(PHILLY_GPU_MIX, dtype=float)
    gpu_p /= gpu_p.sum()
    freq = j["gpus"].value_counts(normalize=True).reindex(gpu_p.index, fill_value=0)
    np.testing.assert_allclose(freq, gpu_p, atol=0.006)
    logd = np.log(j["duration_s"])
    assert abs(np.exp(logd.median()) / PHILLY_DURATION_MEDIAN_S - 1) < 0.05
    assert abs(logd.std() - PHILLY_DURATION_SIGMA) < 0.03
    rate = (n - 1) / (j["arrival_s"].iloc[-1] / 3600)
    assert abs(rate / PHILLY_ARRIVALS_PER_H - 1) < 0.02
    model_p = pd.Series(HELIOS_MODEL_MIX, dtype=float)
    model_p /= model_p.sum()
    mfreq = j["model"].value_counts(normalize=True).reindex(model_p.index, fill_value=0)
    np.testing.assert_allclose(mfreq, model_p, atol=0.01)
    # single-GPU work = duration * gpus (linear speed-up)
    np.testing.assert_allclose(j["iterations"] * j["iter_time_s"], j["duration_s"] * j["gpus"])


def test_default_trace_shape() -> None:
    tr = default_trace()
    j = tr.jobs
    assert 200 <= len(j) <= 500
    assert j["gpus"].min() >= 2 and j["gpus"].max() <= 32
    check_fits(tr, 64)
    assert j["arrival_s"].iloc[0] == 0.0
    work_gpu_h = float((j["iterations"] * j["iter_time_s"]).sum()) / 3600
    assert 1 < work_gpu_h / 64 < 24 * 7  # compute alone: hours to days on 64 GPUs
    assert 24 < j["arrival_s"].iloc[-1] / 3600 < 24 * 7  # arrivals span days
    assert set(j["model"]) <= set(HELIOS_MODEL_MIX)


# ---------------------------------------------------------------------------
# the real traces (../shared/data)


def test_find_data_dir_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDL_GYM_DATA", str(tmp_path))
    assert find_data_dir() == tmp_path


def test_discover_traces(data_dir: Path) -> None:
    found = discover_traces(data_dir)
    names = {Path(k).name for k in found}
    assert "philly_2017-11-13_to_2017-11-19" in names
    assert "openb_pod_list_default_dev" in names
    assert "60_job" in names
    assert {f"workload-{i}" for i in range(1, 9)} <= names
    assert sum(k.startswith("traces/dally/") for k in found) == 7
    for not_a_trace in (
        "philly_vc",
        "openb_node_list_gpu_node",
        "openb_node_list_all_node",
        "pai_machine_spec",
        "yarn-gput1000",
        "cluster_spec",
        "n32g4",
    ):
        assert not_a_trace not in names
    assert sum(k.startswith("traces/philly/") for k in found) == 5  # five calendar weeks
    assert sum(k.startswith("traces/sia_newtrace/") for k in found) == 10
    # 7 dally + 5 philly + 8 pollux + 10 sia + tiresias + alibaba, and openb's
    # typed pod list where fetched (the developers' data dir lacks it)
    typed = (data_dir / "traces/alibaba_openb/openb_pod_list_gpuspec33.csv").is_file()
    assert len(found) == 32 + typed


def test_philly_week(data_dir: Path) -> None:
    tr = load_trace(data_dir / PHILLY_WEEK, seed=0)
    j = tr.jobs
    assert len(j) == 5869
    assert j["gpus"].value_counts().to_dict() == {1: 5463, 2: 102, 4: 116, 8: 166, 16: 17, 32: 5}
    assert j["vc"].nunique() == 12
    assert j["arrival_s"].iloc[0] == 0.0 and j["arrival_s"].max() < 7 * 86400
    np.testing.assert_allclose(j["iterations"] * j["iter_time_s"], j["duration_s"] * j["gpus"])
    again = load_trace(data_dir / PHILLY_WEEK, seed=0)
    pd.testing.assert_frame_equal(j, again.jobs)
    other = load_trace(data_dir / PHILLY_WEEK, seed=1)
    assert (other.jobs["model"] != j["model"]).mean() > 0.3


@pytest.mark.parametrize("stem", ["poisson_1proc-week", "poisson_3proc-week", "poisson_3proc-day"])
def test_dally_main_traces(data_dir: Path, stem: str) -> None:
    p = data_dir / f"traces/dally/sense_500jobs_{stem}.json"
    with pytest.warns(TraceWarning, match="not sorted"):
        tr = load_trace(p)
    j = tr.jobs
    assert len(j) == 411
    assert j["gpus"].min() == 2 and j["gpus"].max() == 56
    assert j["model"].value_counts().to_dict() == {
        "mobilenet_v3": 125,
        "bert_large": 125,
        "resnet50": 125,
        "alexnet": 29,
        "vgg11": 4,
        "resnet18": 3,
    }
    assert j["arrival_s"].is_monotonic_increasing
    raw = pd.DataFrame(json.loads(p.read_text())).set_index("job_id")
    work = raw["total_iterations"].astype(float) * raw["time_per_iteration"].astype(float)
    np.testing.assert_allclose(
        (j["iterations"] * j["iter_time_s"]).to_numpy(), work.loc[j["job_id"]].to_numpy()
    )


@pytest.mark.parametrize("rate", [25, 50, 75, 100])
def test_dally_load_sweep(data_dir: Path, rate: int) -> None:
    tr = load_quiet(data_dir / f"traces/dally/sense_500jobs_poisson-{rate}jobsPday.json")
    assert len(tr) == 500
    assert tr.jobs["gpus"].min() == 1 and tr.jobs["gpus"].max() == 56


@pytest.mark.parametrize("k", range(1, 9))
def test_pollux_workloads(data_dir: Path, k: int) -> None:
    tr = load_trace(data_dir / f"traces/pollux_workloads/workload-{k}.csv")
    j = tr.jobs
    assert len(j) == 160
    assert j["arrival_s"].max() < 8 * 3600
    assert set(j["model"]) <= {"resnet18", "ncf", "deepspeech2", "bert_base", "yolov3", "resnet50"}
    assert j["gpus"].min() >= 1


def test_tiresias_60_job(data_dir: Path) -> None:
    tr = load_trace(data_dir / "traces/tiresias/60_job.csv")
    j = tr.jobs
    assert len(j) == 60
    assert j["gpus"].value_counts().to_dict() == {1: 30, 2: 10, 4: 10, 8: 10}
    assert j["model"].nunique() == 10 and (j["model"].value_counts() == 6).all()


def test_alibaba_openb(data_dir: Path) -> None:
    p = data_dir / ALIBABA
    with pytest.warns(TraceWarning, match="skipped"):
        tr = load_trace(p, seed=0)
    raw = pd.read_csv(p)
    assert tr.dropped["cpu_only"] == 600  # README: 0 GPUs (600)
    assert len(tr) + sum(tr.dropped.values()) == 4008
    assert tr.jobs["gpus"].min() >= 1 and tr.jobs["gpus"].max() == 8
    # every kept pod was scheduled, whole-GPU, and ran for deletion - scheduled
    kept = raw.set_index("name").loc[tr.jobs["job_id"]]
    assert (kept["gpu_milli"] == 1000).all()
    np.testing.assert_allclose(
        tr.jobs["duration_s"], (kept["deletion_time"] - kept["scheduled_time"]).to_numpy()
    )
    with pytest.warns(TraceWarning):
        rounded = load_trace(p, fractional="round_up")
    assert "fractional_gpu" not in rounded.dropped
    assert len(rounded) == len(tr) + tr.dropped["fractional_gpu"]


def test_all_real_traces_load_fast(data_dir: Path) -> None:
    for _name, path in discover_traces(data_dir).items():
        tr = load_quiet(path)
        assert len(tr) > 0
        assert list(tr.jobs.columns[:6]) == list(SCHEMA_COLUMNS)
        assert tr.jobs["arrival_s"].is_monotonic_increasing
        assert tr.jobs["job_id"].is_unique
