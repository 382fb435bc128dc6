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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ddl_gym.scenarios import to_toml


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
    if root.exists() and not root.is_dir():
        raise NotADirectoryError(f"{root}: not a directory (--out must be a folder for runs)")
    base = name or f"{time.strftime('%Y%m%d-%H%M%S')}-{label}"
    path = root / base
    n = 2
    while path.exists():
        path = root / f"{base}-{n}"
        n += 1
    try:
        path.mkdir(parents=True)
    except OSError as err:  # a file on the way, no permission, disk full
        raise type(err)(f"{path}: cannot create the run folder: {err.strerror or err}") from None
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


def make_plots(run: RunData, folder: Path) -> dict[str, Path]:
    """Every plot the run's data supports, keyed by a short title."""
    from ddl_gym.report.plots import (  # matplotlib only when plotting
        TIMELINE_MAX_JOBS,
        TIMELINE_MAX_SERVERS,
        plot_jct_cdf,
        plot_levels,
        plot_metrics,
        plot_series,
        plot_timeline,
    )

    plots: dict[str, Path] = {}
    s = run.summary
    # several workloads: their cells do not average; compare draws per-workload
    # bars_<w>.png and jct_cdf_<w>.png instead
    single = "workload" not in s.columns or s["workload"].nunique() <= 1
    if single and len(s) and {"policy", "congestion", "makespan_s"} <= set(s.columns):
        plots["Makespan, mean JCT and communication overhead"] = plot_metrics(
            s, folder / "metrics.png"
        )
    if len(s) and "alloc_machine" in s.columns:
        plots["Allocation level per policy"] = plot_levels(s, folder / "levels.png")
    if single and run.jobs is not None and len(run.jobs) and "jct_s" in run.jobs.columns:
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
