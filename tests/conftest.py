"""Fixtures shared by the test modules: the real data set, when present.

A test that needs the data dir either takes the ``data_dir`` fixture or
carries ``@pytest.mark.needs_data`` (for tests that reach the data through a
benchmark case, not a path); both skip with the reason when there is no data
dir (a bare clone: ``DDL_GYM_DATA=/nonexistent``), so the suite passes there.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from ddl_gym.traces import TraceWarning, discover_traces, find_data_dir, load_trace

SEED_WEEK = "traces/dally/sense_500jobs_poisson_1proc-week.json"
PHILLY_WEEK = "traces/philly/philly_2017-11-13_to_2017-11-19.csv"


def no_data_reason() -> str:
    """Why there is no data dir, and how to get one."""
    env = os.environ.get("DDL_GYM_DATA")
    where = (
        f"DDL_GYM_DATA={env} is not a directory" if env else "no ../shared/data and no fetched data"
    )
    return f"needs the data dir ({where}; `ddl-gym data fetch` or set DDL_GYM_DATA)"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = find_data_dir()
    if path is None:
        pytest.skip(no_data_reason())
    return path


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "needs_data: reads benchmark or trace data files; skipped without a data dir"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # before any fixture is set up: a module fixture that builds a data case never runs
    if item.get_closest_marker("needs_data") is not None and find_data_dir() is None:
        pytest.skip(no_data_reason())


@pytest.fixture(scope="session")
def seed_trace_path(data_dir: Path) -> Path:
    return data_dir / SEED_WEEK


@pytest.fixture(scope="session")
def all_traces(data_dir: Path, request: pytest.FixtureRequest) -> dict:
    """Real traces by name: with ``--golden-full`` every trace of the data dir;
    by default the smallest of each family (folder), which covers every
    loader, schema and shape without running five Philly weeks and ten Sia
    workloads through every policy (that alone took most of the suite)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)  # Alibaba's skipped pods
        traces = {name: load_trace(path) for name, path in discover_traces(data_dir).items()}
    assert traces, f"no traces found under {data_dir}"
    if request.config.getoption("--golden-full"):
        return traces
    smallest: dict[str, str] = {}
    for name in sorted(traces):
        family = name.rpartition("/")[0]
        if family not in smallest or len(traces[name].jobs) < len(traces[smallest[family]].jobs):
            smallest[family] = name
    return {name: traces[name] for name in sorted(smallest.values())}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--golden-full",
        action="store_true",
        help="compare every golden cell (all policies, both weeks, three congestion levels) "
        "and run every real trace, not the smallest of each family",
    )
