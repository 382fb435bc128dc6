"""scripts/compare.py (ddl_gym.experiments.grid): the --quick preset writes every output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
from ddl_gym.baselines import POLICY_NAMES

ROOT = Path(__file__).resolve().parents[1]


def test_quick_compare_writes_tables_csv_and_plots(tmp_path):
    out = tmp_path / "compare"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "compare.py"), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    for name in ("cells.csv", "summary.csv", "improvement.csv", "tables.md"):
        assert (out / name).is_file(), name
    assert (out / "jct_cdf_default.png").stat().st_size > 0
    assert (out / "bars_default.png").stat().st_size > 0
    table = proc.stdout
    # every baseline and the shipped learned agent, side by side
    expected = [*POLICY_NAMES, "agent"]
    for policy in expected:
        assert f"| {policy} |" in table, policy
    assert "dally vs best of tiresias/gandiva" in table
    cells = pd.read_csv(out / "cells.csv")
    assert set(cells["policy"]) == set(expected)
    assert (cells["completed"] == cells["jobs"]).all()


def test_run_cell_is_a_pure_function():
    from ddl_gym.experiments.grid import run_cell

    a = run_cell("tiresias", "default", "moderate", 1, max_jobs=40)
    b = run_cell("tiresias", "default", "moderate", 1, max_jobs=40)
    assert a["policy"] == "tiresias" and a["completed"] == 40
    assert {k: v for k, v in a.items() if k not in ("wall_s", "jct_s")} == {
        k: v for k, v in b.items() if k not in ("wall_s", "jct_s")
    }


def test_unknown_policy_is_a_clear_error(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "compare.py"), "--policies", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 2 and "unknown policy 'nope'" in proc.stderr
    assert "Traceback" not in proc.stderr
