"""The names the command line's help lists: policies, workloads, congestion
levels. Written out here so that building the parser (``ddl-gym --help``)
imports no registry (each imports numpy and pandas);
``tests/test_cli_help.py`` checks that they equal the registries
(``ddl_gym.baselines.POLICY_NAMES``, ``ddl_gym.experiments.grid.WORKLOADS``,
``ddl_gym.topology.CONGESTION``)."""

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


def listed(names: tuple[str, ...]) -> str:
    """``a, b, c`` for a help text."""
    return ", ".join(names)
