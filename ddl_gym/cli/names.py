"""The names the command line's help lists: policies, workloads, congestion
levels, scenarios, traces, clusters, fabrics. Written out here so that
building the parser (``ddl-gym --help``) imports no registry (each imports
numpy and pandas); ``tests/test_cli_help.py`` checks that they equal the
registries (``ddl_gym.baselines.POLICY_NAMES``, ``ddl_gym.topology``'s
``CONGESTION``, ``CLUSTERS``, ``FABRICS``, ``ddl_gym.scenarios``'
``SCENARIOS``, ``BUILTIN_TRACES``). The workloads are read from the light
``ddl_gym.workloads`` itself."""

from __future__ import annotations

from ddl_gym.workloads import WORKLOADS as WORKLOAD_REGISTRY

POLICIES = (
    "fifo",
    "consolidation",
    "sjf",
    "srtf",
    "srsf",
    "tiresias",
    "gandiva",
    "dally-delay",
    "dally-1-2",
    "dally-6-12",
    "dally",
    "tiresias-c1",
    "random",
)
# for typed clusters (GPU types; ddl_gym.baselines.TYPED_NAMES)
TYPED_POLICIES = ("gavel", "tiresias-typed", "gandiva-typed", "dally-typed")
# the ones that read true job sizes (ddl_gym.baselines.ORACLES)
ORACLES = ("sjf", "srtf", "srsf")
# the settings tuned for ddl-gym-v3 (ddl_gym.baselines.TUNED)
TUNED = ("tiresias-c1",)
# the ones the older suites rank (ddl_gym.baselines.HEURISTICS): every policy
# but random, the oracles and the tuned variants, in registry order
HEURISTICS = tuple(p for p in POLICIES if p not in (*ORACLES, *TUNED, "random"))
# ddl_gym.workloads is light (no registry, no numpy): read, not copied
WORKLOADS = tuple(WORKLOAD_REGISTRY)
CONGESTIONS = ("none", "moderate", "heavy", "diurnal")
SCENARIOS = (
    "default",
    "small",
    "seed-week-heavy",
    "seed-week-big-racks",
    "seed-artist",
    "philly-week-512",
    "openb-typed",
    "generations",
    "llm-cluster",
    "pcie-diurnal",
)
# a scenario's trace names (ddl_gym.scenarios.BUILTIN_TRACES): every named
# workload, openb's pods (run on typed clusters) and the synthetic LLM mix
TRACES = ("default", "synthetic", *WORKLOADS[1:], "alibaba-openb", "llm-synthetic")
CLUSTERS = ("seed64", "nvswitch512", "pcie512", "seed512")
# typed presets (ddl_gym.typed_clusters.TYPED_CLUSTER_NAMES; openb reads the data dir)
TYPED_CLUSTERS = ("gavel-kpv", "v100-a100-h100", "openb")
# LLM clusters (ddl_gym.llm.clusters.LLM_CLUSTERS: DGX servers, leaf-spine)
LLM_CLUSTERS = ("dgx_a100_1024", "dgx_a100_1024_2to1", "dgx_h100_1024")
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
