"""Run one policy on one scenario, with where each job ran and when (the
engine's placement history, ``Result.placements``). The scenario's simulator
(``Scenario.simulator``: our engine, or the seed wing in seed mode) runs it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from ddl_gym.engine import Result
from ddl_gym.scenarios import Scenario
from ddl_gym.simulators import Progress
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
    clairvoyant: bool = False  # whether the policy read true job sizes


def run_simulation(
    scenario: Scenario,
    policy: Any,
    seed: int = 0,
    record_placements: bool = True,
    progress: Progress | None = None,
) -> SimRun:
    """Simulate ``policy`` (made by ``scenario.make_policy``) on ``scenario``
    (workload drawn with ``seed``); ``progress`` hears of every finished job."""
    simulator = scenario.simulator
    cluster = scenario.build_cluster()
    trace = scenario.build_trace(seed)
    result = simulator.run(trace, cluster, policy, seed=seed, progress=progress)
    keep = record_placements and simulator.records_placements
    placements = placement_segments(result) if keep else None
    clairvoyant = simulator.clairvoyant(policy)
    return SimRun(result, placements, cluster, trace.name, len(trace), clairvoyant)


def _cell_scenario(scenario: dict[str, Any], congestion: str | float) -> Scenario:
    from ddl_gym.scenarios import scenario_from_dict

    return scenario_from_dict({**scenario, "congestion": congestion}, source="cell")


def simulate_cell(
    scenario: dict[str, Any], policy: str, congestion: str | float, seed: int = 0
) -> dict[str, Any]:
    """One grid cell as a pure function of plain data (picklable for Ray):
    the cell's keys and its summary metrics."""
    s = _cell_scenario(scenario, congestion)
    sim = run_simulation(s, s.make_policy(policy), seed=seed, record_placements=False)
    keys = {"policy": policy, "workload": sim.trace_name, "congestion": str(congestion)}
    return {**keys, "seed": seed, "clairvoyant": sim.clairvoyant, **sim.result.summary}


JOB_FIELDS = ("job_id", "model", "gpus", "jct_s", "queueing_s", "comm_s", "preemptions", "level")


def compare_cell(
    scenario: dict[str, Any], policy: str, congestion: str | float, seed: int = 0
) -> dict[str, Any]:
    """``simulate_cell`` plus the cell's per-job table under ``"job_table"`` (for
    JCT distributions)."""
    s = _cell_scenario(scenario, congestion)
    sim = run_simulation(s, s.make_policy(policy), seed=seed, record_placements=False)
    keys = {"policy": policy, "workload": sim.trace_name, "congestion": str(congestion)}
    jobs = sim.result.jobs[list(JOB_FIELDS)].reset_index(drop=True)
    clair = sim.clairvoyant
    return {**keys, "seed": seed, "clairvoyant": clair, **sim.result.summary, "job_table": jobs}
