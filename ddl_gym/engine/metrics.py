"""Per-job table, cluster series and summary metrics of a finished run."""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

import numpy as np
import pandas as pd

from ddl_gym.perf import Level

JOB_COLUMNS = (
    "job_id",
    "model",
    "gpus",
    "arrival_s",
    "start_s",
    "end_s",
    "jct_s",
    "queueing_s",
    "run_s",
    "gpu_time_s",
    "compute_s",
    "comm_s",
    "overhead_s",
    "ideal_s",
    "preemptions",
    "level",
    "starts_machine",
    "starts_rack",
    "starts_network",
)


PLACEMENT_COLUMNS = ("job_id", "server", "rack", "gpus", "start_s", "end_s")
SERIES_COLUMNS = ("time_s", "used_gpus", "queue_length", "running", "background")

# the ``JOB_COLUMNS`` read straight off a ``Job`` attribute
_JOB_ATTRS = {
    "job_id": "job_id",
    "model": "model",
    "gpus": "gpus",
    "arrival_s": "arrival",
    "start_s": "first_start",
    "end_s": "end",
    "queueing_s": "queued_time",
    "run_s": "run_time",
    "gpu_time_s": "attained",
    "compute_s": "compute_time",
    "comm_s": "comm_time",
    "overhead_s": "overhead_time",
    "preemptions": "preemptions",
}


@dataclass
class Result:
    """Outcome of a simulation.

    Attributes:
        jobs: one row per job (``JOB_COLUMNS``). ``comm_s`` is wall time spent
            in exposed all-reduce, ``overhead_s`` in checkpoint/restore,
            ``ideal_s`` the run time with no communication at all;
            ``level`` is the level of the job's last placement.
        series: cluster state after every event instant: time, used GPUs,
            queue length, running jobs, background traffic.
        summary: the headline metrics (see ``summarize``).
        placements: which job held which server's GPUs when: one row per
            (job, server) of every placement, with its start and end.
    """

    jobs: pd.DataFrame
    series: pd.DataFrame
    summary: dict[str, float] = field(default_factory=dict)
    placements: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=list(PLACEMENT_COLUMNS))
    )


def summarize(jobs: pd.DataFrame, series: pd.DataFrame, num_gpus: int) -> dict[str, float]:
    done = jobs[jobs["end_s"].notna()]
    jct = done["jct_s"].to_numpy()
    start = jobs["arrival_s"].min() if len(jobs) else 0.0
    end = done["end_s"].max() if len(done) else start
    makespan = float(end - start)
    busy = float(jobs["gpu_time_s"].sum())
    compute = float(done["compute_s"].sum())
    comm = float(done["comm_s"].sum())

    def pct(q: float) -> float:
        return float(np.percentile(jct, q)) if len(jct) else float("nan")

    return {
        "jobs": float(len(jobs)),
        "completed": float(len(done)),
        "makespan_s": makespan,
        "mean_jct_s": float(jct.mean()) if len(jct) else float("nan"),
        "p50_jct_s": pct(50),
        "p95_jct_s": pct(95),
        "p99_jct_s": pct(99),
        "mean_queueing_s": float(done["queueing_s"].mean()) if len(done) else float("nan"),
        "p95_queueing_s": float(np.percentile(done["queueing_s"], 95))
        if len(done)
        else float("nan"),
        "comm_s": comm,
        # exposed all-reduce time over time computing: the communication overhead
        "comm_overhead": comm / compute if compute > 0 else 0.0,
        "comm_gpu_h": float((done["comm_s"] * done["gpus"]).sum()) / 3600.0,
        "gpu_utilization": busy / (num_gpus * makespan) if makespan > 0 else 0.0,
        "preemptions": float(jobs["preemptions"].sum()),
        "alloc_machine": float(jobs["starts_machine"].sum()),
        "alloc_rack": float(jobs["starts_rack"].sum()),
        "alloc_network": float(jobs["starts_network"].sum()),
    }


def _numeric(values: list) -> np.ndarray | list:
    """A column of Python numbers as the array pandas would make of it
    (int64, float64), made by numpy at once: pandas looks at every element
    of a list first. Anything else (strings, a missing value) stays a list."""
    if not values or type(values[0]) is str:
        return values
    array = np.array(values)
    return array if array.dtype.kind in "if" else values


def _frame(columns: dict[str, list], names: tuple[str, ...]) -> pd.DataFrame:
    """The frame of ``columns`` (name -> list, in the order of ``names``)."""
    return pd.DataFrame({name: _numeric(columns[name]) for name in names}, columns=list(names))


def _frame_of_rows(rows: list[tuple], columns: tuple[str, ...]) -> pd.DataFrame:
    """``pd.DataFrame(rows, columns=columns)`` built column by column (the
    same frame: a frame of row tuples converts through object arrays)."""
    if not rows:
        return pd.DataFrame(rows, columns=list(columns))
    by_column = map(list, zip(*rows, strict=True))
    return _frame(dict(zip(columns, by_column, strict=True)), columns)


def build_result(engine) -> Result:
    # column by column: a frame of row tuples converts every column through
    # object arrays (a quarter of the result's build time at 100k jobs)
    jobs_ = engine.jobs
    columns = {col: list(map(attrgetter(attr), jobs_)) for col, attr in _JOB_ATTRS.items()}
    names = {level.value: level.name.lower() for level in Level}
    columns["jct_s"] = [j.end - j.arrival for j in jobs_]
    columns["ideal_s"] = [j.work / j.gpus for j in jobs_]
    columns["level"] = [names[j.level] if j.level is not None else "" for j in jobs_]
    for i, col in enumerate(("starts_machine", "starts_rack", "starts_network")):
        columns[col] = [j.starts_per_level[i] for j in jobs_]
    jobs = _frame(columns, JOB_COLUMNS)
    series = _frame_of_rows(engine.series, SERIES_COLUMNS)
    if not engine.segments:
        placements = pd.DataFrame([], columns=list(PLACEMENT_COLUMNS))
    else:
        index, server, gpus, start, end = map(list, zip(*engine.segments, strict=True))
        per_rack = engine.cluster.servers_per_rack
        placements = _frame(
            {
                "job_id": [jobs_[j].job_id for j in index],
                "server": server,
                "rack": [srv // per_rack for srv in server],
                "gpus": gpus,
                "start_s": start,
                "end_s": end,
            },
            PLACEMENT_COLUMNS,
        )
    summary = summarize(jobs, series, engine.cluster.num_gpus)
    types = engine.types
    if types is not None:
        # typed clusters: the type of each job's last placement, GPU-hours per type
        kinds = {-1: "mixed", **dict(enumerate(types.names))}
        jobs["gpu_type"] = [kinds[j.kind] if j.level is not None else "" for j in jobs_]
        for name, seconds in zip(types.names, types.gpu_seconds, strict=True):
            summary[f"gpu_h_{name}"] = seconds / 3600.0
    if types is not None or engine.llm is not None:
        summary["deferred_places"] = float(engine.deferred)
    return Result(jobs, series, summary, placements)
