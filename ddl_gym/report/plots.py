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
    ("comm_overhead", "comm overhead (comm/compute)", 1.0),
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


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# -- the comparison grid (ddl_gym.experiments.grid) -----------------------------
def plot_compare(cells: list[dict[str, Any]], summary: pd.DataFrame, out: Path) -> list[Path]:
    """Per workload: a JCT CDF per congestion level and bars of makespan, mean
    JCT and communication overhead; returns the files written."""
    written = []
    # one distinct colour per policy (there are more policies than tab10 has)
    names = list(dict.fromkeys(summary["policy"]))
    palette = plt.get_cmap("tab20")
    colour = {p: palette(i % 20) for i, p in enumerate(names)}
    for w in summary["workload"].unique():
        congestions = list(summary.loc[summary["workload"] == w, "congestion"].unique())
        policies = list(summary.loc[summary["workload"] == w, "policy"].unique())
        fig, axes = plt.subplots(
            1, len(congestions), figsize=(5 * len(congestions), 4), squeeze=False
        )
        for ax, c in zip(axes[0], congestions, strict=True):
            for p in policies:
                jct = [
                    x["jct_s"]
                    for x in cells
                    if (x["workload"], x["congestion"], x["policy"]) == (w, c, p)
                ]
                if not jct:
                    continue
                v = np.sort(np.concatenate(jct)) / 3600.0
                ax.plot(v, np.arange(1, len(v) + 1) / len(v), label=p, color=colour[p])
            ax.set_xscale("log")
            ax.set_xlabel("JCT (h)")
            ax.set_title(f"{w}, congestion {c}")
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("CDF")
        axes[0][-1].legend(fontsize=7)
        fig.tight_layout()
        path = out / f"jct_cdf_{w}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)

        s = summary[summary["workload"] == w]
        fig, axes = plt.subplots(1, 3, figsize=(16, 4))
        width = 0.8 / max(1, len(policies))
        x = np.arange(len(congestions))
        for ax, (m, label, scale) in zip(
            axes,
            (
                ("makespan_s", "makespan (h)", 1 / 3600),
                ("mean_jct_s", "mean JCT (h)", 1 / 3600),
                ("comm_overhead", "comm overhead (comm/compute)", 1.0),
            ),
            strict=True,
        ):
            for k, p in enumerate(policies):
                vals = [
                    float(s[(s["policy"] == p) & (s["congestion"] == c)][m].mean()) * scale
                    for c in congestions
                ]
                ax.bar(x + k * width, vals, width, label=p, color=colour[p])
            ax.set_xticks(x + width * (len(policies) - 1) / 2, congestions)
            ax.set_ylabel(label)
            ax.set_title(f"{w}: {label}")
        axes[-1].legend(fontsize=7)
        fig.tight_layout()
        path = out / f"bars_{w}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
