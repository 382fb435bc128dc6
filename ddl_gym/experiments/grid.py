"""The comparison grid, as a library: policies x workloads x congestion
levels x seeds, each cell a pure function of plain data.

``run_cell(policy, workload, congestion, seed, ...) -> dict`` simulates one
cell; ``make_cells`` lists a grid's cells (keyword dicts); ``summarise``,
``improvement`` and ``markdown`` turn finished cells into the tables the seed
paper reports (Dally's improvement over the better of Tiresias and Gandiva,
``(best - dally) / best``). The command line is ``ddl-gym compare``
(``ddl_gym.cli.compare``; ``scripts/compare.py`` and ``scripts/run.sh`` call
it), which runs cells with ``ddl_gym.experiments.runner`` (processes or Ray,
progress bar, one JSON per finished cell, ``--resume``).

Engine settings: every policy runs with its own ``engine_kwargs()``
(``simulate()`` applies them): ``restore_s_per_gpu = 1`` (the seed's 1 s per
GPU checkpoint) except Gandiva (0, as in the paper); the Dally variants with
preemption add 20 s leases.

Workloads: ``default`` is the bundled synthetic workload
(``ddl_gym.traces.default_trace(seed)``) on ``seed64``; ``DATA_WORKLOADS``
are the seed's two 411-job week traces and the four 500-job load-sweep traces
on ``seed64``, and the Philly week and the eight Pollux workloads on
``seed512`` (8 racks x 8 servers x 8 GPUs with the seed authors' fabric, so
the network model is the one the seed traces use). Seeds vary the synthetic
trace and the random policy; real traces are loaded with seed 0 (Philly /
Pollux model assignment fixed), so a deterministic policy runs once per
(workload, congestion) there and its result stands for every seed.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ddl_gym.baselines import POLICY_NAMES, make_policy
from ddl_gym.engine import simulate
from ddl_gym.traces import (
    Trace,
    TraceWarning,
    default_trace,
    head,
    load_trace,
)

CONGESTIONS = ("none", "moderate", "heavy")
DALLY = "dally"
CONSOLIDATION_BASELINES = ("tiresias", "gandiva")
QUICK_JOBS = 60


@dataclass(frozen=True)
class Workload:
    """A named trace and the cluster it runs on. ``path`` is relative to the
    data dir; ``None`` means the bundled synthetic default."""

    name: str
    path: str | None
    cluster: str

    @property
    def seeded(self) -> bool:
        """Whether the seed changes the trace itself."""
        return self.path is None


DEFAULT_WORKLOAD = Workload("default", None, "seed64")
_DALLY_DIR = "traces/dally/sense_500jobs_poisson"
DATA_WORKLOADS: tuple[Workload, ...] = (
    # the 1-process-per-GPU week: the scenarios' (and `ddl-gym traces`') "seed-week"
    Workload("seed-week", f"{_DALLY_DIR}_1proc-week.json", "seed64"),
    Workload("seed-3proc-week", f"{_DALLY_DIR}_3proc-week.json", "seed64"),
    *(
        Workload(f"sweep-{n}", f"{_DALLY_DIR}-{n}jobsPday.json", "seed64")
        for n in (25, 50, 75, 100)
    ),
    Workload("philly-week", "traces/philly/philly_2017-11-13_to_2017-11-19.csv", "seed512"),
    *(
        Workload(f"pollux-{i}", f"traces/pollux_workloads/workload-{i}.csv", "seed512")
        for i in range(1, 9)
    ),
)
WORKLOADS = {w.name: w for w in (DEFAULT_WORKLOAD, *DATA_WORKLOADS)}


@lru_cache(maxsize=32)
def load_workload(
    name: str, seed: int, data_dir: str | None, max_jobs: int | None
) -> tuple[Trace, str]:
    """The trace and cluster of a workload (cached per process)."""
    w = WORKLOADS[name]
    if w.path is None:
        trace = default_trace(seed)
    else:
        if data_dir is None:
            raise ValueError(f"workload {name!r} needs a data dir")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TraceWarning)
            trace = load_trace(Path(data_dir) / w.path, seed=0)
    if max_jobs is not None:
        trace = head(trace, max_jobs)
    return trace, w.cluster


AGENT = "agent"  # the shipped MaskablePPO model; "agent:PATH" for another


def agent_available() -> bool:
    """Whether the learned agent can run here (torch and the shipped model)."""
    try:
        from ddl_gym.agents.policy import DEFAULT_MODEL
    except ImportError:  # torch / stable-baselines3 not installed
        return False
    return Path(DEFAULT_MODEL).is_file()


def policy_from_name(name: str):
    """A baseline by registry name, or the learned agent (``agent[:PATH]``)."""
    if name == AGENT or name.startswith(AGENT + ":"):
        from ddl_gym.agents import load_policy

        path = name.partition(":")[2]
        return load_policy(path) if path else load_policy()
    return make_policy(name)


def is_policy_name(name: str) -> bool:
    """A baseline's registry name or ``agent[:PATH]``."""
    return name in POLICY_NAMES or name == AGENT or name.startswith(AGENT + ":")


def run_cell(
    policy: str,
    workload: str,
    congestion: str | float,
    seed: int,
    data_dir: str | None = None,
    max_jobs: int | None = None,
) -> dict[str, Any]:
    """Simulate one cell of the grid; returns the summary metrics, the
    per-job JCTs (``jct_s``, for the CDF) and the wall time."""
    trace, cluster = load_workload(workload, seed, data_dir, max_jobs)
    pol = policy_from_name(policy)
    start = time.perf_counter()
    result = simulate(
        trace,
        cluster,
        pol,
        seed=seed,
        congestion=congestion,
        record_series=False,
    )
    return {
        "policy": policy,
        "workload": workload,
        "congestion": congestion,
        "seed": seed,
        "cluster": cluster,
        **result.summary,
        "wall_s": time.perf_counter() - start,
        "jct_s": result.jobs["jct_s"].to_numpy(),
    }


# -- the grid -----------------------------------------------------------------
def make_cells(
    policies: list[str],
    workloads: list[str],
    congestions: list[str | float],
    seeds: list[int],
    data_dir: str | None,
    max_jobs: int | None,
) -> list[dict[str, Any]]:
    """The grid's cells as ``run_cell`` keyword arguments, in table order.

    A deterministic policy on a fixed (file) trace runs for the first seed
    only: its result is the same for every seed.
    """
    # build each policy once: its flags are all the grid needs here (and the
    # learned agent loads a model)
    built = {p: policy_from_name(p) for p in dict.fromkeys(policies)}
    cells = []
    for w in workloads:
        for c in congestions:
            for p in policies:
                deterministic = getattr(built[p], "deterministic", True)
                run_seeds = seeds if WORKLOADS[w].seeded or not deterministic else seeds[:1]
                for s in run_seeds:
                    cells.append(
                        {
                            "policy": p,
                            "workload": w,
                            "congestion": c,
                            "seed": s,
                            "data_dir": data_dir,
                            "max_jobs": max_jobs,
                        }
                    )
    return cells


# -- tables -------------------------------------------------------------------
# (column, label, scale, lower is better)
METRICS: tuple[tuple[str, str, float, bool | None], ...] = (
    ("makespan_s", "makespan h", 1 / 3600, True),
    ("mean_jct_s", "mean JCT h", 1 / 3600, True),
    ("p95_jct_s", "p95 JCT h", 1 / 3600, True),
    ("p99_jct_s", "p99 JCT h", 1 / 3600, True),
    ("mean_queueing_s", "queue h", 1 / 3600, True),
    ("comm_overhead", "comm ovh %", 100.0, True),
    ("comm_gpu_h", "comm GPU-h", 1.0, True),
    ("gpu_utilization", "util %", 100.0, False),
    ("preemptions", "preempt", 1.0, None),
    ("alloc_machine", "alloc M", 1.0, None),
    ("alloc_rack", "alloc R", 1.0, None),
    ("alloc_network", "alloc N", 1.0, None),
)


def summarise(cells: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds per (workload, congestion, policy)."""
    cols = [m for m, *_ in METRICS] + ["wall_s"]
    out = cells.groupby(["workload", "congestion", "policy"], sort=False)[cols].mean()
    out["seeds"] = cells.groupby(["workload", "congestion", "policy"], sort=False).size()
    return out.reset_index()


def improvement(summary: pd.DataFrame) -> pd.DataFrame:
    """Per (workload, congestion): Dally's improvement in % over the better of
    Tiresias and Gandiva, metric by metric."""
    rows = []
    for (w, c), g in summary.groupby(["workload", "congestion"], sort=False):
        g = g.set_index("policy")
        if DALLY not in g.index or not any(b in g.index for b in CONSOLIDATION_BASELINES):
            continue
        base = g.loc[[b for b in CONSOLIDATION_BASELINES if b in g.index]]
        row: dict[str, Any] = {"workload": w, "congestion": c}
        for m, _, _, lower in METRICS:
            if lower is None:
                continue
            d = g.loc[DALLY, m]
            best = base[m].min() if lower else base[m].max()
            if not best or not np.isfinite(best):
                row[m] = float("nan")
            else:
                row[m] = 100.0 * ((best - d) / best if lower else (d - best) / best)
        rows.append(row)
    return pd.DataFrame(rows)


def _fmt(x: float) -> str:
    if not np.isfinite(x):
        return "-"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def markdown(summary: pd.DataFrame, imp: pd.DataFrame, workload: str) -> str:
    s = summary[summary["workload"] == workload]
    header = ["congestion", "policy", *(label for _, label, _, _ in METRICS)]
    lines = [
        f"### {workload} ({WORKLOADS[workload].cluster})",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    for c in s["congestion"].unique():
        for _, r in s[s["congestion"] == c].iterrows():
            vals = [_fmt(r[m] * scale) for m, _, scale, _ in METRICS]
            lines.append(f"| {c} | {r['policy']} | " + " | ".join(vals) + " |")
        i = imp[(imp["workload"] == workload) & (imp["congestion"] == c)] if len(imp) else imp
        if len(i):
            r = i.iloc[0]
            vals = [("-" if lower is None else f"{r[m]:+.0f}%") for m, _, _, lower in METRICS]
            lines.append(
                f"| {c} | **dally vs best of tiresias/gandiva** | " + " | ".join(vals) + " |"
            )
    return "\n".join(lines) + "\n"
