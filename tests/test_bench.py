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
        "events": 7,
        "peak_rss_mib": 90.0,
        "offered_load": 0.8,
        "utilization": 0.5,
        "window_utilization": 0.8,
    }


def test_scale_rows_keep_the_least_cpu_of_the_repeats(monkeypatch):
    runs = iter([_row(3.0), None, _row(2.0)])  # None: stopped at the CPU limit
    monkeypatch.setattr(bench, "_scale_run", lambda n, name, limit: next(runs))
    (row,) = bench.scale_rows([100], ["fifo"], cpu_limit_s=5.0, repeat=3)
    assert row["cpu_s"] == 2.0 and row["runs"] == 3


def test_scale_rows_stopped_every_time_report_the_limit(monkeypatch):
    monkeypatch.setattr(bench, "_scale_run", lambda n, name, limit: None)
    (row,) = bench.scale_rows([100], ["fifo"], cpu_limit_s=5.0, repeat=2)
    assert row["cpu_s"] is None and row["limit"] == 5.0


def test_scale_run_in_a_fresh_process():
    row = bench._scale_run(200, "fifo", None)
    assert row["jobs"] == 200 and row["cpu_s"] > 0 and row["events"] > 0
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


def test_markdown_scale_table_shows_memory_and_busy_share():
    table = bench.markdown([_row(2.0)], with_memory=True)
    assert table.splitlines()[0].endswith("| peak MiB | busy |")
    assert table.splitlines()[-1] == "| 100 | fifo | 2.00 | 50 | 7 | 90 | 0.80 |"
