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
from ddl_gym.baselines import ORACLES, POLICY_NAMES

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
        label = f"{policy} (oracle)" if policy in ORACLES else policy
        assert f"| {label} | 2 |" in proc.stdout, policy
    assert f"Clairvoyant: only {', '.join(sorted(ORACLES))}, labelled (oracle)" in proc.stdout
    assert "dally / best of tiresias, gandiva" in proc.stdout
    cells = pd.read_csv(out / "summary.csv")
    assert set(cells["policy"]) == set(expected)
    assert set(cells.loc[cells["clairvoyant"], "policy"]) == set(ORACLES)
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


def _cells(rows):
    """Cells from (policy, seed, makespan h, queue h, comm, util) tuples."""
    from ddl_gym.experiments import grid

    out = []
    for policy, seed, makespan_h, queue_h, comm, util in rows:
        r = {m: 0.0 for m, *_ in grid.METRICS}
        r |= {
            "workload": "default",
            "congestion": "none",
            "policy": policy,
            "seed": seed,
            "makespan_s": makespan_h * 3600,
            "mean_jct_s": makespan_h * 1800,
            "p95_jct_s": makespan_h * 3600,
            "p99_jct_s": makespan_h * 3600,
            "mean_queueing_s": queue_h * 3600,
            "comm_overhead": comm,
            "comm_gpu_h": comm * 100,
            "gpu_utilization": util,
        }
        out.append(r)
    return pd.DataFrame(out)


T2 = 4.302652729749464  # t(0.975, 2 degrees of freedom)


def test_means_carry_t_intervals_and_one_seed_says_n_1():
    from ddl_gym.experiments import grid

    cells = _cells(
        [("fifo", s, h, 0.0, 1.0, 0.5) for s, h in enumerate((1.0, 2.0, 3.0))]
        + [("dally", 0, 5.0, 0.0, 1.0, 0.5)]
    )
    means = grid.summarise(cells).set_index("policy")
    # 1, 2, 3 h: mean 2, s = 1, half width t(0.975, 2) / sqrt(3)
    assert means.loc["fifo", "makespan_s"] == pytest.approx(2 * 3600)
    assert means.loc["fifo", "makespan_s_ci95"] == pytest.approx(3600 * T2 / 3**0.5)
    assert means.loc["fifo", "seeds"] == 3
    assert pd.isna(means.loc["dally", "makespan_s_ci95"]) and means.loc["dally", "seeds"] == 1
    md = grid.markdown(grid.summarise(cells), grid.improvement(cells), "default")
    assert "| none | fifo | 3 | 2.00 ± 2.48 |" in md
    assert "| none | dally | 1 | 5.00 |" in md
    assert "Student-t 95% interval" in md and "n = 1" in md


def test_ratio_rows_are_ratios_of_means_with_intervals():
    from ddl_gym.experiments import grid

    rows = [
        # makespan: dally 2, 3, 4 h over tiresias 1 h each seed (gandiva worse)
        *(("dally", s, h, 0.01 * (s + 1), 0.2, 0.9) for s, h in enumerate((2.0, 3.0, 4.0))),
        *(("tiresias", s, 1.0, 0.004, 0.4, 0.8) for s in range(3)),
        *(("gandiva", s, 8.0, 0.5, 0.1, 0.7) for s in range(3)),
    ]
    imp = grid.improvement(_cells(rows)).iloc[0]
    # paired by seed: R = 3, residuals -1, 0, 1 -> half width t / sqrt(3)
    assert imp["makespan_s"] == pytest.approx(3.0) and imp["makespan_s_base"] == "tiresias"
    assert imp["makespan_s_low"] == pytest.approx(3.0 - T2 / 3**0.5)
    assert imp["makespan_s_high"] == pytest.approx(3.0 + T2 / 3**0.5)
    # the small queue base (0.004 h) is a ratio like any other, never n/a
    assert imp["mean_queueing_s"] == pytest.approx(0.02 / 0.004)
    # best of the two per metric: gandiva has the lower comm, tiresias the higher util
    assert (
        imp["comm_overhead"] == pytest.approx(0.2 / 0.1) and imp["comm_overhead_base"] == "gandiva"
    )
    assert imp["gpu_utilization"] == pytest.approx(0.9 / 0.8)
    # exact ratios have a zero-width interval
    assert imp["comm_overhead_low"] == pytest.approx(imp["comm_overhead_high"])
    md = grid.markdown(grid.summarise(_cells(rows)), grid.improvement(_cells(rows)), "default")
    last = next(line for line in md.splitlines() if "dally / best" in line)
    assert "| 3.00× (0.52–5.48) |" in last and "n/a" not in last


def test_ratio_row_does_not_depend_on_other_policies():
    """FIFO's 222 h queue once set a near-zero threshold that turned the row into n/a."""
    from ddl_gym.experiments import grid

    rows = [
        *(("dally", s, 2.0 + s, 2.18 + s, 0.5, 0.9) for s in range(3)),
        *(("tiresias", s, 1.5, 0.02 + 0.01 * s, 0.4, 0.8) for s in range(3)),
        *(("gandiva", s, 1.7, 1.0, 0.3, 0.8) for s in range(3)),
    ]
    alone = grid.improvement(_cells(rows))
    crowded = grid.improvement(
        _cells(rows + [("fifo", s, 300.0, 222.0, 5.0, 0.3) for s in range(3)])
    )
    pd.testing.assert_frame_equal(alone, crowded)
    assert alone["mean_queueing_s"].notna().all()


def test_ratio_of_one_run_each_has_no_interval_and_zero_base_is_na():
    from ddl_gym.experiments import grid

    rows = [("dally", 0, 3.0, 1.0, 0.5, 0.9), ("tiresias", 0, 2.0, 0.0, 0.4, 0.8)]
    imp = grid.improvement(_cells(rows)).iloc[0]
    assert imp["makespan_s"] == pytest.approx(1.5) and pd.isna(imp["makespan_s_low"])
    assert pd.isna(imp["mean_queueing_s"])  # base 0: no ratio exists
    assert grid.improvement_cell(imp, "makespan_s") == "1.50×"
    assert grid.improvement_cell(imp, "mean_queueing_s") == "n/a"


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
    text = wgrid.markdown(means, wgrid.improvement(cells), "default")
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


def test_scenario_compare_prints_spread_and_ratio_rows():
    proc = compare(
        "-s", "default", "--policies", "fifo,tiresias,gandiva,dally", "--seeds", "0-1",
        "--congestions", "heavy", "--jobs", "30", "--no-save", "--no-progress",
    )  # fmt: skip
    out = proc.stdout
    assert "4 policies x 1 congestion level x 2 seeds = 8 cells" in out
    assert " ± " in out and "Student-t 95% interval" in out
    assert "Dally / the better of Tiresias and Gandiva" in out and "×" in out
