"""The comparison grid, as a library: policies x workloads x congestion
levels x seeds, each cell a pure function of plain data.

``run_cell(policy, workload, congestion, seed, ...) -> dict`` simulates one
cell; ``make_cells`` lists a grid's cells (keyword dicts); ``summarise``,
``improvement`` and ``markdown`` turn finished cells into the tables the seed
paper reports: means over seeds with 95% t-intervals, and Dally over the
better of Tiresias and Gandiva as a ratio of means with its interval
(``ddl_gym.report.stats``). The command line is ``ddl-gym compare``
(``ddl_gym.cli.compare``; ``scripts/compare.py`` and ``scripts/run.sh`` call
it), which runs cells with ``ddl_gym.experiments.runner`` (processes or Ray,
progress bar, one JSON per finished cell, ``--resume``).

Engine settings: every policy runs with its own ``engine_kwargs()``
(``simulate()`` applies them): ``restore_s_per_gpu = 1`` (the seed's 1 s per
GPU checkpoint) except Gandiva (0, as in the paper); the Dally variants with
preemption add 20 s leases.

Workloads: ``default`` is the bundled synthetic workload
(``ddl_gym.traces.default_trace(seed)``) on ``seed64``; ``ddl_gym.workloads.DATA_WORKLOADS``
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
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ddl_gym.baselines import ORACLES, POLICY_NAMES, TYPED_NAMES, make_policy
from ddl_gym.engine import simulate
from ddl_gym.report.stats import (
    METHOD,
    RATIO_METHOD,
    Estimate,
    fmt_mean_ci,
    fmt_ratio,
    mean_ci,
    ratio_ci,
)
from ddl_gym.traces import (
    Trace,
    TraceWarning,
    default_trace,
    head,
    load_trace,
)
from ddl_gym.workloads import WORKLOADS

CONGESTIONS = ("none", "moderate", "heavy")
DALLY = "dally"
CONSOLIDATION_BASELINES = ("tiresias", "gandiva")
QUICK_JOBS = 60


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
    """A baseline's registry name (the typed-cluster policies included) or
    ``agent[:PATH]``."""
    return (
        name in POLICY_NAMES or name in TYPED_NAMES or name == AGENT or name.startswith(AGENT + ":")
    )


# Policies that read true job sizes (remaining work) when the engine is
# clairvoyant; as shipped they ask for it (their engine_kwargs()). Every table
# labels them "(oracle)": no real scheduler knows job sizes.
ORACLE_POLICIES = frozenset(ORACLES)


def is_clairvoyant(policy: Any, explicit: Mapping[str, Any] | None = None) -> bool:
    """Whether ``policy`` runs on a clairvoyant engine: the caller's explicit
    ``clairvoyant`` if set, else the policy's ``engine_kwargs()``, else the
    engine's default (False)."""
    from ddl_gym.engine.simulate import policy_engine_kwargs

    value = (explicit or {}).get("clairvoyant")
    if value is None:
        value = policy_engine_kwargs(policy).get("clairvoyant", False)
    return bool(value)


def policy_label(name: str, clairvoyant: bool) -> str:
    """A policy's name as tables print it: ``"srtf (oracle)"`` when it reads
    true job sizes."""
    return f"{name} (oracle)" if clairvoyant and name in ORACLE_POLICIES else name


def label_policies(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with its ``policy`` column labelled (``policy_label``) from its
    ``clairvoyant`` column, for printing; unchanged without that column."""
    if "clairvoyant" not in df.columns or "policy" not in df.columns:
        return df
    out = df.copy()
    out["policy"] = [
        policy_label(p, bool(c)) for p, c in zip(df["policy"], df["clairvoyant"], strict=True)
    ]
    return out


def clairvoyance_note(df: pd.DataFrame) -> str:
    """One line saying which rows had true job sizes (the explicit choice
    every comparison states)."""
    if "clairvoyant" not in df.columns or not df["clairvoyant"].astype(bool).any():
        return "Clairvoyant: no (no policy sees job sizes or remaining work)."
    names = sorted(set(df.loc[df["clairvoyant"].astype(bool), "policy"]))
    return (
        f"Clairvoyant: only {', '.join(names)}, labelled (oracle): they read true job sizes, "
        "which no real scheduler knows; every other policy is non-clairvoyant."
    )


def tie_note(summary: pd.DataFrame) -> str:
    """A line per (workload, congestion) where every policy (two or more) has
    the same makespan and mean JCT: such a workload does not queue enough for
    the scheduler to matter, so it cannot rank schedulers ("" if none)."""
    lines = []
    for (workload, congestion), group in summary.groupby(["workload", "congestion"], sort=False):
        per_policy = group.groupby("policy")[["makespan_s", "mean_jct_s"]].mean()
        if len(per_policy) > 1 and (per_policy.nunique() == 1).all():
            lines.append(
                f"Note: all {len(per_policy)} policies tie on {workload} at congestion "
                f"{congestion}: it does not queue enough to separate schedulers; rank them on "
                "a benchmark suite instead (ddl-gym benchmark evaluate, docs/benchmark.md)."
            )
    return "\n".join(lines)


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
        "clairvoyant": is_clairvoyant(pol),
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
    ("comm_overhead", "comm_overhead (comm/compute)", 1.0, True),
    ("comm_gpu_h", "comm GPU-h", 1.0, True),
    ("gpu_utilization", "util %", 100.0, False),
    ("preemptions", "preempt", 1.0, None),
    ("alloc_machine", "alloc M", 1.0, None),
    ("alloc_rack", "alloc R", 1.0, None),
    ("alloc_network", "alloc N", 1.0, None),
)
GROUP = ["workload", "congestion", "policy"]
CI_SUFFIX = "_ci95"  # summarise(): half width of the 95% t-interval, same unit


def summarise(cells: pd.DataFrame) -> pd.DataFrame:
    """Per (workload, congestion, policy): the mean over seeds of every metric,
    ``<metric>_ci95`` (half width of its 95% t-interval; NaN for one seed) and
    ``seeds`` (n)."""
    cols = [m for m, *_ in METRICS if m in cells.columns]
    groups = cells.groupby(GROUP, sort=False)
    out = groups[[*cols, "wall_s"] if "wall_s" in cells.columns else cols].mean()
    for m in cols:
        out[m + CI_SUFFIX] = groups[m].agg(lambda v: mean_ci(v.to_numpy()).half_width)
    out["seeds"] = groups.size()
    if "clairvoyant" in cells.columns:
        out["clairvoyant"] = groups["clairvoyant"].max().astype(bool)
    return out.reset_index()


def _by_seed(cells: pd.DataFrame, policy: str, metric: str) -> pd.Series:
    rows = cells[cells["policy"] == policy]
    return rows.set_index("seed")[metric].astype(float) if "seed" in rows else rows[metric]


def improvement(cells: pd.DataFrame) -> pd.DataFrame:
    """Per (workload, congestion): Dally's metric over the better of Tiresias
    and Gandiva (by mean), as a ratio of means over seeds with its 95%
    interval (``ddl_gym.report.stats.ratio_ci``; paired by seed when both
    sides ran the same seeds). Columns ``<metric>`` (the ratio),
    ``<metric>_low`` / ``<metric>_high`` (NaN with one seed a side) and
    ``<metric>_base`` (which baseline). Only those three policies' cells are
    read, so other policies in the grid never change the row; a base mean
    of 0 gives NaN ("n/a": no ratio exists)."""
    rows = []
    for (w, c), g in cells.groupby(["workload", "congestion"], sort=False):
        bases = [b for b in CONSOLIDATION_BASELINES if b in set(g["policy"])]
        if DALLY not in set(g["policy"]) or not bases:
            continue
        row: dict[str, Any] = {"workload": w, "congestion": c}
        for m, _, _, lower in METRICS:
            if lower is None or m not in g.columns:
                continue
            means = {b: float(g.loc[g["policy"] == b, m].astype(float).mean()) for b in bases}
            best = (min if lower else max)(bases, key=lambda b: means[b])
            dally, base = _by_seed(g, DALLY, m), _by_seed(g, best, m)
            paired = len(dally) > 1 and sorted(dally.index) == sorted(base.index)
            if paired:
                base = base.loc[dally.index]
            est = ratio_ci(dally.to_numpy(), base.to_numpy(), paired=paired)
            row |= {m: est.value, f"{m}_low": est.low, f"{m}_high": est.high, f"{m}_base": best}
        rows.append(row)
    return pd.DataFrame(rows)


def improvement_cell(imp_row: Mapping[str, Any] | pd.Series, metric: str) -> str:
    """One cell of the ratio row: ``1.5× (1.2–1.8)``, ``0.83×`` (one seed a
    side) or ``n/a`` (the base's mean is 0)."""
    value = float(imp_row.get(metric, float("nan")))
    low = float(imp_row.get(f"{metric}_low", float("nan")))
    high = float(imp_row.get(f"{metric}_high", float("nan")))
    return fmt_ratio(Estimate(value, low, high, 0))


def mean_cell(row: Mapping[str, Any] | pd.Series, metric: str, scale: float) -> str:
    """``mean ± half width`` of a ``summarise`` row, or the mean for one seed."""
    half = float(row.get(metric + CI_SUFFIX, float("nan")))
    mean = float(row[metric])
    lo, hi = (mean - half, mean + half) if np.isfinite(half) else (np.nan, np.nan)
    return fmt_mean_ci(Estimate(mean, lo, hi, int(row.get("seeds", 1))), scale)


def spread_note(summary: pd.DataFrame) -> str:
    """The footnote that says what ``±`` means and where n = 1."""
    ns = sorted({int(n) for n in summary.get("seeds", pd.Series([1]))})
    text = (
        f"Values: mean ± half width of the {METHOD} (t with n-1 degrees of freedom; "
        "n = seeds, column n)."
    )
    if ns == [1]:
        return text + " Every row here has n = 1: no spread to show."
    if 1 in ns:
        text += (
            " Rows with n = 1 show the mean alone: a deterministic policy on a fixed trace "
            "gives the same result for every seed, so it runs once."
        )
    return text


def markdown(summary: pd.DataFrame, imp: pd.DataFrame, workload: str) -> str:
    s = summary[summary["workload"] == workload]
    metrics = [(m, label, scale) for m, label, scale, _ in METRICS if m in s.columns]
    header = ["congestion", "policy", "n", *(label for _, label, _ in metrics)]
    lines = [
        f"### {workload} ({WORKLOADS[workload].cluster})",
        "",
        clairvoyance_note(s),
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    lower_of = {m: lower for m, _, _, lower in METRICS}
    for c in s["congestion"].unique():
        for _, r in s[s["congestion"] == c].iterrows():
            vals = [mean_cell(r, m, scale) for m, _, scale in metrics]
            name = policy_label(r["policy"], bool(r.get("clairvoyant", False)))
            n = int(r.get("seeds", 1))
            lines.append(f"| {c} | {name} | {n} | " + " | ".join(vals) + " |")
        i = imp[(imp["workload"] == workload) & (imp["congestion"] == c)] if len(imp) else imp
        if len(i):
            r = i.iloc[0]
            vals = ["-" if lower_of[m] is None else improvement_cell(r, m) for m, _, _ in metrics]
            lines.append(
                f"| {c} | **dally / best of tiresias, gandiva** | | " + " | ".join(vals) + " |"
            )
    lines += ["", spread_note(s)]
    if len(imp) and (imp["workload"] == workload).any():
        lines += [
            "",
            "Ratio rows: Dally's mean over the mean of the better of Tiresias and Gandiva "
            "(chosen per metric and congestion; no other policy enters), with the 95% interval "
            f"in brackets ({RATIO_METHOD}; none when both sides ran once). Below 1 Dally is "
            "lower: better for times, queues and communication; for util % above 1 is better. "
            "n/a: the base's mean is 0.",
        ]
    return "\n".join(lines) + "\n"


# the columns of the per-seed-aggregated table `ddl-gym compare -s` prints
HEADLINE_METRICS = (
    "makespan_s",
    "mean_jct_s",
    "p95_jct_s",
    "mean_queueing_s",
    "comm_overhead",
    "gpu_utilization",
    "preemptions",
)


def spread_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per (workload, congestion, policy): n and the headline metrics
    as ``mean ± half width`` strings (``spread_note`` says what that is)."""
    summary = summarise(cells)
    info = {m: (label, scale) for m, label, scale, _ in METRICS}
    out = label_policies(summary)[[*GROUP, "seeds"]].rename(columns={"seeds": "n"})
    for m in HEADLINE_METRICS:
        if m in summary.columns:
            label, scale = info[m]
            out[label] = [mean_cell(r, m, scale) for _, r in summary.iterrows()]
    return out.reset_index(drop=True)


def ratio_table(cells: pd.DataFrame) -> pd.DataFrame:
    """The ratio rows of ``improvement`` for the headline metrics, as strings:
    one row per (workload, congestion) with Dally and Tiresias or Gandiva
    (empty otherwise)."""
    imp = improvement(cells)
    if imp.empty:
        return imp
    info = {m: label for m, label, _, lower in METRICS if lower is not None}
    out = imp[["workload", "congestion"]].copy()
    for m in HEADLINE_METRICS:
        if m in info and m in imp.columns:
            out[info[m]] = [improvement_cell(r, m) for _, r in imp.iterrows()]
    return out
