"""Plots of run folders (``simulate`` / ``compare``) and of comparison grids.

Drawn only from what a run has, so the same code serves one policy with
everything recorded and many cells with summaries only. Headless: files,
never windows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: files, never windows
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

# a placement timeline is readable only for a handful of servers and jobs
TIMELINE_MAX_SERVERS = 32
TIMELINE_MAX_JOBS = 300

KEY_COLUMNS = ("policy", "workload", "congestion", "seed")


def _label(row: Mapping[str, Any], keys: Sequence[str]) -> str:
    return " / ".join(str(row[k]) for k in keys)


def _varying(df: pd.DataFrame, keys: Sequence[str] = KEY_COLUMNS) -> list[str]:
    """Key columns that take more than one value (what legends must tell apart)."""
    return [k for k in keys if k in df.columns and df[k].nunique() > 1]


# 12 distinct colours: tab10, then black and a dark gold; past 12 the colours
# repeat with dashed lines, so 24 policies still draw apart
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#000000", "#b8860b",
)  # fmt: skip
LINESTYLES = ("-", "--", ":")


def policy_styles(names: Sequence[str]) -> dict[str, dict[str, str]]:
    """A colour and line style per name, distinct for the first 12 names."""
    return {
        n: {
            "color": PALETTE[i % len(PALETTE)],
            "linestyle": LINESTYLES[(i // len(PALETTE)) % len(LINESTYLES)],
        }
        for i, n in enumerate(dict.fromkeys(names))
    }


def cdf_band(samples: Sequence[np.ndarray], grid: np.ndarray) -> np.ndarray:
    """Each sample's empirical CDF at ``grid``: one row per sample (seed)."""
    rows = []
    for s in samples:
        v = np.sort(np.asarray(s, dtype=float)[np.isfinite(s)])
        rows.append(np.searchsorted(v, grid, side="right") / max(1, len(v)))
    return np.vstack(rows)


def _log_grid(samples: Sequence[np.ndarray], points: int = 400) -> np.ndarray:
    values = np.concatenate([np.asarray(s, dtype=float) for s in samples])
    values = values[np.isfinite(values) & (values > 0)]
    if len(values) == 0:
        return np.array([1.0])
    lo, hi = float(values.min()), float(values.max())
    return np.unique(np.concatenate([np.geomspace(lo, hi, points), values]))


def draw_cdf(ax, samples: Sequence[np.ndarray], label: str, style: Mapping[str, str]) -> None:
    """One policy's JCT CDF (hours): the mean over seeds of the per-seed CDFs,
    with the pointwise min-max band over seeds when there are several."""
    samples = [np.asarray(s, dtype=float) / 3600.0 for s in samples if len(s)]
    if not samples:
        return
    grid = _log_grid(samples)
    cdfs = cdf_band(samples, grid)
    n = len(samples)
    ax.step(grid, cdfs.mean(axis=0), where="post", lw=1.3, label=label, **style)
    if n > 1:
        ax.fill_between(
            grid, cdfs.min(axis=0), cdfs.max(axis=0), step="post", alpha=0.13, lw=0,
            color=style["color"],
        )  # fmt: skip


def _legend_outside(fig, axes, title: str | None = None) -> None:
    """One legend for the figure, right of the panels, never over a curve."""
    handles, labels = [], []
    for ax in np.ravel(axes):
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if handles:
        fig.legend(
            handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8,
            title=title, title_fontsize=8, frameon=False,
        )  # fmt: skip


def _bar_note(ns: Sequence[int], over: str = "seeds") -> str:
    """What the bars and their error bars are, for ``ns`` values per bar."""
    lo, hi = min(ns, default=1), max(ns, default=1)
    if hi <= 1:
        return f"one {over[:-1]} per bar: no error bars"
    count = f"{hi} {over}" if lo == hi else f"{lo}-{hi} {over}"
    tail = "" if lo > 1 else "; none where n = 1"
    return f"mean over {count}; error bars: 95% t-interval, cut at 0{tail}"


def _seed_note(n_seeds: int) -> str:
    return (
        f"mean over {n_seeds} seeds, band: min-max over seeds"
        if n_seeds > 1
        else "one seed (no band)"
    )


def plot_jct_cdf(jobs: pd.DataFrame, path: Path) -> Path:
    """One panel per congestion level (and workload, when it varies); one curve
    per policy, aggregated over seeds (mean of the per-seed CDFs, min-max band)."""
    facets = [k for k in ("workload", "congestion") if k in _varying(jobs)]
    panels = list(dict.fromkeys(map(tuple, jobs[facets].to_numpy()))) if facets else [()]
    styles = policy_styles(jobs["policy"].astype(str).tolist()) if "policy" in jobs else {}
    seeds = int(jobs["seed"].nunique()) if "seed" in jobs else 1
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(4.2 * cols, 3.4 * rows), sharey=True, squeeze=False
    )
    for ax, panel in zip(axes.ravel(), panels, strict=False):
        sub = jobs
        for k, v in zip(facets, panel, strict=True):
            sub = sub[sub[k] == v]
        for policy, grp in sub.groupby("policy", sort=False) if "policy" in sub else []:
            by_seed = (
                [g["jct_s"].dropna().to_numpy() for _, g in grp.groupby("seed")]
                if ("seed" in grp)
                else [grp["jct_s"].dropna().to_numpy()]
            )
            draw_cdf(ax, by_seed, str(policy), styles[str(policy)])
        ax.set_xscale("log")
        ax.set_xlabel("JCT (h, log scale)")
        where = ", ".join(f"{k} {v}" for k, v in zip(facets, panel, strict=True))
        ax.set_title("JCT CDF" + (f", {where}" if where else ""), fontsize=9)
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[len(panels) :]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("fraction of jobs")
    fig.suptitle(f"JCT CDF per policy ({_seed_note(seeds)})", fontsize=10)
    _legend_outside(fig, axes, "policy")
    return _save(fig, path)


METRIC_PANELS = (
    ("makespan_s", "makespan (h)", 1 / 3600.0),
    ("mean_jct_s", "mean JCT (h)", 1 / 3600.0),
    ("comm_overhead", "comm overhead (comm/compute)", 1.0),
)


def _mean_and_ci(summary: pd.DataFrame, keys: list[str], metric: str) -> pd.DataFrame:
    """Mean and 95% t half width of ``metric`` per ``keys`` group (NaN half
    width for one value)."""
    from ddl_gym.report.stats import mean_ci

    rows = []
    for key, grp in summary.groupby(keys, sort=False):
        est = mean_ci(grp[metric].to_numpy())
        rows.append((*(key if isinstance(key, tuple) else (key,)), est.value, est.half_width))
    return pd.DataFrame(rows, columns=[*keys, "mean", "ci"]).set_index(keys)


def draw_bars(
    ax,
    table: pd.DataFrame,
    groups: Sequence[Any],
    series: Sequence[Any],
    styles: Mapping[Any, Mapping[str, str]],
    scale: float,
) -> None:
    """Grouped bars (one group per ``groups`` item, one bar per ``series``
    item) of ``table`` (index (series, group); columns mean, ci) with 95%
    error bars where there is spread."""
    width = 0.8 / max(1, len(series))
    x = np.arange(len(groups))
    for k, name in enumerate(series):
        vals, low, high = [], [], []
        for g in groups:
            row = table.loc[(name, g)] if (name, g) in table.index else None
            mean = np.nan if row is None else float(row["mean"]) * scale
            # no interval (n = 1): NaN draws no error bar, where 0 would draw a cap
            ci = np.nan if row is None or not np.isfinite(row["ci"]) else float(row["ci"]) * scale
            vals.append(mean)
            high.append(ci)
            # these metrics are never negative: the interval stops at 0
            low.append(min(ci, mean) if mean >= 0 else ci)
        ax.bar(
            x + (k - (len(series) - 1) / 2) * width, vals, width, yerr=[low, high], capsize=2,
            label=str(name), color=styles[name]["color"], error_kw={"lw": 0.8},
        )  # fmt: skip
    ax.set_xticks(x, [str(g) for g in groups], fontsize=8)
    ax.grid(axis="y", alpha=0.3)


def plot_metrics(summary: pd.DataFrame, path: Path) -> Path:
    """Makespan, mean JCT, comm overhead: one group of bars per congestion
    level, one bar per policy (mean over seeds, 95% t error bars)."""
    policies = list(dict.fromkeys(summary["policy"]))
    levels = list(dict.fromkeys(summary["congestion"]))
    styles = policy_styles(policies)
    over = "cells" if "workload" in _varying(summary) else "seeds"
    ns = summary.groupby(["policy", "congestion"]).size().tolist()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for ax, (metric, title, scale) in zip(axes, METRIC_PANELS, strict=True):
        table = _mean_and_ci(summary, ["policy", "congestion"], metric)
        draw_bars(ax, table, levels, policies, styles, scale)
        ax.set_xlabel("congestion")
        ax.set_title(title, fontsize=10)
    fig.suptitle(_bar_note(ns, over), fontsize=9)
    _legend_outside(fig, axes, "policy")
    return _save(fig, path)


def plot_levels(summary: pd.DataFrame, path: Path) -> Path:
    """Placements started per level (machine / rack / network), stacked: means
    over seeds, with the 95% t error bar of the total where there is spread."""
    from ddl_gym.report.stats import mean_ci

    cols = ["alloc_machine", "alloc_rack", "alloc_network"]
    keys = [k for k in ("policy", "congestion") if k in summary.columns]
    grouped = summary.groupby(keys, sort=False)
    mean = grouped[cols].mean()
    totals = [mean_ci(g[cols].sum(axis=1).to_numpy()) for _, g in grouped]
    ns = [len(g) for _, g in grouped]
    labels = [" / ".join(map(str, k)) if isinstance(k, tuple) else str(k) for k in mean.index]
    fig, ax = plt.subplots(figsize=(max(5.0, 0.6 * len(labels) + 2), 3.8))
    bottom = np.zeros(len(mean))
    for col, color in zip(cols, ("#4c72b0", "#dd8452", "#c44e52"), strict=True):
        vals = mean[col].to_numpy()
        ax.bar(labels, vals, bottom=bottom, label=col.removeprefix("alloc_"), color=color)
        bottom += vals
    # no interval (n = 1): NaN draws no error bar
    high = np.array([t.half_width if np.isfinite(t.half_width) else np.nan for t in totals])
    low = np.minimum(high, bottom)  # counts: the interval stops at 0
    ax.errorbar(labels, bottom, yerr=[low, high], fmt="none", ecolor="black", capsize=2, lw=0.8)
    ax.set_ylabel("placements started")
    ax.set_title(f"allocation level per policy ({_bar_note(ns, 'seeds')})", fontsize=9)
    ax.tick_params(axis="x", rotation=30, labelsize=8)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def plot_series(series: pd.DataFrame, num_gpus: int, path: Path) -> Path:
    keys = _varying(series) or ["policy"]
    fig, (ax_u, ax_q) = plt.subplots(2, 1, figsize=(8, 5), sharex=True)
    for name, grp in series.groupby(keys, sort=False):
        label = " / ".join(map(str, name)) if isinstance(name, tuple) else str(name)
        t = grp["time_s"].to_numpy() / 3600.0
        ax_u.step(t, grp["used_gpus"].to_numpy() / num_gpus, where="post", label=label, lw=0.8)
        ax_q.step(t, grp["queue_length"].to_numpy(), where="post", label=label, lw=0.8)
    ax_u.set_ylabel("GPU utilisation")
    ax_u.set_ylim(0, 1.05)
    ax_q.set_ylabel("queue length (jobs)")
    ax_q.set_xlabel("time (h)")
    for ax in (ax_u, ax_q):
        ax.grid(alpha=0.3)
    ax_u.legend(fontsize=7)
    return _save(fig, path)


def _segments(segs: pd.DataFrame) -> list[tuple[int, int, int, float, float]]:
    """(job, server, GPUs on it, start, end) of each segment row, as plain values."""
    return list(
        zip(
            segs["job"].tolist(),
            segs["server"].tolist(),
            segs["server_gpus"].tolist(),
            segs["start_s"].tolist(),
            segs["end_s"].tolist(),
            strict=True,
        )
    )


def _slots(segs: pd.DataFrame, gpus_per_server: int) -> list[list[int]]:
    """GPU slots inside its server for each segment row: greedy interval
    colouring in start order, which never needs more slots than the server has
    because the engine never over-commits it."""
    free_at: dict[int, list[float]] = {}
    out: list[list[int]] = []
    for _, server, gpus, start, end in _segments(segs):
        slots = free_at.setdefault(server, [-math.inf] * gpus_per_server)
        mine = [i for i, t in enumerate(slots) if t <= start][:gpus]
        for i in mine:
            slots[i] = end
        out.append(mine)
    return out


def plot_timeline(placements: pd.DataFrame, gpus_per_server: int, path: Path) -> Path:
    """Which job ran on which server's GPUs over time (one row per GPU)."""
    segs = placements.sort_values(["start_s", "job"], kind="stable").reset_index(drop=True)
    servers = int(segs["server"].max()) + 1
    cmap = plt.get_cmap("tab20")
    fig, ax = plt.subplots(figsize=(10, max(3.0, 0.12 * servers * gpus_per_server + 1.5)))
    span = float(segs["end_s"].max() - segs["start_s"].min()) / 3600.0 or 1.0
    for (job, server, _, start_s, end_s), slots in zip(
        _segments(segs), _slots(segs, gpus_per_server), strict=True
    ):
        start, width = start_s / 3600.0, (end_s - start_s) / 3600.0
        color = cmap(job % 20)
        for s in slots:
            ax.broken_barh([(start, width)], (server * gpus_per_server + s, 0.9), color=color)
        if slots and width > 0.04 * span:
            ax.text(
                start + width / 2,
                server * gpus_per_server + slots[0] + 0.45,
                str(job),
                ha="center",
                va="center",
                fontsize=6,
            )
    for s in range(1, servers):
        ax.axhline(s * gpus_per_server - 0.05, color="grey", lw=0.5)
    ax.set_yticks(
        [s * gpus_per_server + gpus_per_server / 2 for s in range(servers)],
        [f"server {s}" for s in range(servers)],
        fontsize=7,
    )
    ax.set_ylim(0, servers * gpus_per_server)
    ax.set_xlabel("time (h)")
    ax.set_title("placement timeline (bars: job index on a GPU)")
    return _save(fig, path)


def _save(fig, path: Path, dpi: int = 110) -> Path:
    fig.tight_layout()
    # "tight": keep the legend placed right of the panels inside the image
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return path


# -- the comparison grid (ddl_gym.experiments.grid) -----------------------------
def plot_compare(cells: list[dict[str, Any]], summary: pd.DataFrame, out: Path) -> list[Path]:
    """Per workload: a JCT CDF per congestion level (one curve per policy,
    aggregated over seeds with a min-max band) and bars of makespan, mean JCT
    and communication overhead with 95% error bars; returns the files written."""
    written = []
    styles = policy_styles(list(dict.fromkeys(summary["policy"])))
    for w in summary["workload"].unique():
        s = summary[summary["workload"] == w]
        congestions = list(s["congestion"].unique())
        policies = list(s["policy"].unique())
        seeds = int(s["seeds"].max()) if "seeds" in s else 1
        fig, axes = plt.subplots(
            1, len(congestions), figsize=(4.2 * len(congestions), 3.6), sharey=True,
            squeeze=False,
        )  # fmt: skip
        for ax, c in zip(axes[0], congestions, strict=True):
            for p in policies:
                jct = [
                    np.asarray(x["jct_s"], dtype=float)
                    for x in cells
                    if (x["workload"], x["congestion"], x["policy"]) == (w, c, p)
                ]
                draw_cdf(ax, jct, p, styles[p])
            ax.set_xscale("log")
            ax.set_xlabel("JCT (h, log scale)")
            ax.set_title(f"congestion {c}", fontsize=9)
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("fraction of jobs")
        fig.suptitle(f"{w}: JCT CDF ({_seed_note(seeds)})", fontsize=10)
        _legend_outside(fig, axes, "policy")
        written.append(_save(fig, out / f"jct_cdf_{w}.png", dpi=100))

        fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
        for ax, (m, label, scale) in zip(axes, METRIC_PANELS, strict=True):
            table = s.set_index(["policy", "congestion"])[[m, f"{m}_ci95"]]
            table = table.set_axis(["mean", "ci"], axis=1)
            draw_bars(ax, table, congestions, policies, styles, scale)
            ax.set_xlabel("congestion")
            ax.set_title(label, fontsize=10)
        ns = s["seeds"].astype(int).tolist() if "seeds" in s else [1]
        fig.suptitle(f"{w}: {_bar_note(ns)}", fontsize=9)
        _legend_outside(fig, axes, "policy")
        written.append(_save(fig, out / f"bars_{w}.png", dpi=100))
    return written
