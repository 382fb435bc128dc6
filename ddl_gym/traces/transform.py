"""Trace transformations: seeded model assignment, windows, load scaling."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import pandas as pd

from .schema import Trace, TraceError, row_note

__all__ = [
    "GPU_TIME_BUCKETS_H",
    "GPU_TIME_MODEL_MIX",
    "assign_models",
    "check_fits",
    "head",
    "scale_load",
    "shift_to_zero",
    "window",
]

# Upper edges (GPU-hours) of the GPU-time buckets, the same edges Pollux's
# workload generator used on Philly (README, pollux_workloads): <1, <10, <100,
# and the rest.
GPU_TIME_BUCKETS_H: tuple[float, ...] = (1.0, 10.0, 100.0)

# Model mix per GPU-time bucket for rule="gpu_time". It extends Pollux's rule
# (small -> cifar10/ncf, medium -> deepspeech2/bert, large -> yolov3, huge ->
# imagenet) to the whole catalogue: short jobs get small, latency-bound models
# more often, long jobs get big, bandwidth-heavy ones. Each row sums to 1.
GPU_TIME_MODEL_MIX: tuple[Mapping[str, float], ...] = (
    {  # < 1 GPU-hour
        "resnet18": 0.20,
        "mobilenet_v3": 0.15,
        "ncf": 0.15,
        "alexnet": 0.10,
        "mobilenet_v2": 0.10,
        "lstm_lm": 0.10,
        "recommendation": 0.10,
        "a3c": 0.10,
    },
    {  # 1 .. 10 GPU-hours
        "resnet50": 0.20,
        "bert_base": 0.15,
        "deepspeech2": 0.15,
        "transformer": 0.15,
        "vgg11": 0.10,
        "googlenet": 0.10,
        "inception_v3": 0.10,
        "cyclegan": 0.05,
    },
    {  # 10 .. 100 GPU-hours
        "resnet101": 0.20,
        "yolov3": 0.20,
        "vgg16": 0.15,
        "inception_v4": 0.15,
        "bert_large": 0.15,
        "resnet50": 0.15,
    },
    {  # >= 100 GPU-hours
        "bert_large": 0.30,
        "resnet152": 0.20,
        "vgg19": 0.20,
        "resnet50": 0.15,
        "inception_v4": 0.15,
    },
)


def _pick(mix: Mapping[str, float], u: np.ndarray) -> np.ndarray:
    """Inverse-CDF pick from a categorical mix, for uniforms ``u`` in [0, 1)."""
    names = list(mix)
    cdf = np.cumsum([mix[n] for n in names])
    cdf /= cdf[-1]
    idx = np.minimum(np.searchsorted(cdf, u, side="right"), len(names) - 1)
    return np.array(names, dtype=object)[idx]


def assign_models(df: pd.DataFrame, seed: int, rule: str = "gpu_time") -> pd.DataFrame:
    """Return a copy of ``df`` with a seeded ``model`` column.

    Rules:

    * ``"gpu_time"``: bucket each job by GPU time (``gpu_time_s`` if present,
      else ``duration_s * gpus``) into <1, 1-10, 10-100, >=100 GPU-hours and
      draw its model from that bucket's row of :data:`GPU_TIME_MODEL_MIX`.
    * ``"uniform"``: uniform over the catalogue's ``ASSIGNABLE_MODELS`` (fixed:
      models added later, built in or registered, never change a trace).

    One uniform number is drawn per job from ``numpy.random.default_rng(seed)``
    whatever the bucket, so the result depends only on the seed and the frame.
    """
    rng = np.random.default_rng(seed)
    u = rng.random(len(df))
    out = df.copy()
    if rule == "uniform":
        from ddl_gym.profiles import ASSIGNABLE_MODELS

        names = ASSIGNABLE_MODELS
        out["model"] = _pick({n: 1.0 for n in names}, u)
        return out
    if rule != "gpu_time":
        raise ValueError(f"unknown model-assignment rule {rule!r}")
    if "gpu_time_s" in df.columns:
        gpu_time = df["gpu_time_s"].to_numpy(dtype="float64")
    elif {"duration_s", "gpus"} <= set(df.columns):
        gpu_time = df["duration_s"].to_numpy(dtype="float64") * df["gpus"].to_numpy(dtype="float64")
    else:
        raise ValueError("rule 'gpu_time' needs 'gpu_time_s' or 'duration_s' and 'gpus'")
    bucket = np.searchsorted(np.array(GPU_TIME_BUCKETS_H) * 3600.0, gpu_time, side="right")
    models = np.empty(len(df), dtype=object)
    for b, mix in enumerate(GPU_TIME_MODEL_MIX):
        sel = bucket == b
        models[sel] = _pick(mix, u[sel])
    out["model"] = models
    return out


# ---------------------------------------------------------------------------
# Time transformations. All return new Trace objects; inputs are not modified.


def _subset(trace: Trace, mask: np.ndarray, name: str) -> Trace:
    rows = trace.source_rows[mask] if trace.source_rows is not None else None
    jobs = trace.jobs.loc[mask].reset_index(drop=True)
    return dataclasses.replace(trace, name=name, jobs=jobs, source_rows=rows)


def shift_to_zero(trace: Trace) -> Trace:
    """Shift arrivals so the first job arrives at t = 0."""
    jobs = trace.jobs.copy()
    if len(jobs):
        jobs["arrival_s"] = jobs["arrival_s"] - jobs["arrival_s"].min()
    return dataclasses.replace(trace, jobs=jobs)


def window(trace: Trace, start_s: float, end_s: float) -> Trace:
    """Jobs arriving in ``[start_s, end_s)``, with ``start_s`` moved to t = 0."""
    if not end_s > start_s:
        raise ValueError(f"empty window [{start_s}, {end_s})")
    a = trace.jobs["arrival_s"].to_numpy()
    out = _subset(trace, (a >= start_s) & (a < end_s), f"{trace.name}[{start_s:g}:{end_s:g}]")
    out.jobs["arrival_s"] = out.jobs["arrival_s"] - float(start_s)
    return out


def scale_load(trace: Trace, k: float) -> Trace:
    """Multiply the arrival rate by ``k``: inter-arrival times are divided by k.

    The first job keeps its arrival time; job sizes are unchanged.
    """
    if not (k > 0 and np.isfinite(k)):
        raise ValueError(f"load factor must be a positive finite number, got {k!r}")
    jobs = trace.jobs.copy()
    if len(jobs):
        a0 = float(jobs["arrival_s"].iloc[0])
        jobs["arrival_s"] = a0 + (jobs["arrival_s"] - a0) / float(k)
    return dataclasses.replace(trace, name=f"{trace.name}*{k:g}", jobs=jobs)


def head(trace: Trace, n: int) -> Trace:
    """The first ``n`` jobs by arrival."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    mask = np.arange(len(trace.jobs)) < n
    return _subset(trace, mask, trace.name)


def check_fits(trace: Trace, total_gpus: int) -> None:
    """Raise TraceError if any job asks for more GPUs than the cluster has.

    The message names the trace's file, the job's source row and field 'gpus'.
    """
    g = trace.jobs["gpus"].to_numpy()
    bad = np.flatnonzero(g > total_gpus)
    if bad.size == 0:
        return
    i = int(bad[0])
    src = trace.source or trace.name
    note = f" ({row_note(src)})" if trace.source_rows is not None else ""
    more = f" (and {bad.size - 1} more job(s))" if bad.size > 1 else ""
    raise TraceError(
        f"{src}: {trace.row_label(i)}{note}, field 'gpus': job asks for {int(g[i])} "
        f"GPUs but the cluster has only {total_gpus}{more}"
    )
