"""The run folder: tables (CSV + Parquet), the config used, plots, report.md.

Layout of ``runs/<name>/``::

    config.toml        the scenario and run settings (repeat with --config)
    summary.csv|.parquet   one row per cell (policy x workload x congestion x seed)
    jobs.csv|.parquet      per-job table of every cell (simulate, compare with jobs)
    series.csv|.parquet    utilisation / queue length over time
    placements.csv|.parquet which job ran on which server when (simulate)
    cells/             compare: one JSON per finished cell, written as it finishes
    *.png, report.md   plots and the report embedding them

Plots are drawn only from what the run has, so the same code serves
``simulate`` (one policy, everything) and ``compare`` (many cells, summary).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: files, never windows
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ddl_gym.scenarios import to_toml  # noqa: E402

# a placement timeline is readable only for a handful of servers and jobs
TIMELINE_MAX_SERVERS = 32
TIMELINE_MAX_JOBS = 300

KEY_COLUMNS = ("policy", "workload", "congestion", "seed")


@dataclass
class RunData:
    """Everything a run produced (frames may be None when a run lacks them)."""

    summary: pd.DataFrame
    jobs: pd.DataFrame | None = None
    series: pd.DataFrame | None = None
    placements: pd.DataFrame | None = None
    num_gpus: int | None = None
    gpus_per_server: int | None = None
    notes: list[str] = field(default_factory=list)


# -- folder and tables -----------------------------------------------------------
def new_run_dir(root: str | Path, name: str | None, label: str) -> Path:
    """``root/name`` (or ``root/<timestamp>-label``), never reusing a folder."""
    root = Path(root)
    base = name or f"{time.strftime('%Y%m%d-%H%M%S')}-{label}"
    path = root / base
    n = 2
    while path.exists():
        path = root / f"{base}-{n}"
        n += 1
    path.mkdir(parents=True)
    return path


def parquet_available() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def write_table(df: pd.DataFrame, folder: Path, stem: str) -> list[Path]:
    """``stem.csv`` and, where pyarrow is installed, ``stem.parquet``."""
    out = [folder / f"{stem}.csv"]
    df.to_csv(out[0], index=False, float_format="%.10g")
    if parquet_available():
        out.append(folder / f"{stem}.parquet")
        df.to_parquet(out[1], index=False)
    return out


def write_config(folder: Path, config: Mapping[str, Any]) -> Path:
    path = folder / "config.toml"
    path.write_text(to_toml(config), encoding="utf-8")
    return path


def write_tables(run: RunData, folder: Path) -> list[Path]:
    written = write_table(run.summary, folder, "summary")
    for stem in ("jobs", "series", "placements"):
        df = getattr(run, stem)
        if df is not None and len(df):
            written += write_table(df, folder, stem)
    return written


# -- plots ----------------------------------------------------------------------
def _label(row: Mapping[str, Any], keys: Sequence[str]) -> str:
    return " / ".join(str(row[k]) for k in keys)


def _varying(df: pd.DataFrame, keys: Sequence[str] = KEY_COLUMNS) -> list[str]:
    """Key columns that take more than one value (what legends must tell apart)."""
    return [k for k in keys if k in df.columns and df[k].nunique() > 1]


def plot_jct_cdf(jobs: pd.DataFrame, path: Path) -> Path:
    """One panel per congestion level (when it varies), one line per policy
    (and seed / workload when those vary)."""
    varying = _varying(jobs)
    facet = "congestion" if "congestion" in varying else None
    keys = [k for k in varying if k != facet] or ["policy"]
    panels = list(dict.fromkeys(jobs[facet])) if facet else [None]
    fig, axes = plt.subplots(
        1, len(panels), figsize=(4.2 * len(panels) + 1, 3.8), sharey=True, squeeze=False
    )
    for ax, panel in zip(axes[0], panels, strict=True):
        sub = jobs if facet is None else jobs[jobs[facet] == panel]
        for name, grp in sub.groupby(keys, sort=False):
            jct = np.sort(grp["jct_s"].dropna().to_numpy()) / 3600.0
            if len(jct) == 0:
                continue
            y = np.arange(1, len(jct) + 1) / len(jct)
            label = " / ".join(map(str, name)) if isinstance(name, tuple) else str(name)
            ax.step(jct, y, where="post", label=label)
        ax.set_xscale("log")
        ax.set_xlabel("JCT (h, log scale)")
        ax.set_title("JCT CDF" + (f", congestion {panel}" if facet else ""), fontsize=10)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("fraction of jobs")
    axes[0][-1].legend(fontsize=7)
    return _save(fig, path)


METRIC_PANELS = (
    ("makespan_s", "makespan (h)", 1 / 3600.0),
    ("mean_jct_s", "mean JCT (h)", 1 / 3600.0),
    ("comm_overhead", "comm. overhead (comm / compute)", 1.0),
)


def plot_metrics(summary: pd.DataFrame, path: Path) -> Path:
    """Makespan, mean JCT, comm overhead: bars per policy, one per congestion
    level (means over seeds and workloads)."""
    mean = summary.groupby(["policy", "congestion"], sort=False)[
        [m for m, _, _ in METRIC_PANELS]
    ].mean()
    policies = list(dict.fromkeys(summary["policy"]))
    levels = list(dict.fromkeys(summary["congestion"]))
    width = 0.8 / len(levels)
    x = np.arange(len(policies))
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    for ax, (metric, title, scale) in zip(axes, METRIC_PANELS, strict=True):
        for i, level in enumerate(levels):
            vals = [mean[metric].get((p, level), np.nan) * scale for p in policies]
            ax.bar(x + (i - (len(levels) - 1) / 2) * width, vals, width, label=str(level))
        ax.set_xticks(x, policies, rotation=30, ha="right", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(title="congestion", fontsize=7, title_fontsize=7)
    return _save(fig, path)


def plot_levels(summary: pd.DataFrame, path: Path) -> Path:
    """Placements started per level (machine / rack / network), stacked."""
    cols = ["alloc_machine", "alloc_rack", "alloc_network"]
    keys = [k for k in ("policy", "congestion") if k in summary.columns]
    mean = summary.groupby(keys, sort=False)[cols].mean()
    labels = [" / ".join(map(str, k)) if isinstance(k, tuple) else str(k) for k in mean.index]
    fig, ax = plt.subplots(figsize=(max(5.0, 0.6 * len(labels) + 2), 3.8))
    bottom = np.zeros(len(mean))
    for col, color in zip(cols, ("#4c72b0", "#dd8452", "#c44e52"), strict=True):
        vals = mean[col].to_numpy()
        ax.bar(labels, vals, bottom=bottom, label=col.removeprefix("alloc_"), color=color)
        bottom += vals
    ax.set_ylabel("placements started")
    ax.set_title("allocation level per policy")
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


def _slots(segs: pd.DataFrame, gpus_per_server: int) -> list[list[int]]:
    """GPU slots inside its server for each segment row: greedy interval
    colouring in start order, which never needs more slots than the server has
    because the engine never over-commits it."""
    free_at: dict[int, list[float]] = {}
    out: list[list[int]] = []
    for row in segs.itertuples(index=False):
        slots = free_at.setdefault(row.server, [-math.inf] * gpus_per_server)
        mine = [i for i, t in enumerate(slots) if t <= row.start_s][: row.server_gpus]
        for i in mine:
            slots[i] = row.end_s
        out.append(mine)
    return out


def plot_timeline(placements: pd.DataFrame, gpus_per_server: int, path: Path) -> Path:
    """Which job ran on which server's GPUs over time (one row per GPU)."""
    segs = placements.sort_values(["start_s", "job"], kind="stable").reset_index(drop=True)
    servers = int(segs["server"].max()) + 1
    cmap = plt.get_cmap("tab20")
    fig, ax = plt.subplots(figsize=(10, max(3.0, 0.12 * servers * gpus_per_server + 1.5)))
    span = float(segs["end_s"].max() - segs["start_s"].min()) / 3600.0 or 1.0
    for row, slots in zip(segs.itertuples(index=False), _slots(segs, gpus_per_server), strict=True):
        start, width = row.start_s / 3600.0, (row.end_s - row.start_s) / 3600.0
        color = cmap(row.job % 20)
        for s in slots:
            ax.broken_barh([(start, width)], (row.server * gpus_per_server + s, 0.9), color=color)
        if slots and width > 0.04 * span:
            ax.text(
                start + width / 2,
                row.server * gpus_per_server + slots[0] + 0.45,
                str(row.job),
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


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def make_plots(run: RunData, folder: Path) -> dict[str, Path]:
    """Every plot the run's data supports, keyed by a short title."""
    plots: dict[str, Path] = {}
    s = run.summary
    if len(s) and {"policy", "congestion", "makespan_s"} <= set(s.columns):
        plots["Makespan, mean JCT and communication overhead"] = plot_metrics(
            s, folder / "metrics.png"
        )
    if len(s) and "alloc_machine" in s.columns:
        plots["Allocation level per policy"] = plot_levels(s, folder / "levels.png")
    if run.jobs is not None and len(run.jobs) and "jct_s" in run.jobs.columns:
        plots["JCT CDF per policy"] = plot_jct_cdf(run.jobs, folder / "jct_cdf.png")
    if run.series is not None and len(run.series) and run.num_gpus:
        plots["GPU utilisation and queue length over time"] = plot_series(
            run.series, run.num_gpus, folder / "series.png"
        )
    p = run.placements
    if (
        p is not None
        and len(p)
        and run.gpus_per_server
        and p["server"].max() < TIMELINE_MAX_SERVERS
        and p["job"].nunique() <= TIMELINE_MAX_JOBS
    ):
        plots["Placement timeline"] = plot_timeline(p, run.gpus_per_server, folder / "timeline.png")
    return plots


# -- report ---------------------------------------------------------------------
def md_table(df: pd.DataFrame, floatfmt: str = "{:,.4g}") -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        cells = [
            floatfmt.format(v) if isinstance(v, float) and not math.isnan(v) else str(v)
            for v in row
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_report(
    folder: Path,
    title: str,
    config: Mapping[str, Any],
    run: RunData,
    plots: Mapping[str, Path],
    headline: pd.DataFrame,
) -> Path:
    parts = [f"# {title}", ""]
    parts += [f"Config (repeat with `--config {folder / 'config.toml'}`):", ""]
    parts += ["```toml", to_toml(config).rstrip(), "```", ""]
    parts += ["## Summary", "", md_table(headline), ""]
    for note in run.notes:
        parts += [f"> {note}", ""]
    for name, path in plots.items():
        parts += [f"## {name}", "", f"![{name}]({path.name})", ""]
    files = sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix != ".png")
    parts += ["## Files", "", ", ".join(f"`{f}`" for f in files + ["report.md"]), ""]
    path = folder / "report.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def finish_run(
    folder: Path,
    title: str,
    config: Mapping[str, Any],
    run: RunData,
    headline: pd.DataFrame,
) -> Path:
    """Tables, plots and report.md for a finished (or interrupted) run."""
    write_tables(run, folder)
    plots = make_plots(run, folder)
    return write_report(folder, title, config, run, plots, headline)
