"""Run a grid's cells: in this process, on a pool of processes or as Ray
tasks, with one progress bar, one JSON file per finished cell, Ctrl-C that
keeps what finished, and resuming a run folder from its finished cells.

A cell is ``fn(**kwargs)`` with plain-data ``kwargs``; ``fn`` returns a dict
of the cell's keys and metrics, optionally with a per-job table
(``"job_table"``: a DataFrame or a dict of columns) or the JCTs
(``"jct_s"``). Cells are pure functions of their arguments, so every backend,
and a resumed run, gives the same table.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

KEYS = ("policy", "workload", "congestion", "seed")
CellFn = Callable[..., dict[str, Any]]


@dataclass(frozen=True)
class Plan:
    """A cell function and its cells (keyword arguments), in table order."""

    fn: CellFn
    cells: list[dict[str, Any]]

    def __len__(self) -> int:
        return len(self.cells)


# -- one JSON per finished cell ---------------------------------------------------
def _plain(value: Any) -> Any:
    """JSON-ready: arrays and frames become lists / dicts of columns. NaN
    stays NaN (Python's json writes and reads it), so a resumed run's table is
    bit-identical to an uninterrupted one."""
    if isinstance(value, pd.DataFrame):
        return {c: _plain(value[c].to_numpy()) for c in value.columns}
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


class CellStore:
    """``<folder>/cells/NNNN.json``: a finished cell's arguments' keys and its
    result, written atomically as soon as it finishes."""

    def __init__(self, folder: Path) -> None:
        self.dir = Path(folder) / "cells"
        self.dir.mkdir(parents=True, exist_ok=True)

    def path(self, i: int) -> Path:
        return self.dir / f"{i:04d}.json"

    def save(self, i: int, cell: Mapping[str, Any], result: Mapping[str, Any]) -> None:
        data = {"cell": _plain(cell), "result": _plain(result)}
        tmp = self.path(i).with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(self.path(i))  # a Ctrl-C never leaves half a file

    def load(self, cells: Sequence[Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
        """The finished cells of this grid, by index. A file whose cell is not
        the grid's cell at that index (another grid's folder) is an error."""
        done: dict[int, dict[str, Any]] = {}
        for i, cell in enumerate(cells):
            p = self.path(i)
            if not p.is_file():
                continue
            data = json.loads(p.read_text())
            if data["cell"] != _plain(cell):
                raise ValueError(
                    f"{p}: holds cell {data['cell']}, but this grid's cell {i} is "
                    f"{_plain(cell)}; resume a run with the settings it was started with"
                )
            done[i] = data["result"]
        return done


# -- running ------------------------------------------------------------------------
@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold a Ctrl-C until the block is done, then raise it (so a cell is
    either saved and counted, or neither)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def _worker_init() -> None:
    # Ctrl-C reaches every process of the terminal's group; the parent alone
    # handles it (workers printing their own KeyboardInterrupt tracebacks is
    # the noise this avoids). Agents' torch: one thread per worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)


def _call(args: tuple[int, CellFn, dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    i, fn, kwargs = args
    return i, fn(**kwargs)


def progress_bar(total: int | None, desc: str, disable: bool, initial: int = 0, unit: str = "cell"):
    """The progress bar every long job uses: tqdm on stderr, with rate and ETA."""
    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=initial,
        desc=desc,
        unit=unit,
        disable=disable,
        file=sys.stderr,
        dynamic_ncols=True,
    )


def run_plan(
    plan: Plan,
    *,
    backend: str = "local",
    processes: int = 1,
    store: CellStore | None = None,
    done: dict[int, dict[str, Any]] | None = None,
    address: str | None = None,
    num_cpus: int | None = None,
    show_progress: bool = True,
    desc: str = "compare",
) -> tuple[dict[int, dict[str, Any]], bool]:
    """Run the cells of ``plan`` not in ``done``; returns every finished cell by
    index and whether all finished (False after a Ctrl-C, which is not raised:
    what finished is the caller's to report)."""
    done = dict(done or {})
    todo = [i for i in range(len(plan)) if i not in done]
    bar = progress_bar(len(plan), f"{desc} ({backend})", not show_progress, initial=len(done))

    def finished(i: int, result: dict[str, Any]) -> None:
        # what is kept is what a resumed run reads back: the same values
        plain = json.loads(json.dumps(_plain(result)))
        with deferred_interrupt():
            if store is not None:
                store.save(i, plan.cells[i], plain)
            done[i] = plain
            bar.update()

    try:
        if backend == "ray":
            from ddl_gym.experiments.ray_backend import run_cells

            run_cells(
                plan.fn,
                [plan.cells[i] for i in todo],
                address=address,
                num_cpus=num_cpus,
                on_result=lambda j, r: finished(todo[j], r),
            )
        elif processes <= 1 or len(todo) <= 1:
            for i in todo:
                finished(i, plan.fn(**plan.cells[i]))
        else:
            pool = get_context("spawn").Pool(min(processes, len(todo)), initializer=_worker_init)
            try:
                args = [(i, plan.fn, plan.cells[i]) for i in todo]
                for i, result in pool.imap_unordered(_call, args):
                    finished(i, result)
            finally:
                pool.terminate()
                pool.join()
    except KeyboardInterrupt:
        return done, False
    finally:
        bar.close()
    return done, True


def frames(done: Mapping[int, Mapping[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Summary (one row per cell, cell order) and per-job table of the
    finished cells."""
    rows, jobs = [], []
    for i in sorted(done):
        result = dict(done[i])
        job_table = result.pop("job_table", None)
        jct = result.pop("jct_s", None)
        if job_table is None and jct is not None:
            job_table = {"jct_s": list(jct)}
        rows.append(result)
        if job_table is not None:
            df = pd.DataFrame(job_table)
            for pos, key in enumerate(k for k in KEYS if k in result):
                df.insert(pos, key, result[key])
            jobs.append(df)
    summary = pd.DataFrame(rows)
    return summary, (pd.concat(jobs, ignore_index=True) if jobs else None)
