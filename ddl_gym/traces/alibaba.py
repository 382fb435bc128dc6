"""Adapter for the Alibaba GPU-cluster pod list (cluster-trace-gpu-v2023, openb).

Columns used: name, num_gpu, gpu_milli, creation_time, scheduled_time,
deletion_time (seconds from trace start). Decisions:

* CPU-only pods (``num_gpu == 0``) are not GPU jobs: skipped.
* Never-scheduled pods (``scheduled_time`` empty; all are ``Pending`` in the
  file) have no run time: skipped by default (``unscheduled="skip"``), or an
  error with ``unscheduled="error"``.
* Fractional-GPU pods (1 GPU with ``gpu_milli < 1000``, i.e. GPU sharing): the
  simulator allocates whole GPUs, so by default they are skipped
  (``fractional="skip"``); ``fractional="round_up"`` keeps them as 1-GPU jobs.
* Every skip is counted in ``Trace.dropped`` and reported by one TraceWarning.
  Each pod is counted under the first reason that applies, in the order
  cpu_only, never_scheduled, fractional_gpu, zero_duration (in the openb cut:
  600, 332, 1,273 and 0 of 4,008 rows; 1,803 pods kept).
* ``arrival_s = creation_time``; ``duration_s = deletion_time -
  scheduled_time``. Pods still running at the end of the trace have their
  deletion time at the trace end, so their durations are truncated there.
  ``Failed`` pods are kept: they held their GPUs until deleted.
* No model in the file: seeded :func:`assign_models` (rule ``"gpu_time"``);
  ``iter_time_s`` is the model's catalogue reference time and
  ``iterations = duration * num_gpu / iter_time_s`` (linear speed-up).
* A kept pod with zero run time is an error (``zero_duration="skip"`` drops).
* GPU types: where the file has ``gpu_spec`` (the GPU models a pod accepts,
  openb spellings joined by ``|``; empty or ``nan``: any) and some kept pod
  names a model, the trace gets the schema's ``gpu_types`` column (catalogue
  names, sorted, ``|``-joined; ``''`` for any): a typed cluster runs each pod
  only on the types it accepts. A list where no kept pod names one (the
  default list and its dev cut) gets no column, so its trace is unchanged.
  ``gpu_types=True`` always adds the column, ``False`` never. An unknown
  model is an error naming file, row and ``gpu_spec``.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from ._io import read_csv_raw
from .openb_types import parse_gpu_spec
from .schema import (
    Trace,
    TraceWarning,
    make_trace,
    parse_gpus,
    parse_numeric,
    parse_text,
    raise_at,
    reference_iter_time,
    require_columns,
)
from .transform import assign_models

__all__ = ["load_alibaba"]

REQUIRED = ("name", "num_gpu", "gpu_milli", "creation_time", "scheduled_time", "deletion_time")

_REASONS = {
    "cpu_only": "CPU-only (num_gpu == 0)",
    "never_scheduled": "never scheduled (scheduled_time empty)",
    "fractional_gpu": "fractional GPU share (gpu_milli < 1000)",
    "zero_duration": "zero run time (deletion_time == scheduled_time)",
}


def load_alibaba(
    path: str | Path,
    seed: int = 0,
    fractional: Literal["skip", "round_up"] = "skip",
    unscheduled: Literal["skip", "error"] = "skip",
    zero_duration: Literal["error", "skip"] = "error",
    model_rule: str = "gpu_time",
    gpu_types: bool | None = None,
) -> Trace:
    if fractional not in ("skip", "round_up"):
        raise ValueError(f"fractional must be 'skip' or 'round_up', got {fractional!r}")
    if unscheduled not in ("skip", "error"):
        raise ValueError(f"unscheduled must be 'skip' or 'error', got {unscheduled!r}")
    if zero_duration not in ("skip", "error"):
        raise ValueError(f"zero_duration must be 'skip' or 'error', got {zero_duration!r}")
    src = str(path)
    raw, rows = read_csv_raw(path)
    require_columns(list(raw.columns), REQUIRED, src)

    def num(col: str, **kw: Any) -> np.ndarray:
        return parse_numeric(raw[col], source=src, rows=rows, field_name=col, **kw)

    names = parse_text(raw["name"], source=src, rows=rows, field_name="name")
    gpus = parse_gpus(raw["num_gpu"], source=src, rows=rows, field_name="num_gpu", positive=False)
    milli = num("gpu_milli")
    created = num("creation_time")
    sched = num("scheduled_time", allow_empty=True)
    deleted = num("deletion_time")

    has_gpu = gpus >= 1
    raise_at(
        src,
        rows,
        has_gpu & ((milli <= 0) | (milli > 1000)),
        "gpu_milli",
        lambda i: f"GPU share {milli[i]:g} out of range (0, 1000] for a GPU pod",
    )
    raise_at(
        src,
        rows,
        (gpus > 1) & (milli < 1000),
        "gpu_milli",
        lambda i: f"fractional share {milli[i]:g} on a multi-GPU pod",
    )
    never = np.isnan(sched)
    if unscheduled == "error":
        raise_at(
            src,
            rows,
            has_gpu & never,
            "scheduled_time",
            "pod was never scheduled (pass unscheduled='skip' to drop such pods)",
        )
    run = deleted - sched
    ok_sched = has_gpu & ~never
    raise_at(
        src,
        rows,
        ok_sched & (run < 0),
        "deletion_time",
        lambda i: f"deletion_time before scheduled_time (run time {run[i]:g} s)",
    )
    frac = has_gpu & ~never & (milli < 1000)
    skip_frac = frac if fractional == "skip" else np.zeros_like(frac)
    zero = ok_sched & ~skip_frac & (run == 0)
    if zero_duration == "error":
        raise_at(
            src,
            rows,
            zero,
            "deletion_time",
            "zero run time (deletion_time == scheduled_time; pass zero_duration='skip' to drop)",
        )

    masks = {
        "cpu_only": ~has_gpu,
        "never_scheduled": has_gpu & never,
        "fractional_gpu": skip_frac,
        "zero_duration": zero,
    }
    dropped = {k: int(m.sum()) for k, m in masks.items() if m.any()}
    keep = ~np.logical_or.reduce(list(masks.values()))
    if dropped:
        parts = ", ".join(f"{n} {_REASONS[k]}" for k, n in dropped.items())
        warnings.warn(
            f"{src}: skipped {int((~keep).sum())} of {len(raw)} rows: {parts}; see Trace.dropped",
            TraceWarning,
            stacklevel=2,
        )

    df = pd.DataFrame(
        {
            "job_id": names[keep],
            "arrival_s": created[keep],
            "gpus": gpus[keep],
            "duration_s": run[keep],
        }
    )
    if "gpu_spec" in raw.columns and gpu_types is not False:
        specs = _accepted_types(raw["gpu_spec"], src, rows, keep)
        if gpu_types or any(specs):
            df["gpu_types"] = specs
    df = assign_models(df, seed, rule=model_rule)
    ref = {m: reference_iter_time(m) for m in set(df["model"])}
    df["iter_time_s"] = df["model"].map(ref).astype("float64")
    df["iterations"] = df["duration_s"] * df["gpus"] / df["iter_time_s"]
    fields = {"job_id": "name", "arrival_s": "creation_time", "gpus": "num_gpu"}
    if "gpu_types" in df.columns:
        fields["gpu_types"] = "gpu_spec"
    return make_trace(Path(path).stem, df, src, rows[keep], fields, dropped)


def _accepted_types(
    column: pd.Series, source: str, rows: np.ndarray, keep: np.ndarray
) -> list[str]:
    """The kept pods' ``gpu_spec`` cells as ``gpu_types`` cells (sorted
    catalogue names joined by ``|``; ``''`` for any type)."""
    out: list[str] = []
    seen: dict[str, str] = {}
    for text, row in zip(column.to_numpy()[keep], rows[keep], strict=True):
        cell = seen.get(text)
        if cell is None:
            cell = seen[text] = "|".join(sorted(parse_gpu_spec(str(text), source, int(row))))
        out.append(cell)
    return out
