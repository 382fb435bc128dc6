"""The names the command line's help lists: policies, workloads, congestion
levels, scenarios, traces, clusters, fabrics. Written out here so that
building the parser (``ddl-gym --help``) imports no registry (each imports
numpy and pandas); ``tests/test_cli_help.py`` checks that they equal the
registries (``ddl_gym.baselines.POLICY_NAMES``,
``ddl_gym.experiments.grid.WORKLOADS``, ``ddl_gym.topology``'s
``CONGESTION``, ``CLUSTERS``, ``FABRICS``, ``ddl_gym.scenarios``'
``SCENARIOS``, ``BUILTIN_TRACES``)."""

from __future__ import annotations

POLICIES = (
    "fifo",
    "consolidation",
    "sjf",
    "srtf",
    "tiresias",
    "gandiva",
    "dally-delay",
    "dally-1-2",
    "dally-6-12",
    "dally",
    "random",
)
# the ones every heuristic comparison ranks (ddl_gym.baselines.HEURISTICS)
HEURISTICS = (
    "fifo",
    "consolidation",
    "tiresias",
    "gandiva",
    "dally-delay",
    "dally-1-2",
    "dally-6-12",
    "dally",
)
# the ones that read true job sizes (ddl_gym.baselines.ORACLES)
ORACLES = ("sjf", "srtf")
WORKLOADS = (
    "default",
    "seed-week",
    "seed-3proc-week",
    "sweep-25",
    "sweep-50",
    "sweep-75",
    "sweep-100",
    "philly-week",
    "pollux-1",
    "pollux-2",
    "pollux-3",
    "pollux-4",
    "pollux-5",
    "pollux-6",
    "pollux-7",
    "pollux-8",
)
CONGESTIONS = ("none", "moderate", "heavy", "diurnal")
SCENARIOS = (
    "default",
    "small",
    "seed-week-heavy",
    "seed-week-big-racks",
    "seed-artist",
    "philly-week-512",
    "pcie-diurnal",
)
# a scenario's trace names (ddl_gym.scenarios.BUILTIN_TRACES)
TRACES = ("default", "synthetic", *WORKLOADS[1:])  # every named workload
CLUSTERS = ("seed64", "nvswitch512", "pcie512", "seed512")
# built-in fabric presets (ddl_gym.topology.FABRICS; fitted ones ship as JSON)
FABRICS = (
    "seed",
    "nvswitch_ib",
    "pcie_25gbe",
    "a100_nvlink_ib",
    "h100_nvlink_ib",
    "v100_nvlink_100gbe",
    "pcie_consumer_25gbe",
)


def listed(names: tuple[str, ...]) -> str:
    """``a, b, c`` for a help text."""
    return ", ".join(names)
