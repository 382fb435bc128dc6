"""The benchmark harness (``ddl_gym.bench``): what it keeps and prints."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from ddl_gym import bench


def _row(cpu_s: float) -> dict:
    return {
        "policy": "fifo",
        "jobs": 100,
        "cpu_s": cpu_s,
        "jobs_per_cpu_s": 100 / cpu_s,
        "us_per_job": 1e4 * cpu_s,
        "us_per_event": 1e6 * cpu_s / 7,
        "events": 7,
        "peak_rss_mib": 90.0,
        "offered_load": 0.8,
        "utilization": 0.5,
        "window_utilization": 0.8,
    }


def test_scale_rows_keep_the_least_cpu_of_the_repeats(monkeypatch):
    runs = iter([_row(3.0), None, _row(2.0)])  # None: stopped at the CPU limit
    monkeypatch.setattr(bench, "_scale_run", lambda n, name, limit, regime: next(runs))
    (row,) = bench.scale_rows([100], ["fifo"], cpu_limit_s=5.0, repeat=3)
    assert row["cpu_s"] == 2.0 and row["runs"] == 3


def test_scale_rows_stopped_every_time_report_the_limit(monkeypatch):
    monkeypatch.setattr(bench, "_scale_run", lambda n, name, limit, regime: None)
    (row,) = bench.scale_rows([100], ["fifo"], cpu_limit_s=5.0, repeat=2)
    assert row["cpu_s"] is None and row["limit"] == 5.0


def test_scale_run_in_a_fresh_process():
    row = bench._scale_run(200, "fifo", None)
    assert row is not None
    assert row["jobs"] == 200 and row["cpu_s"] > 0 and row["events"] > 0
    assert row["gpus"] == 4096 and row["regime"] == "cluster"
    assert row["us_per_job"] == pytest.approx(1e6 * row["cpu_s"] / 200)
    assert row["peak_rss_mib"] > 0 and row["offered_load"] > 0
    assert 0 < row["window_utilization"] <= 1


def test_window_utilization_is_the_time_average_over_the_arrival_window():
    trace = SimpleNamespace(jobs=pd.DataFrame({"arrival_s": [0.0, 5.0, 30.0]}))
    # 4 GPUs used over [0, 10), 8 over [10, 20), none after: 120 of 8 * 30
    series = pd.DataFrame({"time_s": [0.0, 10.0, 20.0], "used_gpus": [4, 8, 0]})
    assert bench.window_utilization(series, trace, 8) == pytest.approx(0.5)
    # what happens past the last arrival does not count: 4*10 + 8*20 of 240
    series = pd.DataFrame({"time_s": [0.0, 10.0, 40.0], "used_gpus": [4, 8, 2]})
    assert bench.window_utilization(series, trace, 8) == pytest.approx(200 / 240)


def test_markdown_scale_table_shows_cost_per_job_and_event_memory_and_busy_share():
    row = {**_row(2.0), "gpus": 64, "us_per_job": 20_000.0, "us_per_event": 2e6 / 7}
    table = bench.markdown([row], with_memory=True)
    assert table.splitlines()[0].endswith("| events | peak MiB | busy |")
    assert table.splitlines()[-1] == (
        "| 100 | 64 | fifo | 2.00 | 20,000 | 285,714.3 | 7 | 90 | 0.80 |"
    )


def test_fixed_regime_grows_the_cluster_with_the_jobs_at_one_rate_per_gpu():
    # one GPU per 10 jobs in whole racks of 64 GPUs
    assert bench.fixed_regime_cluster(10_000).num_gpus == 1024
    assert bench.fixed_regime_cluster(1_000_000).num_gpus == 1562 * 64
    assert bench.fixed_regime_cluster(100).num_gpus == 64  # at least one rack
    small, small_cluster = bench.scale_case(2_000, "fixed")
    big, big_cluster = bench.scale_case(20_000, "fixed")
    # same arrival rate per GPU: the arrival windows match (within sampling noise)
    span = [t.jobs["arrival_s"].max() for t in (small, big)]
    assert span[1] == pytest.approx(span[0], rel=0.1)
    assert (small_cluster.racks, big_cluster.racks) == (3, 31)  # round(n / 640)
    for trace, cluster in ((small, small_cluster), (big, big_cluster)):
        assert bench.offered_load(trace, cluster.num_gpus) == pytest.approx(0.8, abs=0.1)


def test_unknown_scale_regime_is_one_clear_error():
    with pytest.raises(ValueError, match="unknown scale regime 'tiny'"):
        bench.scale_case(100, "tiny")
    with pytest.raises(ValueError, match="unknown scale regime 'tiny'"):
        bench.run_benchmarks(scale=True, scale_regime="tiny")
