"""Synthetic job traces calibrated to the real Philly and Helios files.

Model: Poisson arrivals (exponential gaps, first job at t = 0), GPU demand
drawn from a categorical mix, wall-clock duration at that GPU count drawn
from a log-normal, model drawn from a categorical mix. As in the adapters,
the single-GPU work is ``duration * gpus`` (linear speed-up), ``iter_time_s``
is the model's catalogue reference time and ``iterations = work /
iter_time_s``. Every draw comes from ``numpy.random.default_rng(seed)`` in a
fixed order, so a seed fixes the trace.

Calibration constants below were computed from the files in the developers'
data set (``../shared/data/traces``); each comment says which file and how.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .schema import Trace, make_trace, reference_iter_time

__all__ = [
    "HELIOS_MODEL_MIX",
    "HELIOS_WEEK_DURATION_MEDIAN_S",
    "HELIOS_WEEK_DURATION_SIGMA",
    "HELIOS_WEEK_GPU_MIX",
    "PHILLY_ARRIVALS_PER_H",
    "PHILLY_DURATION_MEDIAN_S",
    "PHILLY_DURATION_SIGMA",
    "PHILLY_GPU_MIX",
    "default_trace",
    "synthetic_trace",
]

# Philly (Jeon et al., ATC'19), traces/philly/philly_2017-11-13_to_2017-11-19.csv
# (5,869 jobs): counts of num_gpus (README lists the same counts).
PHILLY_GPU_MIX: Mapping[int, float] = {1: 5463, 2: 102, 4: 116, 8: 166, 16: 17, 32: 5}
# Same file: 5,869 jobs / (last - first timestamp = 167.83 h).
PHILLY_ARRIVALS_PER_H: float = 34.97
# Same file: log-normal MLE of `duration`: exp(mean(log d)) = 408 s and
# std(log d) = 2.00 (the empirical median is 303 s, p90 9,910 s).
PHILLY_DURATION_MEDIAN_S: float = 408.0
PHILLY_DURATION_SIGMA: float = 2.00

# Helios / SenseTime (Hu et al., SC'21) as relabelled by the seed paper:
# traces/dally/sense_500jobs_poisson_1proc-week.json (411 multi-GPU jobs):
# counts of max_parallelism.
HELIOS_WEEK_GPU_MIX: Mapping[int, float] = {
    2: 41,
    3: 1,
    4: 96,
    8: 190,
    16: 56,
    32: 23,
    40: 2,
    48: 1,
    56: 1,
}
# Same file: `duration` median 70,623 s; log-normal sigma from the
# interquartile range of log(duration): (q75 - q25) / 1.349 = 0.91.
HELIOS_WEEK_DURATION_MEDIAN_S: float = 70623.0
HELIOS_WEEK_DURATION_SIGMA: float = 0.91
# traces/dally/sense_500jobs_poisson-25jobsPday.json (500 jobs, 1-56 GPUs; the
# four load-sweep files share the job set): counts of `model`, mapped to
# canonical names (MobileNetV3 125, BERT 125, ResNet50 125, AlexNet 53,
# ResNet18 38, VGG 34).
HELIOS_MODEL_MIX: Mapping[str, float] = {
    "mobilenet_v3": 125,
    "bert_large": 125,
    "resnet50": 125,
    "alexnet": 53,
    "resnet18": 38,
    "vgg11": 34,
}


def _normalise(mix: Mapping, what: str) -> tuple[list, np.ndarray]:
    keys = list(mix)
    p = np.array([float(mix[k]) for k in keys])
    if not keys or (p < 0).any() or p.sum() <= 0:
        raise ValueError(f"{what} needs non-negative weights with a positive sum")
    return keys, p / p.sum()


def synthetic_trace(
    n_jobs: int = 1000,
    seed: int = 0,
    arrival_rate_per_h: float = PHILLY_ARRIVALS_PER_H,
    gpu_mix: Mapping[int, float] = PHILLY_GPU_MIX,
    duration_median_s: float = PHILLY_DURATION_MEDIAN_S,
    duration_sigma: float = PHILLY_DURATION_SIGMA,
    model_mix: Mapping[str, float] = HELIOS_MODEL_MIX,
    max_gpus: int | None = None,
    max_duration_s: float | None = None,
    name: str = "synthetic",
) -> Trace:
    """A seeded synthetic trace (defaults: Philly arrivals, sizes, durations;
    Helios model mix).

    ``gpu_mix`` and ``model_mix`` are weights (normalised here). ``max_gpus``
    drops larger sizes from the mix and renormalises; ``max_duration_s`` caps
    the log-normal tail.
    """
    if n_jobs < 0:
        raise ValueError(f"n_jobs must be >= 0, got {n_jobs}")
    if not arrival_rate_per_h > 0:
        raise ValueError("arrival_rate_per_h must be > 0")
    if max_gpus is not None:
        gpu_mix = {g: w for g, w in gpu_mix.items() if g <= max_gpus}
    sizes, p_size = _normalise(gpu_mix, "gpu_mix")
    models, p_model = _normalise(model_mix, "model_mix")

    rng = np.random.default_rng(seed)
    gaps = rng.exponential(3600.0 / arrival_rate_per_h, size=n_jobs)
    if n_jobs:
        gaps[0] = 0.0  # the trace starts with a job
    arrival = np.cumsum(gaps)
    gpus = np.asarray(sizes, dtype=np.int64)[rng.choice(len(sizes), size=n_jobs, p=p_size)]
    duration = duration_median_s * np.exp(duration_sigma * rng.standard_normal(n_jobs))
    if max_duration_s is not None:
        duration = np.minimum(duration, max_duration_s)
    model = np.asarray(models, dtype=object)[rng.choice(len(models), size=n_jobs, p=p_model)]

    ref = {m: reference_iter_time(m) for m in models}
    iter_time = np.array([ref[m] for m in model], dtype="float64")
    df = pd.DataFrame(
        {
            "job_id": [f"{name}-{i:05d}" for i in range(n_jobs)],
            "arrival_s": arrival,
            "gpus": gpus,
            "model": model,
            "iterations": duration * gpus / iter_time,
            "iter_time_s": iter_time,
            "duration_s": duration,
        }
    )
    return make_trace(name, df, None)


# The bundled default: Helios-week GPU sizes (all multi-GPU, sizes > 32
# dropped so every job fits 64 GPUs), the Helios-week duration shape (sigma
# 0.91) and the Helios model mix. The median compute time at the job's GPU
# count is scaled from Helios's 19.6 h down to 6 min, because the catalogue's
# seed models (e.g. mobilenet_v3, bert_large) are strongly communication-bound
# and multiply wall time several-fold once spread over servers. Measured when
# written: FIFO (baselines.fifo) on the 64-GPU "seed64" cluster finishes
# seeds 0-9 in 3.4-12 simulated days (median 3.9), in ~0.01 s of CPU each;
# arrivals span ~3.5 days at 3.5 jobs/h.
DEFAULT_N_JOBS = 300
DEFAULT_ARRIVALS_PER_H = 3.5
DEFAULT_DURATION_MEDIAN_S = 360.0
DEFAULT_MAX_GPUS = 32


def default_trace(seed: int = 0) -> Trace:
    """The bundled default workload (see the constants above)."""
    return synthetic_trace(
        n_jobs=DEFAULT_N_JOBS,
        seed=seed,
        arrival_rate_per_h=DEFAULT_ARRIVALS_PER_H,
        gpu_mix=HELIOS_WEEK_GPU_MIX,
        duration_median_s=DEFAULT_DURATION_MEDIAN_S,
        duration_sigma=HELIOS_WEEK_DURATION_SIGMA,
        model_mix=HELIOS_MODEL_MIX,
        max_gpus=DEFAULT_MAX_GPUS,
        name="default",
    )
