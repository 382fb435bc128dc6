"""Adapter for the Pollux (OSDI'21 artifact) workload CSVs.

Columns: name, time, application, num_replicas, batch_size. The workloads
have no duration. Pollux's generator chose each job's application from its
Philly GPU-time bucket (<1 GPU-hour: cifar10 or ncf; <10: deepspeech2 or
bert; <100: yolov3; else imagenet), so the application tells the bucket, and
each job gets a representative single-GPU work from it:

* ``work="bucket_mean"`` (default): :data:`BUCKET_WORK_H`, the geometric mean
  GPU time of the Philly week file's jobs in that bucket;
* ``work="log_uniform"``: a seeded log-uniform draw between the bucket's
  5th and 95th percentile (:data:`BUCKET_RANGE_H`), deterministic per seed.

``iter_time_s`` is the catalogue reference time of the mapped model and
``iterations = work / iter_time_s``. ``batch_size`` is not part of the schema.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from ._io import read_csv_raw
from .schema import (
    Trace,
    make_trace,
    map_models,
    parse_gpus,
    parse_numeric,
    parse_text,
    raise_at,
    reference_iter_time,
    require_columns,
)

__all__ = ["BUCKET_RANGE_H", "BUCKET_WORK_H", "POLLUX_BUCKET", "POLLUX_MODELS", "load_pollux"]

POLLUX_MODELS: dict[str, str] = {
    "cifar10": "resnet18",  # Pollux trains ResNet18 on CIFAR-10
    "imagenet": "resnet50",
    "bert": "bert_base",
    "deepspeech2": "deepspeech2",
    "yolov3": "yolov3",
    "ncf": "ncf",
}

# Canonical model -> GPU-time bucket index (0: <1, 1: 1-10, 2: 10-100,
# 3: >=100 GPU-hours), after Pollux's generator (data README).
POLLUX_BUCKET: dict[str, int] = {
    "resnet18": 0,
    "ncf": 0,
    "deepspeech2": 1,
    "bert_base": 1,
    "yolov3": 2,
    "resnet50": 3,
}

# Representative single-GPU work per bucket, GPU-hours. Computed from
# traces/philly/philly_2017-11-13_to_2017-11-19.csv: exp(mean(log(gpu_time)))
# over the jobs whose gpu_time/3600 falls in the bucket (5061, 412, 307 and 89
# jobs respectively).
BUCKET_WORK_H: tuple[float, ...] = (0.0615, 3.30, 24.6, 281.0)
# 5th and 95th percentile of gpu_time/3600 within each bucket, same file.
BUCKET_RANGE_H: tuple[tuple[float, float], ...] = (
    (0.0119, 0.445),
    (1.17, 8.73),
    (10.2, 88.7),
    (105.0, 1020.0),
)

REQUIRED = ("name", "time", "application", "num_replicas")


def load_pollux(
    path: str | Path,
    seed: int = 0,
    work: Literal["bucket_mean", "log_uniform"] = "bucket_mean",
) -> Trace:
    src = str(path)
    raw, rows = read_csv_raw(path)
    require_columns(list(raw.columns), REQUIRED, src)
    models = map_models(
        parse_text(raw["application"], source=src, rows=rows, field_name="application"),
        POLLUX_MODELS,
        source=src,
        rows=rows,
        field_name="application",
    )
    # A canonical name outside Pollux's six has no bucket: use the table's
    # error path by checking membership explicitly.
    bucket = np.array([POLLUX_BUCKET.get(m, -1) for m in models], dtype=np.int64)
    raise_at(
        src,
        rows,
        bucket < 0,
        "application",
        lambda i: f"model {models[i]!r} has no Pollux GPU-time bucket",
    )
    if work == "bucket_mean":
        work_h = np.array(BUCKET_WORK_H)[bucket]
    elif work == "log_uniform":
        rng = np.random.default_rng(seed)
        lo = np.log(np.array([BUCKET_RANGE_H[b][0] for b in bucket]))
        hi = np.log(np.array([BUCKET_RANGE_H[b][1] for b in bucket]))
        work_h = np.exp(lo + (hi - lo) * rng.random(len(bucket)))
    else:
        raise ValueError(f"work must be 'bucket_mean' or 'log_uniform', got {work!r}")
    ref = {m: reference_iter_time(m) for m in set(models)}
    iter_time = np.array([ref[m] for m in models], dtype="float64")
    df = pd.DataFrame(
        {
            "job_id": parse_text(raw["name"], source=src, rows=rows, field_name="name"),
            "arrival_s": parse_numeric(raw["time"], source=src, rows=rows, field_name="time"),
            "gpus": parse_gpus(
                raw["num_replicas"], source=src, rows=rows, field_name="num_replicas"
            ),
            "model": models,
            "iterations": work_h * 3600.0 / iter_time,
            "iter_time_s": iter_time,
        }
    )
    fields = {"job_id": "name", "arrival_s": "time", "gpus": "num_replicas", "model": "application"}
    return make_trace(Path(path).stem, df, src, rows, fields)
