"""Adapter for the Philly per-job summary CSV (Pollux's ``philly.csv`` cut).

Columns: timestamp, duration, num_gpus, gpu_time, cluster. The file has no
job id, user or model:

* ``job_id`` is ``philly-<row>`` (the 1-based data row in the file);
* ``arrival_s`` is seconds since the earliest ``timestamp`` in the file;
* ``vc`` is ``cluster`` (hashed virtual-cluster id);
* ``model`` is assigned by :func:`~ddl_gym.traces.transform.assign_models`
  (seeded, rule ``"gpu_time"``);
* ``iter_time_s`` is the model's reference single-GPU iteration time from the
  catalogue and ``iterations = duration * num_gpus / iter_time_s``. We assume
  the recorded duration ran at linear speed-up, i.e. the job's single-GPU work
  is its GPU time ``duration * num_gpus``.

Zero durations: the 2017-11-13 week file has none (shortest is 2 s), but the
full Philly summary may. A zero-length job has no work to simulate, so by
default it is an error naming the row; ``zero_duration="skip"`` drops such
rows with a TraceWarning giving the count (``Trace.dropped["zero_duration"]``).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from ._io import read_csv_raw
from .schema import (
    Trace,
    TraceError,
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

__all__ = ["load_philly"]

REQUIRED = ("timestamp", "duration", "num_gpus")

# A trailing UTC offset ("Z", "+01:00", "-0500") after a clock time.
_ZONED = re.compile(r"\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?\s*(Z|[+-]\d{2}(:?\d{2})?)$", re.IGNORECASE)


def parse_timestamps(stamps: np.ndarray, src: str, rows: np.ndarray) -> pd.Series:
    """ISO-8601 timestamps as a datetime Series (NaT where unparseable).

    Times are either all local (no offset: the week file's case) or all
    zoned, possibly with different offsets, which are compared in UTC. A mix
    of zoned and local times has no defined order, so it is an error naming
    the first row that differs from row 1.
    """
    zoned = np.array([bool(_ZONED.search(str(s))) for s in stamps], dtype=bool)
    if zoned.any() and not zoned.all():
        other = [
            f"timestamp {s!r} {'has a' if z else 'has no'} UTC offset but row {int(rows[0])}'s "
            f"{'has none' if z else 'has one'}: give a time zone on every row or on none"
            for s, z in zip(stamps, zoned, strict=True)
        ]
        raise_at(src, rows, zoned != zoned[0], "timestamp", other)
    try:
        series = pd.Series(stamps, dtype=object)
        return pd.to_datetime(series, format="ISO8601", errors="coerce", utc=bool(zoned.any()))
    except (ValueError, OverflowError) as exc:  # pandas' own wording is no help to users
        raise TraceError(f"{src}: field 'timestamp': cannot parse the timestamps ({exc})") from None


def load_philly(
    path: str | Path,
    seed: int = 0,
    zero_duration: Literal["error", "skip"] = "error",
    model_rule: str = "gpu_time",
) -> Trace:
    src = str(path)
    raw, rows = read_csv_raw(path)
    require_columns(list(raw.columns), REQUIRED, src)

    stamps = parse_text(raw["timestamp"], source=src, rows=rows, field_name="timestamp")
    when = parse_timestamps(stamps, src, rows)
    raise_at(
        src,
        rows,
        when.isna().to_numpy(),
        "timestamp",
        lambda i: f"unparseable timestamp {stamps[i]!r}",
    )
    duration = parse_numeric(raw["duration"], source=src, rows=rows, field_name="duration")
    gpus = parse_gpus(raw["num_gpus"], source=src, rows=rows, field_name="num_gpus")
    zero = duration == 0
    if zero_duration == "error":
        raise_at(
            src,
            rows,
            zero,
            "duration",
            "zero duration (no work to simulate; pass zero_duration='skip' to drop)",
        )
    elif zero_duration != "skip":
        raise ValueError(f"zero_duration must be 'error' or 'skip', got {zero_duration!r}")
    dropped: dict[str, int] = {}
    if zero.any():
        dropped["zero_duration"] = int(zero.sum())
        warnings.warn(
            f"{src}: skipped {int(zero.sum())} of {len(raw)} rows with duration 0 "
            f"(first at row {int(rows[zero][0])}, field 'duration')",
            TraceWarning,
            stacklevel=2,
        )

    secs = (when - when.min()).dt.total_seconds().to_numpy(dtype="float64")
    df = pd.DataFrame(
        {
            "job_id": [f"philly-{r}" for r in rows],
            "arrival_s": secs,
            "gpus": gpus,
            "duration_s": duration,
        }
    )
    if "cluster" in raw.columns:
        df["vc"] = parse_text(
            raw["cluster"], source=src, rows=rows, field_name="cluster", allow_empty=True
        )
    keep = ~zero
    df = df.loc[keep].reset_index(drop=True)
    rows = rows[keep]
    # Model draws happen on the kept rows only, so they depend on the seed and
    # the kept jobs, not on how many zero-length rows were dropped before.
    df = assign_models(df, seed, rule=model_rule)
    ref = {m: reference_iter_time(m) for m in set(df["model"])}
    df["iter_time_s"] = df["model"].map(ref).astype("float64")
    df["iterations"] = df["duration_s"] * df["gpus"] / df["iter_time_s"]
    fields = {"arrival_s": "timestamp", "gpus": "num_gpus", "duration_s": "duration"}
    return make_trace(Path(path).stem, df, src, rows, fields, dropped)
