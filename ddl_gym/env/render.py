"""Pictures of the cluster for ``ClusterEnv.render()``, with numpy only (no
matplotlib in the core package).

``rgb_frame`` draws one row of GPU cells per server, servers grouped by rack
(a dark gap between racks); a busy GPU has its job's colour (a fixed palette
indexed by the job's index, so a job keeps its colour from frame to frame),
a free one is dark grey. A bar along the top shows the fraction of GPUs in
use (green) and, below it, the queue's share of the cluster in GPUs asked
(orange, capped at the width). ``ansi_text`` is the same state in words.
"""

from __future__ import annotations

import numpy as np

from ddl_gym.engine import Engine

CELL = 10  # pixels per GPU cell, border included
BAR = 6  # height of each status bar
FREE = (60, 60, 60)
BACKGROUND = (20, 20, 20)
USED = (80, 200, 120)
QUEUE = (240, 160, 60)

# 20 well-separated colours (hand-picked hues at two brightness levels)
PALETTE = np.array(
    [
        (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
        (140, 86, 75), (227, 119, 194), (188, 189, 34), (23, 190, 207), (174, 199, 232),
        (255, 187, 120), (152, 223, 138), (255, 152, 150), (197, 176, 213), (196, 156, 148),
        (247, 182, 210), (219, 219, 141), (158, 218, 229), (250, 250, 110), (120, 120, 240),
    ],
    dtype=np.uint8,
)  # fmt: skip


def occupancy(engine: Engine) -> np.ndarray:
    """``(servers, gpus_per_server)`` int array: the index of the job on each
    GPU, -1 where free (a job's GPUs on a server are drawn left to right)."""
    c = engine.cluster
    grid = np.full((c.num_servers, c.gpus_per_server), -1, dtype=np.int64)
    fill = np.zeros(c.num_servers, dtype=np.int64)
    for index, job in engine.running.items():
        for server, gpus in job.placement:
            start = fill[server]
            grid[server, start : start + gpus] = index
            fill[server] += gpus
    return grid


def rgb_frame(engine: Engine) -> np.ndarray:
    """An ``(H, W, 3)`` uint8 picture of the cluster now."""
    c = engine.cluster
    grid = occupancy(engine)
    servers_per_rack = c.num_servers // c.racks
    gap = CELL // 2
    width = c.gpus_per_server * CELL + 2
    height = 2 * BAR + 2 + c.num_servers * CELL + (c.racks - 1) * gap
    img = np.empty((height, width, 3), dtype=np.uint8)
    img[:] = BACKGROUND
    used = 1.0 - engine.total_free / c.num_gpus
    asked = sum(j.gpus for j in engine.pending) / c.num_gpus
    img[1:BAR, 1 : 1 + round(used * (width - 2))] = USED
    img[BAR + 1 : 2 * BAR, 1 : 1 + round(min(asked, 1.0) * (width - 2))] = QUEUE
    colours = np.where(
        grid[..., None] >= 0,
        PALETTE[np.maximum(grid, 0) % len(PALETTE)],
        np.array(FREE, dtype=np.uint8),
    )
    top = 2 * BAR + 2
    for s in range(c.num_servers):
        y = top + s * CELL + (s // servers_per_rack) * gap
        for g in range(c.gpus_per_server):
            x = 1 + g * CELL
            img[y + 1 : y + CELL - 1, x + 1 : x + CELL - 1] = colours[s, g]
    return img


def ansi_text(engine: Engine) -> str:
    """The state in words plus one line per server (``#`` busy, ``.`` free)."""
    c = engine.cluster
    grid = occupancy(engine)
    servers_per_rack = c.num_servers // c.racks
    lines = [
        f"t={engine.now:.1f}s used={c.num_gpus - engine.total_free}/{c.num_gpus} GPUs "
        f"pending={len(engine.pending)} running={len(engine.running)} "
        f"done={engine.n_done}/{len(engine.jobs)}"
    ]
    for s in range(c.num_servers):
        cells = "".join("#" if j >= 0 else "." for j in grid[s])
        lines.append(f"rack {s // servers_per_rack} server {s:>3} {cells}")
    return "\n".join(lines)
