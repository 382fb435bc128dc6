"""Run one policy on one scenario, with where each job ran and when (the
engine's placement history, ``Result.placements``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from ddl_gym.engine import Result, simulate
from ddl_gym.scenarios import Scenario
from ddl_gym.topology import Cluster

SEGMENT_COLUMNS = (
    "job",
    "job_id",
    "model",
    "gpus",
    "server",
    "rack",
    "server_gpus",
    "start_s",
    "end_s",
)


def placement_segments(result: Result) -> pd.DataFrame:
    """The engine's placement history (``Result.placements``), one row per
    (placement, server), with each job's index, model and size."""
    jobs = result.jobs[["job_id", "model", "gpus"]].rename_axis("job").reset_index()
    segments = result.placements.rename(columns={"gpus": "server_gpus"}).merge(
        jobs, on="job_id", how="left", validate="many_to_one"
    )
    segments = segments.sort_values(["start_s", "job", "server"], kind="stable")
    return segments[list(SEGMENT_COLUMNS)].reset_index(drop=True)


@dataclass
class SimRun:
    """What one simulation produced, ready for the run folder."""

    result: Result
    placements: pd.DataFrame | None
    cluster: Cluster
    trace_name: str
    jobs_in_trace: int


def run_simulation(
    scenario: Scenario, policy: Any, seed: int = 0, record_placements: bool = True
) -> SimRun:
    """Simulate ``policy`` on ``scenario`` (workload drawn with ``seed``)."""
    cluster = scenario.build_cluster()
    trace = scenario.build_trace(seed)
    if scenario.mode == "seed":
        from ddl_gym.seed_sim import run_seed

        result = run_seed(trace, cluster, policy, scenario.seed_switches())
        return SimRun(result, None, cluster, trace.name, len(trace))
    # simulate() adds the policy's own engine_kwargs(); the scenario's fixed
    # settings override them (with a PolicyEngineWarning where they differ)
    result = simulate(trace, cluster, policy, seed=seed, **scenario.engine_kwargs())
    placements = placement_segments(result) if record_placements else None
    return SimRun(result, placements, cluster, trace.name, len(trace))


def _cell_scenario(scenario: dict[str, Any], congestion: str | float) -> Scenario:
    from ddl_gym.scenarios import scenario_from_dict

    return scenario_from_dict({**scenario, "congestion": congestion}, source="cell")


def _cell_policy(scenario: Scenario, name: str) -> Any:
    """A policy by name: the seed-faithful simulator's own in seed mode."""
    if scenario.mode == "seed":
        from ddl_gym.seed_sim import make_seed_policy

        return make_seed_policy(name)
    from ddl_gym.experiments.grid import policy_from_name

    return policy_from_name(name)


def _clairvoyant(scenario: Scenario, policy: Any) -> bool:
    """Whether the cell's engine let the policy read true job sizes."""
    if scenario.mode == "seed":
        return False  # the seed-faithful simulator has no clairvoyant mode
    from ddl_gym.experiments.grid import is_clairvoyant

    return is_clairvoyant(policy, scenario.engine_kwargs())


def simulate_cell(
    scenario: dict[str, Any], policy: str, congestion: str | float, seed: int = 0
) -> dict[str, Any]:
    """One grid cell as a pure function of plain data (picklable for Ray):
    the cell's keys and its summary metrics."""
    s = _cell_scenario(scenario, congestion)
    pol = _cell_policy(s, policy)
    sim = run_simulation(s, pol, seed=seed, record_placements=False)
    keys = {"policy": policy, "workload": sim.trace_name, "congestion": str(congestion)}
    return {**keys, "seed": seed, "clairvoyant": _clairvoyant(s, pol), **sim.result.summary}


JOB_FIELDS = ("job_id", "model", "gpus", "jct_s", "queueing_s", "comm_s", "preemptions", "level")


def compare_cell(
    scenario: dict[str, Any], policy: str, congestion: str | float, seed: int = 0
) -> dict[str, Any]:
    """``simulate_cell`` plus the cell's per-job table under ``"job_table"`` (for
    JCT distributions)."""
    s = _cell_scenario(scenario, congestion)
    pol = _cell_policy(s, policy)
    sim = run_simulation(s, pol, seed=seed, record_placements=False)
    keys = {"policy": policy, "workload": sim.trace_name, "congestion": str(congestion)}
    jobs = sim.result.jobs[list(JOB_FIELDS)].reset_index(drop=True)
    clair = _clairvoyant(s, pol)
    return {**keys, "seed": seed, "clairvoyant": clair, **sim.result.summary, "job_table": jobs}
