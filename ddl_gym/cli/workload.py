"""A scenario's workload as the agents' trace spec (``ddl-gym train`` and
``ddl-gym evaluate``): ``default:0-9``, a trace file, or a file of the data dir."""

from __future__ import annotations

from ddl_gym.cli.common import CliError
from ddl_gym.scenarios import Scenario


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
        raise CliError("agents train on trace files or the default workload, not [synthetic] specs")
    return scenario.trace
