"""A scenario's workload as the agents' trace spec (``ddl-gym train`` and
``ddl-gym evaluate``): ``default:0-9``, a trace file, or a file of the data dir."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ddl_gym.cli.common import CliError

if TYPE_CHECKING:  # the parser (ddl-gym --help) imports this module: keep it light
    from ddl_gym.scenarios import Scenario

SYNTHETIC_SEEDS = range(10)  # as "default:0-9": ten draws of the generator


def agent_trace_specs(scenario: Scenario, folder: Path) -> list[str]:
    """The scenario's workload as trace specs; a ``[synthetic]`` spec is drawn
    with seeds 0-9 and written as CSV files under ``folder/traces`` (the
    agents read trace files, and the run folder keeps what it trained on)."""
    if scenario.trace != "synthetic":
        return [agent_trace_spec(scenario)]
    from ddl_gym.traces.loader import save_trace

    (folder / "traces").mkdir(parents=True, exist_ok=True)
    specs = []
    for seed in SYNTHETIC_SEEDS:
        path = folder / "traces" / f"{scenario.name}-{seed}.csv"
        save_trace(scenario.build_trace(seed), path)
        specs.append(str(path))
    return specs


def agent_trace_spec(scenario: Scenario) -> str:
    from ddl_gym.scenarios import DATA_TRACES
    from ddl_gym.traces import find_data_dir

    if scenario.trace == "default":
        return "default:0-9"
    if scenario.trace in DATA_TRACES:
        data = find_data_dir()
        if data is None:
            raise CliError(f"workload {scenario.trace!r} needs the data dir")
        return str(data / DATA_TRACES[scenario.trace])
    if scenario.trace == "synthetic":
        raise CliError("a [synthetic] workload becomes trace files: use agent_trace_specs")
    return scenario.trace
