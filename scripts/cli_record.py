"""Run one policy on one scenario, recording where each job ran and when.

The engine keeps only a job's *current* placement, so a wrapper around the
policy records it: after each ``Place`` the wrapper reads ``job.placement``
at its next call (same instant: only ``Wait`` moves time), and closes the
segment at its own ``Preempt`` or at the job's end from the result table.
(Better: the engine records placements itself; see the CLI's report notes.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from ddl_gym.engine import EngineView, Place, Preempt, Result, simulate
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


class PlacementRecorder:
    """A policy wrapper that logs placement segments; acts exactly as the
    wrapped policy (attributes such as ``engine_kwargs`` pass through)."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self._placed: list[int] = []
        self._open: dict[int, tuple[float, tuple[tuple[int, int], ...]]] = {}
        self._closed: list[tuple[int, float, float, tuple[tuple[int, int], ...]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        self._placed.clear()
        self._open.clear()
        self._closed.clear()
        self.policy.reset(view, seed=seed)

    def act(self, view: EngineView):
        for j in self._placed:
            job = view.job(j)
            if job.placement:
                self._open[j] = (view.now, job.placement)
        self._placed.clear()
        action = self.policy.act(view)
        if isinstance(action, Place):
            self._placed.append(action.job)
        elif isinstance(action, Preempt) and action.job in self._open:
            start, placement = self._open.pop(action.job)
            self._closed.append((action.job, start, view.now, placement))
        return action

    def segments(self, result: Result, cluster: Cluster) -> pd.DataFrame:
        """One row per (segment, server); open segments end at the job's end."""
        jobs = result.jobs
        rows = []
        ends = jobs["end_s"].to_numpy()
        items = list(self._closed) + [(j, s, ends[j], p) for j, (s, p) in self._open.items()]
        for j, start, end, placement in sorted(items, key=lambda x: (x[1], x[0])):
            for server, g in placement:
                rows.append(
                    (
                        j,
                        jobs["job_id"].iat[j],
                        jobs["model"].iat[j],
                        int(jobs["gpus"].iat[j]),
                        server,
                        cluster.rack_of(server),
                        g,
                        start,
                        end,
                    )
                )
        return pd.DataFrame(rows, columns=list(SEGMENT_COLUMNS))


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
    base = policy.engine_kwargs() if hasattr(policy, "engine_kwargs") else {}
    kwargs = scenario.engine_kwargs(base)
    runner = PlacementRecorder(policy) if record_placements else policy
    result = simulate(trace, cluster, runner, seed=seed, **kwargs)
    placements = runner.segments(result, cluster) if record_placements else None
    return SimRun(result, placements, cluster, trace.name, len(trace))


def simulate_cell(
    scenario: dict[str, Any], policy: str, congestion: str | float, seed: int = 0
) -> dict[str, Any]:
    """One grid cell as a pure function of plain data (picklable for Ray):
    the cell's keys and its summary metrics."""
    from ddl_gym.scenarios import scenario_from_dict
    from scripts.cli_common import make_policy

    s = scenario_from_dict({**scenario, "congestion": congestion}, source="cell")
    sim = run_simulation(s, make_policy(policy), seed=seed, record_placements=False)
    keys = {"policy": policy, "workload": sim.trace_name, "congestion": str(congestion)}
    return {**keys, "seed": seed, **sim.result.summary}


JOB_FIELDS = ("job_id", "model", "gpus", "jct_s", "queueing_s", "comm_s", "preemptions", "level")


def compare_cell(
    scenario: dict[str, Any], policy: str, congestion: str | float, seed: int = 0
) -> dict[str, Any]:
    """``simulate_cell`` plus the cell's per-job table under ``"job_table"`` (for
    JCT distributions)."""
    from ddl_gym.scenarios import scenario_from_dict
    from scripts.cli_common import make_policy

    s = scenario_from_dict({**scenario, "congestion": congestion}, source="cell")
    sim = run_simulation(s, make_policy(policy), seed=seed, record_placements=False)
    keys = {"policy": policy, "workload": sim.trace_name, "congestion": str(congestion)}
    jobs = sim.result.jobs[list(JOB_FIELDS)].reset_index(drop=True)
    return {**keys, "seed": seed, **sim.result.summary, "job_table": jobs}
