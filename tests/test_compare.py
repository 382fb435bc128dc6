"""The one comparison front-end (``ddl-gym compare``; ``scripts/compare.py``
and ``scripts/run.sh`` call it): named-workload grids, Ctrl-C, --resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from ddl_gym.baselines import POLICY_NAMES

from ddl_gym.traces import default_trace

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def compare(*args: str, script: bool = False, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [str(ROOT / "scripts" / "compare.py")] if script else ["-m", "ddl_gym.cli", "compare"]
    proc = subprocess.run(
        [sys.executable, *cmd, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=ENV,
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_script_is_the_cli_front_end_and_writes_workload_tables(tmp_path):
    # scripts/compare.py takes `ddl-gym compare`'s options (comma lists,
    # --seeds as a list or range, `all` and `agent` policies)
    proc = compare(
        "--workloads", "default", "--quick", "--policies", "all,agent",
        "--congestions", "none,heavy", "--jobs", "30", "--seeds", "0-1",
        "--out", str(tmp_path), "--name", "q", "--no-progress",
        script=True,
    )  # fmt: skip
    out = tmp_path / "q"
    for name in ("summary.csv", "means.csv", "improvement.csv", "tables.md", "report.md"):
        assert (out / name).is_file(), name
    assert (out / "bars_default.png").stat().st_size > 0
    expected = [*POLICY_NAMES, "agent"]
    for policy in expected:
        label = f"{policy} (oracle)" if policy in ("sjf", "srtf") else policy
        assert f"| {label} |" in proc.stdout, policy
    assert "Clairvoyant: only sjf, srtf, labelled (oracle)" in proc.stdout
    assert "dally vs best of tiresias/gandiva" in proc.stdout
    cells = pd.read_csv(out / "summary.csv")
    assert set(cells["policy"]) == set(expected)
    assert set(cells.loc[cells["clairvoyant"], "policy"]) == {"sjf", "srtf"}
    assert (cells["completed"] == cells["jobs"]).all() and (cells["jobs"] == 30).all()
    # the synthetic workload varies with the seed: every policy runs both
    assert len(cells) == len(expected) * 2 * 2


def test_run_cell_is_a_pure_function():
    from ddl_gym.experiments.grid import run_cell

    a = run_cell("tiresias", "default", "moderate", 1, max_jobs=40)
    b = run_cell("tiresias", "default", "moderate", 1, max_jobs=40)
    assert a["policy"] == "tiresias" and a["completed"] == 40
    assert {k: v for k, v in a.items() if k not in ("wall_s", "jct_s")} == {
        k: v for k, v in b.items() if k not in ("wall_s", "jct_s")
    }


def test_dally_cells_get_leases_from_the_policy():
    """simulate() applies the policy's engine_kwargs(): no caller passes them."""
    from ddl_gym.experiments.grid import run_cell

    dally = run_cell("dally", "default", "heavy", 0, max_jobs=80)
    delay_only = run_cell("dally-delay", "default", "heavy", 0, max_jobs=80)
    assert dally["preemptions"] > 0 and delay_only["preemptions"] == 0


def test_bad_names_are_clear_errors():
    for args, text in (
        (["--policies", "nope"], "unknown policy 'nope'"),
        (["--workloads", "seed-1proc-week"], "unknown workloads"),
        (["--seeds", "3-1"], "--seeds"),
    ):
        proc = compare(*args, "--no-save", script=True, check=False)
        assert proc.returncode == 2 and text in proc.stderr, (args, proc.stderr)
        assert "Traceback" not in proc.stderr


GRID = ["-s", "default", "--policies", "fifo,tiresias", "--seeds", "0-5"]
GRID += ["--congestions", "heavy", "--no-progress"]


def _interrupt_after_first_cell(args: list[str], cells: Path) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ddl_gym.cli", "compare", *args],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a shell's background job ignores SIGINT; give the child Python's usual Ctrl-C
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 120
    while time.time() < deadline and not (cells.is_dir() and any(cells.glob("*.json"))):
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


@pytest.mark.parametrize("processes", ["1", "2"])
def test_interrupted_run_resumes_to_the_uninterrupted_table(tmp_path, processes):
    full = compare(*GRID, "--out", str(tmp_path), "--name", "full")
    assert full.returncode == 0

    args = [*GRID, "--processes", processes, "--out", str(tmp_path), "--name", "cut"]
    cut = _interrupt_after_first_cell(args, tmp_path / "cut" / "cells")
    assert cut.returncode == 130, (cut.stdout, cut.stderr)
    assert "Traceback" not in cut.stderr and "KeyboardInterrupt" not in cut.stderr
    finished = len(list((tmp_path / "cut" / "cells").glob("*.json")))
    n = 2 * 6
    assert 1 <= finished < n, "the interrupt came too late to test resuming"
    assert f"--resume {tmp_path / 'cut'}" in cut.stdout
    assert len(pd.read_csv(tmp_path / "cut" / "summary.csv")) == finished

    resumed = compare("--resume", str(tmp_path / "cut"), "--no-progress")
    assert f"{finished} of {n} cells already finished" in resumed.stdout
    for table in ("summary", "jobs"):
        # wall_s: the cell's own run time, the one column that may differ
        a = pd.read_csv(tmp_path / "full" / f"{table}.csv").drop(columns="wall_s", errors="ignore")
        b = pd.read_csv(tmp_path / "cut" / f"{table}.csv").drop(columns="wall_s", errors="ignore")
        pd.testing.assert_frame_equal(a, b)
    report = (tmp_path / "cut" / "report.md").read_text()
    assert "(interrupted)" not in report and "Interrupted:" not in report


def test_resume_refuses_another_grids_cells(tmp_path):
    compare("-s", "small", "--policies", "fifo", "--out", str(tmp_path), "--name", "r")
    config = tmp_path / "r" / "config.toml"
    config.write_text(config.read_text().replace('policies = ["fifo"]', 'policies = ["dally"]'))
    proc = compare("--resume", str(tmp_path / "r"), check=False)
    assert proc.returncode == 2 and "resume a run with the settings" in proc.stderr


def test_improvement_units_and_near_zero_bases():
    """Ratios improve by their difference, times by % of the base, and a ~0
    base (the source of the "-9985%" queue rows) gives n/a, never a % of it."""
    from ddl_gym.experiments import grid

    def row(policy, makespan_h, queue_h, comm, util):
        r = {m: 0.0 for m, *_ in grid.METRICS}
        r |= {
            "workload": "default",
            "congestion": "none",
            "policy": policy,
            "makespan_s": makespan_h * 3600,
            "mean_jct_s": makespan_h * 1800,
            "p95_jct_s": makespan_h * 3600,
            "p99_jct_s": makespan_h * 3600,
            "mean_queueing_s": queue_h * 3600,
            "comm_overhead": comm,
            "comm_gpu_h": comm * 100,
            "gpu_utilization": util,
        }
        return r

    summary = pd.DataFrame(
        [
            row("tiresias", 100.0, 0.004, 0.40, 0.90),
            row("gandiva", 80.0, 0.5, 0.35, 0.80),
            row("dally", 120.0, 4.0, 1.40, 0.95),
            row("fifo", 300.0, 400.0, 2.0, 0.5),
        ]
    )
    imp = grid.improvement(summary).iloc[0]
    assert imp["makespan_s"] == pytest.approx(-50.0)  # 120 h vs the best 80 h
    assert imp["comm_overhead"] == pytest.approx(0.35 - 1.40)  # a difference of ratios
    assert imp["gpu_utilization"] == pytest.approx(0.95 - 0.90)
    # best queue 0.004 h is under 1% of the largest (400 h): -99,900% would be noise
    assert pd.isna(imp["mean_queueing_s"])
    # the "-9985%" rows: a short (not ~0) base, shown as a factor
    assert grid.improvement_cell("mean_queueing_s", -9985.0) == "101× worse"
    assert grid.improvement_cell("mean_jct_s", -621.0) == "7.2× worse"
    assert grid.improvement_cell("mean_jct_s", -39.4) == "-39%"
    md = grid.markdown(summary, grid.improvement(summary), "default")
    assert "comm_overhead (comm/compute)" in md and "comm ovh %" not in md
    last = next(line for line in md.splitlines() if "dally vs" in line)
    assert "| -50% |" in last and "| -1.05 |" in last and "| +5.0 pt |" in last
    assert "| n/a |" in last
    assert "%" not in last.split("|")[8]  # no percent of a ratio
    assert not any(len(cell.strip()) > 12 for cell in last.split("|")[3:])


def test_oracles_are_clairvoyant_and_labelled_and_the_rest_are_not():
    """The engine is non-clairvoyant by default; SJF/SRTF ask for true job
    sizes, and every table says so."""
    from ddl_gym.engine import Engine
    from ddl_gym.experiments import grid as wgrid

    assert Engine(default_trace(seed=0), "seed64").clairvoyant is False
    cells = pd.DataFrame(
        [
            wgrid.run_cell(p, "default", "heavy", 0, max_jobs=20)
            for p in ("fifo", "srtf", "dally", "tiresias", "gandiva")
        ]
    ).drop(columns=["jct_s"])
    assert dict(zip(cells["policy"], cells["clairvoyant"], strict=True)) == {
        "fifo": False,
        "srtf": True,
        "dally": False,
        "tiresias": False,
        "gandiva": False,
    }
    means = wgrid.summarise(cells)
    text = wgrid.markdown(means, wgrid.improvement(means), "default")
    assert "| heavy | srtf (oracle) |" in text and "| heavy | fifo |" in text
    assert "Clairvoyant: only srtf, labelled (oracle)" in text
    # an explicit choice wins over the policy's: non-clairvoyant SRTF is no oracle
    assert not wgrid.is_clairvoyant(wgrid.policy_from_name("srtf"), {"clairvoyant": False})


def test_tie_note_names_groups_where_every_policy_ties():
    from ddl_gym.experiments.grid import tie_note

    rows = [
        # philly-week/none: two policies, two seeds, the same numbers -> a tie
        ("fifo", "philly-week", "none", 0, 10.0, 2.0),
        ("dally", "philly-week", "none", 0, 10.0, 2.0),
        ("fifo", "philly-week", "none", 1, 12.0, 3.0),
        ("dally", "philly-week", "none", 1, 12.0, 3.0),
        # default/heavy: mean JCT differs -> no tie
        ("fifo", "default", "heavy", 0, 10.0, 2.0),
        ("dally", "default", "heavy", 0, 10.0, 2.5),
        # one policy alone is no tie
        ("fifo", "small", "none", 0, 1.0, 1.0),
    ]
    cols = ["policy", "workload", "congestion", "seed", "makespan_s", "mean_jct_s"]
    note = tie_note(pd.DataFrame(rows, columns=cols))
    assert note.count("\n") == 0
    assert "all 2 policies tie on philly-week at congestion none" in note
    assert tie_note(pd.DataFrame(rows[4:], columns=cols)) == ""
