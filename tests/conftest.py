"""Fixtures shared by the test modules: the real data set, when present."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from ddl_gym.traces import TraceWarning, discover_traces, find_data_dir, load_trace

SEED_WEEK = "traces/dally/sense_500jobs_poisson_1proc-week.json"
PHILLY_WEEK = "traces/philly/philly_2017-11-13_to_2017-11-19.csv"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = find_data_dir()
    if path is None:
        pytest.skip("../shared/data not found (set DDL_GYM_DATA): real-trace tests skipped")
    return path


@pytest.fixture(scope="session")
def seed_trace_path(data_dir: Path) -> Path:
    return data_dir / SEED_WEEK


@pytest.fixture(scope="session")
def all_traces(data_dir: Path) -> dict:
    traces = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)  # Alibaba's skipped pods
        for name, path in discover_traces(data_dir).items():
            traces[name] = load_trace(path)
    assert traces, f"no traces found under {data_dir}"
    return traces


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--golden-full",
        action="store_true",
        help="compare every golden cell (all policies, both weeks, three congestion levels)",
    )
