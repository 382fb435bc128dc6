"""The command line's consistency (issue 33): ``ddl-gym --help`` imports no
heavy module, help texts name modules (not ``scripts/*.py``, which a pip
user lacks) and list the choices, the names they list are the registries',
the compare header counts what it runs, run configs say one thing."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ddl_gym.cli.main import build_parser, main

HEAVY = ("numpy", "pandas", "gymnasium", "scipy", "torch", "matplotlib")


def test_help_imports_no_heavy_module():
    """``ddl-gym --help`` (and building the whole parser) imports neither
    gymnasium nor pandas nor numpy: 0.6 CPU-s of imports became ~0.06."""
    code = (
        "import sys\n"
        "from ddl_gym.cli.main import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_import_ddl_gym_is_light_and_still_registers_the_envs():
    code = (
        "import sys\n"
        "import ddl_gym\n"
        "assert 'gymnasium' not in sys.modules\n"
        "import gymnasium\n"  # the ids are there whichever came first
        "assert 'ddl_gym/Small-v0' in gymnasium.registry\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_help_names_are_the_registries():
    from ddl_gym.baselines import HEURISTICS, ORACLES, POLICY_NAMES, TYPED_NAMES

    from ddl_gym.cli import names
    from ddl_gym.experiments.grid import WORKLOADS
    from ddl_gym.scenarios import BUILTIN_TRACES, SCENARIOS
    from ddl_gym.topology import CLUSTERS, CONGESTION, FABRICS

    assert names.POLICIES == tuple(POLICY_NAMES)
    assert names.TYPED_POLICIES == tuple(TYPED_NAMES)
    assert names.HEURISTICS == tuple(HEURISTICS)
    assert names.ORACLES == tuple(ORACLES)
    assert names.WORKLOADS == tuple(WORKLOADS)
    assert names.CONGESTIONS == tuple(CONGESTION)
    assert names.CLUSTERS == tuple(CLUSTERS)
    from ddl_gym.typed_clusters import TYPED_CLUSTER_NAMES

    assert names.TYPED_CLUSTERS == tuple(TYPED_CLUSTER_NAMES)
    from ddl_gym.llm.clusters import LLM_CLUSTERS

    assert names.LLM_CLUSTERS == tuple(LLM_CLUSTERS)
    assert names.FABRICS == tuple(FABRICS)
    assert names.SCENARIOS == tuple(SCENARIOS)
    assert names.TRACES == tuple(BUILTIN_TRACES)


def _helps() -> dict[str, str]:
    """Every command's (and sub-action's) help text."""
    import argparse

    out: dict[str, str] = {}

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        out[name] = parser.format_help()
        for action in parser._actions:  # noqa: SLF001
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                for sub, p in action.choices.items():
                    walk(p, f"{name} {sub}")

    walk(build_parser(), "ddl-gym")
    return out


def test_help_texts_name_modules_not_scripts():
    # calibrate is the calibration work's (its own help is revised there)
    bad = [
        (name, line.strip())
        for name, text in _helps().items()
        if "calibrate" not in name
        for line in text.splitlines()
        if "scripts/" in line and "calibrate" not in line
    ]
    assert not bad, f"help of {bad} points at scripts/*.py, which a pip install lacks"


@pytest.mark.parametrize(
    "command, option, wanted",
    [
        ("ddl-gym compare", "--policies", ("fifo", "tiresias", "gandiva", "dally", "agent:PATH")),
        ("ddl-gym compare", "--workloads", ("default", "seed-week", "philly-week", "pollux-1")),
        ("ddl-gym compare", "--congestions", ("none", "moderate", "heavy", "diurnal")),
        ("ddl-gym simulate", "--policy", ("fifo", "dally", "agent:PATH")),
        ("ddl-gym bench", "--policies", ("fifo", "dally")),
        ("ddl-gym evaluate", "--baselines", ("fifo", "dally")),
        ("ddl-gym traces inspect", "workload", ("seed-week", "pollux-1")),
        ("ddl-gym simulate", "--scenario", ("default", "small", "seed-artist")),
        ("ddl-gym simulate", "--cluster", ("seed64", "nvswitch512", "RxSxG")),
        ("ddl-gym train", "--fabric", ("nvswitch_ib", "pcie_25gbe", "fitted_")),
        ("ddl-gym compare", "--trace", ("synthetic", "philly-week")),
        ("ddl-gym benchmark evaluate", "--policy", ("tiresias", "srtf")),
    ],
)
def test_help_lists_the_choices(command, option, wanted):
    text = " ".join(_helps()[command].split())
    sections = [text.find(s) for s in ("positional arguments:", "options:") if s in text]
    at = text.index(option, min(sections))  # its entry, past the usage line
    assert all(w in text[at : at + 900] for w in wanted), (command, option)


def test_compare_header_counts_the_cells_it_runs():
    from ddl_gym.cli.compare import Grid
    from ddl_gym.scenarios import get_scenario

    scenario = get_scenario("default")[0]
    policies = ("fifo", "consolidation", "tiresias")
    grid = Grid(scenario, policies, ("none", "moderate", "heavy"), (0, 1, 2), ("seed-week",))
    # the case: deterministic policies on a fixed trace run once per level
    line = grid.header(9, "local")
    assert "1 workload x 3 policies x 3 congestion levels x 3 seeds: 9 cells, not 27" in line
    assert "first seed only" in line
    full = Grid(scenario, policies, ("heavy",), (0, 1), None)
    assert full.header(6, "ray") == (
        "compare on default: 3 policies x 1 congestion level x 2 seeds = 6 cells (ray)"
    )


def test_compare_config_says_one_thing(tmp_path, capsys):
    """The run's config.toml: the scenario's levels, seeds and policies are
    the grid's (no contradiction with [run]); the data dir is relative to the
    run folder, and the run resumes and repeats from it."""
    argv = ["compare", "-s", "small", "--policies", "fifo", "--congestions", "heavy"]
    argv += ["--seeds", "1", "--no-progress", "--out", str(tmp_path), "--name", "c"]
    assert main(argv) == 0
    config = tomllib.loads((tmp_path / "c" / "config.toml").read_text())
    run = config["run"]
    assert config["congestions"] == run["congestions"] == ["heavy"]
    assert config["congestion"] == "heavy"
    assert config["seeds"] == run["seeds"] == [1]
    assert config["policies"] == run["policies"] == ["fifo"]
    capsys.readouterr()
    assert main(["compare", "--resume", str(tmp_path / "c"), "--no-progress"]) == 0
    assert "1 of 1 cells already finished" in capsys.readouterr().out


def test_compare_config_data_dir_is_relative(tmp_path, data_dir, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["compare", "--workloads", "seed-week", "--policies", "fifo", "--jobs", "5"]
    argv += ["--congestions", "none", "--seeds", "0", "--data", str(data_dir)]
    assert main([*argv, "--no-progress", "--out", "runs", "--name", "d"]) == 0
    config = tomllib.loads(Path("runs/d/config.toml").read_text())
    data = config["run"]["data"]
    assert not Path(data).is_absolute()
    assert (Path("runs/d") / data).resolve() == Path(data_dir).resolve()
    # the folder moves with its data: resume from elsewhere
    monkeypatch.chdir("runs")
    capsys.readouterr()
    assert main(["compare", "--resume", "d", "--no-progress"]) == 0
    assert "1 of 1 cells already finished" in capsys.readouterr().out


def test_simulate_config_has_one_level_and_one_seed(tmp_path):
    argv = ["simulate", "-s", "small", "--seed", "2", "--no-progress", "--no-placements"]
    assert main([*argv, "--out", str(tmp_path), "--name", "s"]) == 0
    config = tomllib.loads((tmp_path / "s" / "config.toml").read_text())
    assert "congestions" not in config and "seeds" not in config
    assert config["congestion"] == "moderate" and config["run"]["seed"] == 2


def test_readme_first_example_steps_a_valid_action():
    """The README's first example (it stepped WAIT, which the env refuses at
    t=0 with a queue and an idle cluster) takes an action its mask allows."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = readme.split("## Use it as a library", 1)[1].split("```python\n", 1)[1]
    code = block.split("```", 1)[0]
    assert "env.step(" in code
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert "invalid" not in scope["info"]
    env = scope["env"]
    env.reset(seed=0)
    assert env.unwrapped.action_masks()[scope["action"]]
