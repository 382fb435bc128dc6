"""Adapter for the Tiresias simulator's job CSV (e.g. ``60_job.csv``).

Columns: job_id, num_gpu, submit_time, iterations, model_name, duration,
interval. ``duration`` is the recorded run time at ``num_gpu`` GPUs. Under
the simulator's linear speed-up assumption the job's single-GPU work is
``duration * num_gpu`` seconds, so ``iter_time_s = duration * num_gpu /
iterations`` (single-GPU seconds per iteration) and ``iterations`` is kept.
``interval`` (gap to the next submission) is redundant and ignored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ._io import read_csv_raw
from .schema import (
    Trace,
    make_trace,
    map_models,
    parse_gpus,
    parse_numeric,
    parse_text,
    require_columns,
)

__all__ = ["TIRESIAS_MODELS", "load_tiresias"]

TIRESIAS_MODELS: dict[str, str] = {
    "vgg11": "vgg11",
    "vgg16": "vgg16",
    "vgg19": "vgg19",
    "resnet50": "resnet50",
    "resnet101": "resnet101",
    "resnet152": "resnet152",
    "inception3": "inception_v3",
    "inception4": "inception_v4",
    "googlenet": "googlenet",
    "alexnet": "alexnet",
}

REQUIRED = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration")


def load_tiresias(path: str | Path) -> Trace:
    src = str(path)
    raw, rows = read_csv_raw(path)
    require_columns(list(raw.columns), REQUIRED, src)

    def num(col: str, **kw: Any):
        return parse_numeric(raw[col], source=src, rows=rows, field_name=col, **kw)

    gpus = parse_gpus(raw["num_gpu"], source=src, rows=rows, field_name="num_gpu")
    iterations = num("iterations", positive=True)
    duration = num("duration", positive=True)
    df = pd.DataFrame(
        {
            "job_id": parse_text(raw["job_id"], source=src, rows=rows, field_name="job_id"),
            "arrival_s": num("submit_time"),
            "gpus": gpus,
            "model": map_models(
                parse_text(raw["model_name"], source=src, rows=rows, field_name="model_name"),
                TIRESIAS_MODELS,
                source=src,
                rows=rows,
                field_name="model_name",
            ),
            "iterations": iterations,
            "iter_time_s": duration * gpus / iterations,
            "duration_s": duration,
        }
    )
    fields = {
        "arrival_s": "submit_time",
        "gpus": "num_gpu",
        "model": "model_name",
        "duration_s": "duration",
    }
    return make_trace(Path(path).stem, df, src, rows, fields)
