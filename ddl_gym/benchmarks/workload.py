"""A benchmark workload: which jobs, cut and scaled how (plain data -> ``Trace``).

A :class:`Workload` names a trace file under the data dir (or the synthetic
generator), the fraction of its arrival span it keeps (``part``, for
time-split train/validation/test), an arrival-rate factor
(``arrival_scale``, :func:`ddl_gym.traces.scale_load`) and, for the
generator, its arguments and a seed offset (so test seeds never equal train
seeds). ``build(seed)`` returns the trace; the seed drives generation and
the model assignment of traces without models.

``catalogue_iter_time``: keep each job's single-GPU work but use the model
catalogue's reference iteration time. The Tiresias example trace gives
seconds-long iterations (e.g. 8.8 s for VGG-11), which hide every all-reduce
behind compute; with the catalogue's times its jobs communicate as their
models do.

``resample`` (ddl-gym-v3): every seed is a distinct draw of the case. The
jobs' bodies (GPUs, model, iterations, iteration time and the optional
columns) are drawn with replacement from the case's source part (a
bootstrap of its empirical job distribution), with a numpy Generator seeded
from the workload seed; the arrival times are the source's. Arrivals are
kept because a trace's arrival process (diurnal waves, submission bursts)
is the part a bootstrap of gaps would destroy, while the bodies are where
the heavy tails live: a seed that draws two more 100-GPU-hour jobs is a
different week for a scheduler. The pairing of a burst with its bodies
(one user submitting many alike jobs) is lost: seeds differ in that, too.
Seed 0 is a draw like any other (never the source itself).

``iter_times`` (ddl-gym-v3): per-model iteration times that replace the
catalogue's for the listed models, each job keeping its single-GPU work (as
``catalogue_iter_time`` does). The seed's six profiles (ResNet-18/50,
AlexNet, VGG-11, MobileNetV3, BERT-large) are the seed authors' scaled times
(0.06 ms to 12 ms an iteration), which no measured fabric turns into the
slowdowns its table shows; a case names measured or estimated times for its
hardware instead.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ddl_gym.traces import (
    Trace,
    TraceWarning,
    find_data_dir,
    load_trace,
    scale_load,
    shift_to_zero,
    synthetic_trace,
    window,
)

SYNTHETIC = "synthetic"


class DataMissingError(FileNotFoundError):
    """A benchmark trace file is not under the data dir."""


@dataclass(frozen=True)
class Workload:
    """Jobs of one benchmark case.

    Attributes:
        source: a path relative to the data dir, or ``"synthetic"``.
        part: ``(lo, hi)`` fractions of the arrival span kept (``hi == 1``
            keeps the last job); arrivals are shifted to start at 0.
        arrival_scale: arrival-rate factor (> 1: more jobs per hour).
        synthetic: ``synthetic_trace`` arguments as sorted ``(key, value)``
            pairs (``gpu_mix`` / ``model_mix`` as sorted pairs too).
        seed_offset: the workload seed is ``seed_offset + seed``.
        catalogue_iter_time: use the catalogue's iteration times (see above).
        head: keep only the first ``head`` jobs of the part (quick cases).
        resample: draw the jobs' bodies per seed (see the module docstring).
        iter_times: ``(model, seconds)`` pairs, sorted (see the module
            docstring); left out of a definition when empty, as ``resample``.
            Left out of a case's definition when False, so the suites
            designed before it keep their hash.
    """

    source: str
    part: tuple[float, float] = (0.0, 1.0)
    arrival_scale: float = 1.0
    synthetic: tuple[tuple[str, Any], ...] = ()
    seed_offset: int = 0
    catalogue_iter_time: bool = False
    head: int | None = None
    resample: bool = False
    iter_times: tuple[tuple[str, float], ...] = ()

    def build(self, seed: int = 0) -> Trace:
        wseed = self.seed_offset + seed
        if self.source == SYNTHETIC:
            trace = synthetic_trace(seed=wseed, **_unfreeze(self.synthetic))
        else:
            trace = _load(self.source, wseed)
        trace = shift_to_zero(time_part(trace, *self.part))
        if self.head is not None:
            jobs = trace.jobs.iloc[: self.head].reset_index(drop=True)
            trace = Trace(trace.name, jobs, trace.source)
        if self.resample:
            trace = resample_bodies(trace, wseed)
        if self.catalogue_iter_time:
            trace = with_catalogue_iter_time(trace)
        if self.iter_times:
            trace = with_iter_times(trace, dict(self.iter_times))
        if self.arrival_scale != 1.0:
            trace = scale_load(trace, self.arrival_scale)
        return trace


# Mixed into the resampling Generator's seed so that its draws are not the
# stream a loader seeded with the same workload seed uses (Philly's models).
_RESAMPLE_STREAM = 0x5EED_B0D7


def resample_bodies(trace: Trace, seed: int) -> Trace:
    """The trace's arrival times, each with a job body drawn with replacement
    from the trace's jobs (``numpy.random.default_rng([seed, stream])``).
    A slot's job id is ``<body's id>~<slot>``: unique, and it names the
    source job the body came from."""
    src = trace.jobs.sort_values("arrival_s", kind="stable").reset_index(drop=True)
    n = len(src)
    if n == 0:
        return trace
    rng = np.random.default_rng([seed, _RESAMPLE_STREAM])
    pick = rng.integers(0, n, size=n)
    jobs = src.iloc[pick].reset_index(drop=True)
    jobs["arrival_s"] = src["arrival_s"].to_numpy()
    jobs["job_id"] = [f"{body}~{slot}" for slot, body in enumerate(jobs["job_id"].astype(str))]
    return Trace(trace.name, jobs, trace.source)


def freeze(mapping: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Generator arguments as hashable, sorted pairs (nested mappings too)."""
    out = []
    for key in sorted(mapping):
        value = mapping[key]
        if isinstance(value, Mapping):
            value = tuple(sorted(value.items()))
        out.append((key, value))
    return tuple(out)


def _unfreeze(pairs: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        out[key] = dict(value) if key.endswith("_mix") else value
    return out


def time_part(trace: Trace, lo: float, hi: float) -> Trace:
    """The jobs from the ``lo`` to the ``hi`` fraction of the trace, counted in
    jobs in arrival order (not in time: Philly's Monday and Alibaba's last
    days hold most jobs), as an arrival-time window: consecutive parts never
    share a job and follow each other in time."""
    if (lo, hi) == (0.0, 1.0):
        return trace
    a = np.sort(trace.jobs["arrival_s"].to_numpy())
    n = len(a)
    i, j = round(lo * n), round(hi * n)
    start = float(a[i]) if lo > 0 else float(a[0])
    end = float(a[j]) if j < n else float(a[-1]) + 1.0
    return window(trace, start, end)


def with_catalogue_iter_time(trace: Trace) -> Trace:
    """Same single-GPU work per job, at the catalogue's iteration time."""
    from ddl_gym.traces.schema import reference_iter_time

    jobs = trace.jobs.copy()
    ref = np.array([reference_iter_time(m) for m in jobs["model"]], dtype="float64")
    work = jobs["iterations"].to_numpy(dtype="float64") * jobs["iter_time_s"].to_numpy()
    jobs["iter_time_s"] = ref
    jobs["iterations"] = work / ref
    return Trace(trace.name, jobs, trace.source)


def with_iter_times(trace: Trace, times: Mapping[str, float]) -> Trace:
    """Same single-GPU work per job; the models in ``times`` run at those
    iteration times (seconds), the others as they were."""
    jobs = trace.jobs.copy()
    new = jobs["model"].map(times)
    hit = new.notna().to_numpy()
    if hit.any():
        old = jobs["iter_time_s"].to_numpy(dtype="float64")
        ref = np.where(hit, new.to_numpy(dtype="float64", na_value=np.nan), old)
        work = jobs["iterations"].to_numpy(dtype="float64") * old
        jobs["iter_time_s"] = ref
        jobs["iterations"] = work / ref
    return Trace(trace.name, jobs, trace.source)


def offered_load(trace: Trace, num_gpus: int) -> float:
    """Single-GPU work over (arrival span x GPUs): the load the jobs offer
    before any communication slowdown."""
    jobs = trace.jobs
    a = jobs["arrival_s"].to_numpy()
    span = float(a.max() - a.min()) if len(a) > 1 else 0.0
    work = float((jobs["iterations"] * jobs["iter_time_s"]).sum())
    return work / (span * num_gpus) if span > 0 else float("inf")


def data_path(source: str, suite: str | None = None) -> Path:
    """The file of ``source`` under the data dir; a missing one raises
    :class:`DataMissingError` naming the command that fetches it (for
    ``suite`` when the caller knows it)."""
    data = find_data_dir()
    if data is None or not (data / source).is_file():
        from ddl_gym.data import fetch_command

        where = f"under {data}" if data is not None else "(no data dir found)"
        raise DataMissingError(
            f"benchmark trace {source!r} not found {where}; fetch it with "
            f"`{fetch_command(suite)}` (see docs/data.md)"
        )
    return data / source


@lru_cache(maxsize=128)  # v3: 5 seeds of a file read by several cases
def _load_cached(path: str, seed: int) -> Trace:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)  # the seed's JSON is unsorted
        return load_trace(path, seed=seed)


def _load(source: str, seed: int) -> Trace:
    trace = _load_cached(str(data_path(source)), seed)
    # callers get their own frame: the cached one is never handed out
    return Trace(trace.name, trace.jobs.copy(), trace.source)


def busy_load(trace: Trace, num_gpus: int) -> float:
    """The share of the GPUs the jobs would keep busy during the arrival span
    if each started on arrival at its ideal speed: work past the last
    arrival is not counted. With heavy-tailed durations (Philly, Alibaba)
    a few jobs hold most of the work but run long after the span, so this,
    not :func:`offered_load`, tells whether queues form while jobs arrive."""
    jobs = trace.jobs
    a = jobs["arrival_s"].to_numpy(dtype="float64")
    if len(a) < 2:
        return 0.0
    start, end = float(a.min()), float(a.max())
    gpus = jobs["gpus"].to_numpy(dtype="float64")
    run = jobs["iterations"].to_numpy() * jobs["iter_time_s"].to_numpy() / gpus
    inside = np.minimum(run, end - a)
    return float((inside * gpus).sum() / ((end - start) * num_gpus))


def arrival_scale_for(
    workload: Workload, num_gpus: int, target: float, seed: int = 0, digits: int = 3
) -> float:
    """The arrival-rate factor that brings ``workload`` (seed ``seed``) to a
    :func:`busy_load` of ``target`` on ``num_gpus`` GPUs, rounded to
    ``digits`` significant digits. Used when a suite is designed; suites
    store the number it returns, never call this at run time."""
    import dataclasses
    import math

    base = dataclasses.replace(workload, arrival_scale=1.0)

    def load(k: float) -> float:
        return busy_load(dataclasses.replace(base, arrival_scale=k).build(seed), num_gpus)

    lo, hi = 1e-3, 1e3
    for _ in range(60):  # busy_load grows with k: bisect in log space
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if load(mid) < target else (lo, mid)
    k = math.sqrt(lo * hi)
    return float(f"{k:.{digits}g}")
