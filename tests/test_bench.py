"""The benchmark harness (``ddl_gym.bench``): what it keeps and prints."""

from __future__ import annotations

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
