"""Compare the baseline schedulers the way the seed paper does.

Grid: policies x workloads x congestion levels x seeds. Each cell is a pure
function, ``run_cell(policy, workload, congestion, seed, ...) -> dict``, so
the same cells can later run as Ray tasks; here they run on a
``multiprocessing`` pool.

Outputs (default folder ``runs/compare/``):

* a markdown table per workload on stdout (and in ``tables.md``): makespan,
  mean / p95 / p99 JCT, mean queueing delay, communication overhead
  (exposed all-reduce time over compute time, and in GPU-hours), GPU
  utilisation, preemptions, allocations per level; averaged over seeds;
  plus, per congestion level, the improvement of Dally (auto-tuned) over the
  best consolidation-based baseline (Tiresias, Gandiva) per metric, as the
  paper reports it (``(best - dally) / best``; for utilisation the reverse);
* ``cells.csv`` (one row per cell) and ``summary.csv`` (the tables);
* ``jct_cdf_<workload>.png`` (JCT CDF per policy, one panel per congestion
  level) and ``bars_<workload>.png`` (makespan, mean JCT and communication
  overhead per congestion level).

Engine settings: every policy runs with ``restore_s_per_gpu = 1`` (the seed's
1 s per GPU checkpoint) except Gandiva (0, as in the paper); the Dally
variants with preemption add 20 s leases (``policy.engine_kwargs()``).

Workloads: by default the bundled synthetic workload
(``ddl_gym.traces.default_trace(seed)``) on ``seed64``; with ``--data DIR``
(or ``--data auto``) the seed's two 411-job week traces and the four 500-job
load-sweep traces on ``seed64``, and the Philly week and the eight Pollux
workloads on ``seed512`` (8 racks x 8 servers x 8 GPUs with the seed
authors' fabric, so the network model is the one the seed traces use).
Seeds vary the synthetic trace and the random policy; real traces are
loaded with seed 0 (Philly/Pollux model assignment fixed), so a
deterministic policy runs once per (workload, congestion) there and its
result stands for every seed.

Usage::

    python scripts/compare.py                     # default workload, 3 seeds
    python scripts/compare.py --data ../shared/data
    python scripts/compare.py --quick             # CI: seconds

(``scripts/compare.py`` is a thin entry point to ``main`` here.)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from dataclasses import dataclass
from functools import lru_cache
from multiprocessing import get_context
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
    find_data_dir,
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
    Workload("seed-1proc-week", f"{_DALLY_DIR}_1proc-week.json", "seed64"),
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


def policy_choice(name: str) -> str:
    if name in POLICY_NAMES or name == AGENT or name.startswith(AGENT + ":"):
        return name
    raise argparse.ArgumentTypeError(
        f"unknown policy {name!r}; choose from {', '.join(POLICY_NAMES)}, {AGENT}[:PATH]"
    )


def run_cell(
    policy: str,
    workload: str,
    congestion: str,
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
        **pol.engine_kwargs(),
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


def _run(args: tuple) -> dict[str, Any]:
    return run_cell(*args)


# -- the grid -----------------------------------------------------------------
def make_cells(
    policies: list[str],
    workloads: list[str],
    congestions: list[str],
    seeds: list[int],
    data_dir: str | None,
    max_jobs: int | None,
) -> list[tuple]:
    # build each policy once: its flags are all the grid needs here (and the
    # learned agent loads a model)
    built = {p: policy_from_name(p) for p in dict.fromkeys(policies)}
    leased = {p: pol.engine_kwargs().get("lease_s") is not None for p, pol in built.items()}
    cells = []
    for w in workloads:
        for c in congestions:
            for p in policies:
                deterministic = built[p].deterministic
                # a fixed trace and a deterministic policy: one run for all seeds
                run_seeds = seeds if WORKLOADS[w].seeded or not deterministic else seeds[:1]
                for s in run_seeds:
                    cells.append((p, w, c, s, data_dir, max_jobs))

    # the slow cells (leases) first, so the pool ends together
    def cost(cell):
        return (not leased[cell[0]], WORKLOADS[cell[1]].path is None)

    return sorted(cells, key=cost)


def run_grid(cells: list[tuple], jobs: int, progress: bool = True) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []

    def report(r: dict[str, Any]) -> None:
        results.append(r)
        if progress:
            print(
                f"[{len(results)}/{len(cells)}] {r['policy']} {r['workload']} "
                f"{r['congestion']} seed {r['seed']}: {r['wall_s']:.1f} s",
                file=sys.stderr,
                flush=True,
            )

    if jobs <= 1 or len(cells) <= 1:
        for c in cells:
            report(_run(c))
        return results
    with get_context("spawn").Pool(jobs) as pool:
        for r in pool.imap_unordered(_run, cells):
            report(r)
    return results


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


# -- CLI ----------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="data dir with traces/ ('auto': find_data_dir())")
    ap.add_argument(
        "--policies",
        nargs="+",
        type=policy_choice,
        help=f"baselines ({', '.join(POLICY_NAMES)}) and/or {AGENT}[:PATH] "
        f"(default: every baseline, plus {AGENT} where torch and the shipped model are present)",
    )
    ap.add_argument("--workloads", nargs="+", choices=sorted(WORKLOADS))
    ap.add_argument("--congestion", nargs="+", default=list(CONGESTIONS))
    ap.add_argument("--seeds", type=int, default=3, help="number of seeds (0..n-1)")
    ap.add_argument("--max-jobs", type=int, help="truncate every workload to its first N jobs")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="processes")
    ap.add_argument("--out", default="runs/compare")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument(
        "--quick",
        action="store_true",
        help=f"CI preset: default workload cut to {QUICK_JOBS} jobs, one seed, "
        "congestion none and heavy (every policy: they take seconds)",
    )
    args = ap.parse_args(argv)

    data_dir: str | None = None
    if args.data:
        found = find_data_dir() if args.data == "auto" else Path(args.data)
        if found is None or not Path(found).is_dir():
            ap.error(f"data dir not found: {args.data}")
        data_dir = str(Path(found).resolve())
    workloads = args.workloads or (
        [w.name for w in DATA_WORKLOADS] if data_dir else [DEFAULT_WORKLOAD.name]
    )
    seeds = list(range(args.seeds))
    congestions = list(args.congestion)
    max_jobs = args.max_jobs
    if args.quick:
        seeds, congestions, max_jobs = [0], ["none", "heavy"], max_jobs or QUICK_JOBS
        workloads = args.workloads or [DEFAULT_WORKLOAD.name]

    policies = args.policies or [*POLICY_NAMES, *([AGENT] if agent_available() else [])]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cells = make_cells(policies, workloads, congestions, seeds, data_dir, max_jobs)
    start = time.perf_counter()
    results = run_grid(cells, args.jobs)
    wall = time.perf_counter() - start

    table = pd.DataFrame([{k: v for k, v in r.items() if k != "jct_s"} for r in results])
    order = {p: i for i, p in enumerate(policies)}
    table["_w"] = table["workload"].map({w: i for i, w in enumerate(workloads)})
    table["_c"] = table["congestion"].map({c: i for i, c in enumerate(congestions)})
    table["_p"] = table["policy"].map(order)
    table = table.sort_values(["_w", "_c", "_p", "seed"]).drop(columns=["_w", "_c", "_p"])
    table.to_csv(out / "cells.csv", index=False)
    summary = summarise(table)
    imp = improvement(summary)
    summary.to_csv(out / "summary.csv", index=False)
    imp.to_csv(out / "improvement.csv", index=False)

    text = [
        f"# Scheduler comparison ({len(cells)} cells, {wall:.0f} s wall on {args.jobs} processes)",
        "",
        "Engine: restore 1 s per GPU for every policy but gandiva (0); dally-1-2, dally-6-12 "
        "and dally with 20 s leases. Values are means over seeds "
        f"({len(seeds)}; deterministic policies on fixed traces run once).",
        "",
    ]
    for w in workloads:
        text.append(markdown(summary, imp, w))
    md = "\n".join(text)
    (out / "tables.md").write_text(md)
    print(md)
    if not args.no_plots:
        from ddl_gym.report.plots import plot_compare

        plot_compare(results, summary, out)
    print(f"wrote {out}/ (cells.csv, summary.csv, improvement.csv, tables.md, plots)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
