"""The seed wing through the command line: ``simulate`` and ``compare`` on the
``seed-artist`` scenario (the seed's own policies, its simulator), on a cut
of the seed week, through the real entry point (``python -m ddl_gym.cli``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from ddl_gym.traces import find_data_dir

REPO = Path(__file__).resolve().parents[1]
DATA = find_data_dir()
needs_week = pytest.mark.skipif(
    DATA is None
    or not (DATA / "traces/dally/sense_500jobs_poisson_1proc-week.json").is_file()
    or not (DATA / "profiles/dally_astra/slowdowns.csv").is_file(),
    reason="needs ../shared/data (seed week and slowdown table)",
)
JOBS = 8  # the seed week's first jobs: about a CPU second per policy


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if DATA is not None:
        env["DDL_GYM_DATA"] = str(DATA)
    return subprocess.run(
        [sys.executable, "-m", "ddl_gym.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@needs_week
def test_simulate_seed_artist_runs_the_seed_dally_with_a_progress_bar(tmp_path):
    """The progress bar is on (no --no-progress): the seed simulator reports
    finished jobs itself, the engine's policy wrapper is not in its way."""
    args = ("simulate", "-s", "seed-artist", "-p", "dally", "--jobs", str(JOBS))
    proc = ok(cli(*args, "--out", str(tmp_path), "--name", "sim", cwd=tmp_path))
    assert "dally on seed-artist" in proc.stdout
    assert f"({JOBS} jobs)" in proc.stdout
    assert f"{JOBS}/{JOBS}" in proc.stderr  # the bar reached every job
    folder = tmp_path / "sim"
    jobs = pd.read_csv(folder / "jobs.csv")
    assert len(jobs) == JOBS
    assert jobs["end_s"].notna().all()
    assert (jobs["jct_s"] >= jobs["run_s"] - 1e-6).all()
    summary = pd.read_csv(folder / "summary.csv")
    assert summary["completed"].tolist() == [JOBS]
    assert summary["makespan_s"].iloc[0] > 0
    assert (folder / "report.md").is_file()
    assert 'mode = "seed"' in (folder / "config.toml").read_text()


@needs_week
def test_compare_seed_artist_matches_simulate(tmp_path):
    """``compare`` runs the same seed policies; its dally row is the very run
    ``simulate`` makes (same summary, bit for bit)."""
    cut = ("-s", "seed-artist", "--jobs", str(JOBS), "--out", str(tmp_path), "--no-progress")
    ok(cli("compare", *cut, "--policies", "dally,tiresias", "--name", "cmp", cwd=tmp_path))
    ok(cli("simulate", *cut, "-p", "dally", "--name", "sim", cwd=tmp_path))
    compared = pd.read_csv(tmp_path / "cmp" / "summary.csv").set_index("policy")
    assert sorted(compared.index) == ["dally", "tiresias"]
    assert (compared["completed"] == JOBS).all()
    assert not compared["clairvoyant"].any()
    simulated = pd.read_csv(tmp_path / "sim" / "summary.csv").iloc[0]
    for column in ("makespan_s", "mean_jct_s", "comm_s", "preemptions", "events"):
        assert compared.loc["dally", column] == simulated[column], column


@needs_week
def test_simulate_seed_artist_names_the_seed_policies_for_an_engine_policy(tmp_path):
    proc = cli(
        "simulate", "-s", "seed-artist", "-p", "fifo", "--jobs", "4", "--no-save", cwd=tmp_path
    )
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert "no seed-mode policy 'fifo'" in proc.stderr
    assert "dally-1-2" in proc.stderr


MIX = "traces/dally/sense_500jobs_poisson-25jobsPday.json"


@pytest.mark.skipif(
    DATA is None
    or not (DATA / MIX).is_file()
    or not (DATA / "profiles/dally_astra/slowdowns.csv").is_file(),
    reason="needs ../shared/data (a 500-job trace and the slowdown table)",
)
def test_simulate_seed_artist_takes_a_500_job_trace(tmp_path):
    """Any seed-format trace runs in the seed mode: here the 500-job mix, whose
    arrivals are not sorted (a cut of its first jobs: the whole trace takes
    minutes of CPU under Dally)."""
    assert DATA is not None
    args = ("simulate", "-s", "seed-artist", "--trace", str(DATA / MIX), "-p", "dally")
    proc = ok(cli(*args, "--jobs", "12", "--no-progress", "--out", str(tmp_path), cwd=tmp_path))
    assert "dally on seed-artist: sense_500jobs_poisson-25jobsPday (12 jobs)" in proc.stdout
    jobs = pd.read_csv(next(tmp_path.glob("*/jobs.csv")))
    assert len(jobs) == 12
    assert jobs["end_s"].notna().all()
