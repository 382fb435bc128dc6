"""The ``ddl-gym`` command line, through its real entry point (a subprocess
running ``python -m ddl_gym.cli``, which is what the console script calls)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from ddl_gym.scenarios import SCENARIOS, ScenarioError, get_scenario, scenario_from_dict
from ddl_gym.traces import find_data_dir

REPO = Path(__file__).resolve().parents[1]
COMMANDS = (
    "scenarios",
    "simulate",
    "compare",
    "train",
    "evaluate",
    "calibrate",
    "traces",
    "bench",
)


def cli(*args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "ddl_gym.cli", *args],
        cwd=cwd or REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def assert_user_error(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    for w in words:
        assert w in proc.stderr, proc.stderr


def test_help_of_every_command_has_examples():
    top = cli("--help")
    for name in COMMANDS:
        assert name in top.stdout
    for name in COMMANDS:
        out = cli(name, "--help").stdout
        assert "examples:" in out, name
        assert f"ddl-gym {name}" in out, name


def test_scenarios_list_and_show_roundtrip(tmp_path):
    out = cli("scenarios").stdout
    for name in SCENARIOS:
        assert name in out
    text = cli("scenarios", "show", "small").stdout
    path = tmp_path / "mine.toml"
    path.write_text(text)
    scenario, extra = get_scenario(str(path))
    assert scenario == SCENARIOS["small"] and extra == {}


def test_simulate_writes_a_run_folder_that_repeats(tmp_path):
    out = cli(
        "simulate", "-s", "small", "-p", "dally", "--out", str(tmp_path), "--name", "r1"
    ).stdout
    folder = tmp_path / "r1"
    for f in (
        "config.toml",
        "summary.csv",
        "summary.parquet",
        "jobs.csv",
        "jobs.parquet",
        "series.csv",
        "placements.csv",
        "report.md",
        "jct_cdf.png",
        "metrics.png",
        "series.png",
        "levels.png",
        "timeline.png",
    ):
        assert (folder / f).is_file(), f
    report = (folder / "report.md").read_text()
    assert "![Placement timeline](timeline.png)" in report
    jobs = pd.read_parquet(folder / "jobs.parquet")
    assert len(jobs) == 16 and (jobs["policy"] == "dally").all()
    # placements cover every job, and never more GPUs on a server than it has
    place = pd.read_csv(folder / "placements.csv")
    assert set(place["job"]) == set(range(16))
    # segments (dally preempts and moves jobs) add up to each job's run time
    seg = place.drop_duplicates(["job", "start_s"])
    held = (seg["end_s"] - seg["start_s"]).groupby(seg["job"]).sum()
    assert abs(held.to_numpy() - jobs["run_s"].to_numpy()).max() < 1e-3
    # repeating from the saved config gives the same table
    again = cli("simulate", "--config", str(folder / "config.toml"), "--no-save").stdout
    assert out.splitlines()[:4] == again.splitlines()[:4]


def test_simulate_from_toml_with_overrides(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(
        'trace = "default"\njobs = 20\ncluster = "seed64"\ncongestion = 0.3\n'
        '[run]\npolicy = "fifo"\n'
    )
    out = cli("simulate", "-s", str(path), "--congestion", "none", "--no-save").stdout
    assert "tiny" in out and "congestion none" in out


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("simulate", "-s", "no-such-scenario"), ("unknown scenario", "small")),
        (("simulate", "-s", "missing.toml"), ("missing.toml", "no such scenario file")),
        (("simulate", "--config", "nope/config.toml"), ("no such config file",)),
        (("simulate", "-s", "small", "--policy", "nope"), ("nope",)),
        (("simulate", "-s", "small", "--cluster", "huge"), ("unknown cluster",)),
        (("traces", "inspect", "nope.csv"), ("nope.csv",)),
        (("calibrate", "--data", "/no/such/dir"), ()),
    ],
)
def test_user_errors_are_one_line(args, words):
    proc = cli(*args, check=False)
    assert_user_error(proc, *words)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("trace = [unclosed\n", ("not valid TOML",)),
        ('trace = "default"\ncolour = "red"\n', ("unknown key", "colour")),
        ('congestion = "extreme"\n', ("congestion", "extreme")),
        ("jobs = -3\n", ("jobs", "positive")),
        ('trace = "synthetic"\n', ("[synthetic]",)),
    ],
)
def test_bad_toml_files(tmp_path, text, words):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert_user_error(cli("simulate", "-s", str(path), check=False), *words)


def test_scenario_validation_in_process():
    with pytest.raises(ScenarioError, match="fabric"):
        scenario_from_dict({"name": "x", "fabric": "copper"})
    with pytest.raises(ScenarioError, match="seeds"):
        scenario_from_dict({"name": "x", "seeds": ["a"]})
    s = SCENARIOS["default"].replace(jobs=5)
    assert len(s.build_trace(0)) == 5


def test_traces_inspect_and_convert(tmp_path):
    out = cli("traces", "inspect", "default").stdout
    for word in ("jobs", "span", "arrival rate", "GPUs per job", "models", "GPU-hours", "p50"):
        assert word in out
    cli("traces", "convert", "-s", "small", str(tmp_path / "s.parquet"))
    cli("traces", "convert", "-s", "small", str(tmp_path / "s.csv"))
    a = pd.read_parquet(tmp_path / "s.parquet")
    b = pd.read_csv(tmp_path / "s.csv")
    assert len(a) == len(b) == 16
    back = cli("traces", "inspect", str(tmp_path / "s.csv")).stdout
    assert "16" in back
    listing = cli("traces", "list").stdout
    assert "default" in listing and "seed-week" in listing
    assert_user_error(cli("traces", "convert", "default", str(tmp_path / "x.txt"), check=False))


@pytest.mark.skipif(find_data_dir() is None, reason="needs ../shared/data (or $DDL_GYM_DATA)")
def test_traces_inspect_real_file():
    out = cli("traces", "inspect", "seed-week").stdout
    assert "411" in out


def test_bench(tmp_path):
    out = cli("bench", "-s", "small", "--repeat", "1", "--no-progress").stdout
    assert "jobs_per_s" in out and "small" in out


def test_train_and_evaluate_call_the_agents_library(tmp_path):
    """``train`` and ``evaluate`` call ``agents.train.train`` and
    ``agents.evaluate.evaluate`` with the scenario's settings as arguments."""
    out = tmp_path / "agent"
    proc = cli(
        "train",
        "-s",
        "default",
        "--out",
        str(out),
        "--timesteps",
        "64",
        "--vec-env",
        "dummy",
        "--no-progress",
    )
    # 64 steps end before the first validation: best/ holds the final model,
    # and the line printed names it (it named final.zip with best/ empty)
    best = out / "best" / "best_model.zip"
    assert f"best model: {best}" in proc.stdout and best.is_file()
    saved = json.loads((out / "config.json").read_text())
    assert saved["total_timesteps"] == 64 and saved["vec_env"] == "dummy"
    assert saved["env"]["cluster"] == "seed64" and saved["split"]["traces"] == ["default:0-9"]
    model = next(out.glob("*.zip"))
    ev = cli(
        "evaluate",
        "-s",
        "default",
        "--model",
        str(model),
        "--seeds",
        "0",
        "--baselines",
        "fifo",
        "--window-h",
        "2",
        "--no-progress",
    )
    assert "fifo" in ev.stdout and "mean JCT" in ev.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text("seed = [unclosed\n")
    assert_user_error(
        cli("train", "--train-config", str(bad), "--out", str(out), check=False), "not valid TOML"
    )


def test_compare_local_writes_cells_and_report(tmp_path):
    out = cli(
        "compare",
        "-s",
        "small",
        "--policies",
        "fifo",
        "--seeds",
        "0,1",
        "--out",
        str(tmp_path),
        "--name",
        "c",
        "--no-progress",
    ).stdout
    folder = tmp_path / "c"
    summary = pd.read_csv(folder / "summary.csv")
    assert len(summary) == 1 * 2 * 2  # policies x the scenario's 2 levels x seeds
    assert len(list((folder / "cells").glob("*.json"))) == 4
    for f in ("metrics.png", "levels.png", "jct_cdf.png", "report.md", "jobs.parquet"):
        assert (folder / f).is_file(), f
    assert "fifo" in out
    again = cli("compare", "--config", str(folder / "config.toml"), "--no-save", "--no-progress")
    assert again.stdout.splitlines()[1:] == out.splitlines()[1:-1]
    assert_user_error(
        cli("compare", "-s", "small", "--policies", "fifo,bogus", "--no-save", check=False),
        "bogus",
    )


def test_compare_ctrl_c_keeps_finished_cells(tmp_path):
    import signal
    import time

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ddl_gym.cli",
            "compare",
            "-s",
            "default",
            "--policies",
            "fifo",
            "--seeds",
            ",".join(map(str, range(20))),
            "--out",
            str(tmp_path),
            "--name",
            "i",
            "--no-progress",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell's background job (CI runners, `cmd &`) ignores SIGINT and
        # its children inherit that; give the child Python's usual Ctrl-C.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    cells = tmp_path / "i" / "cells"
    deadline = time.time() + 120
    while time.time() < deadline and not (cells.is_dir() and any(cells.iterdir())):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, (stdout, stderr)
    assert "Traceback" not in stderr
    finished = len(list(cells.glob("*.json")))
    summary = pd.read_csv(tmp_path / "i" / "summary.csv")
    assert 1 <= len(summary) == finished < 60
    assert "interrupted" in (tmp_path / "i" / "report.md").read_text()


def test_text_table_never_prints_scientific_notation():
    import pandas as pd

    from ddl_gym.cli.common import text_table

    df = pd.DataFrame({"policy": ["dally", "tiresias"], "makespan_h": [10000.8, 10307.0]})
    df["mean_jct_h"] = [924.4, 2.04]
    text = text_table(df)
    assert "e+" not in text
    assert "10,001" in text and "10,307" in text and "924.4" in text and "2.04" in text


def test_version(capsys):
    import ddl_gym
    from ddl_gym.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"ddl-gym {ddl_gym.__version__}"


def test_traces_inspect_takes_compare_workload_names(data_dir, capsys):
    """One set of workload names: what `compare --workloads` takes, `traces
    inspect` takes too (pollux-1 was refused)."""
    from ddl_gym.cli.main import main

    assert main(["traces", "inspect", "pollux-1"]) == 0
    out = capsys.readouterr().out
    assert "workload-1" in out and "160" in out


def test_train_takes_a_synthetic_scenario_as_trace_files(tmp_path):
    """`ddl-gym train -s small` was refused ("not [synthetic] specs"): a
    synthetic scenario becomes ten drawn traces, written where the run is,
    that load back as the scenario draws them."""
    from ddl_gym.cli.workload import SYNTHETIC_SEEDS, agent_trace_specs
    from ddl_gym.scenarios import SCENARIOS
    from ddl_gym.traces import load_trace

    small = SCENARIOS["small"]
    specs = agent_trace_specs(small, tmp_path)
    assert len(specs) == len(SYNTHETIC_SEEDS)
    for seed, spec in zip(SYNTHETIC_SEEDS, specs, strict=True):
        assert spec.startswith(str(tmp_path / "traces"))
        got, want = load_trace(spec).jobs, small.build_trace(seed).jobs
        pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True))


def test_evaluate_takes_seeds_as_compare_does():
    """One seed syntax: `evaluate --seeds` takes compare's 0-2 and 0,1,2 as
    well as space-separated seeds."""
    from ddl_gym.cli.evaluate import _seeds
    from ddl_gym.cli.main import build_parser

    parser = build_parser()
    for argv, want in (
        (["--seeds", "0-2"], [0, 1, 2]),
        (["--seeds", "0,1,2"], [0, 1, 2]),
        (["--seeds", "0", "1", "5"], [0, 1, 5]),
        (["--seeds", "0-1,7", "9"], [0, 1, 7, 9]),
        ([], None),
    ):
        assert _seeds(parser.parse_args(["evaluate", *argv])) == want
