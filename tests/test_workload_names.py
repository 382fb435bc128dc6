"""One set of workload names: what `compare --workloads` takes, a scenario's
`trace` (`simulate --trace`, `-s` files) and `traces inspect` take too."""

import pytest

from ddl_gym.experiments.grid import WORKLOADS, load_workload
from ddl_gym.scenarios import BUILTIN_TRACES, Scenario
from ddl_gym.traces import find_data_dir


def test_every_compare_workload_is_a_scenario_trace():
    assert set(WORKLOADS) <= set(BUILTIN_TRACES)


@pytest.mark.parametrize("name", ["pollux-1", "sweep-25"])
def test_a_scenario_on_a_workload_name_runs_that_workload(name):
    data = find_data_dir()
    if data is None:
        pytest.skip("needs ../shared/data")
    scenario = Scenario(name="t", trace=name, cluster=WORKLOADS[name].cluster)
    mine = scenario.build_trace(0).jobs
    theirs = load_workload(name, 0, str(data), None)[0].jobs
    assert len(mine) == len(theirs) > 0
    assert (mine["gpus"].to_numpy() == theirs["gpus"].to_numpy()).all()
    assert (mine["arrival_s"].to_numpy() == theirs["arrival_s"].to_numpy()).all()


def test_compare_with_a_data_dir_and_no_workloads_runs_every_data_workload(capsys):
    from ddl_gym.cli.main import main
    from ddl_gym.workloads import DATA_WORKLOADS

    data = find_data_dir()
    if data is None:
        pytest.skip("needs ../shared/data")
    argv = ["compare", "--data", str(data), "--quick", "--policies", "fifo"]
    assert main([*argv, "--congestions", "none", "--no-save", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"compare: {len(DATA_WORKLOADS)} workloads x 1 policy" in out
    for w in DATA_WORKLOADS:
        assert f"### {w.name} (" in out
