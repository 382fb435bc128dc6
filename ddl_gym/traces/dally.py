"""Adapter for the seed paper's job JSON (Dally / cluster-sim, Helios family).

The file is a JSON array of objects whose values are all strings. The traces
already carry ``total_iterations`` and ``time_per_iteration`` (single-GPU
seconds per iteration), so no catalogue reference time is needed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ._io import read_json
from .schema import (
    Trace,
    TraceError,
    make_trace,
    map_models,
    parse_numeric,
    parse_text,
    require_columns,
)

__all__ = ["DALLY_MODELS", "load_dally"]

# The six DNNs the seed paper profiled, as spelled in its traces.
DALLY_MODELS: dict[str, str] = {
    "ResNet50": "resnet50",
    "ResNet18": "resnet18",
    "AlexNet": "alexnet",
    "MobileNetV3": "mobilenet_v3",
    "VGG": "vgg11",  # the seed profiled VGG11 (profiles/dally_layers/vgg11_*)
    "BERT": "bert_large",  # the seed profiled BERT-large
}

REQUIRED = (
    "job_id",
    "arrival_time",
    "max_parallelism",
    "total_iterations",
    "time_per_iteration",
    "model",
)

_FIELDS = {
    "arrival_s": "arrival_time",
    "gpus": "max_parallelism",
    "iterations": "total_iterations",
    "iter_time_s": "time_per_iteration",
    "duration_s": "duration",
}


def read_dally_records(path: str | Path) -> list[dict]:
    """Parse the JSON array; each item must be an object."""
    data = read_json(path)
    if not isinstance(data, list):
        raise TraceError(f"{path}: expected a JSON array of job objects")
    for i, item in enumerate(data, start=1):
        if not isinstance(item, dict):
            raise TraceError(
                f"{path}: row {i} (1-based position in the JSON array), field '*': "
                f"expected a JSON object, got {type(item).__name__}"
            )
    return data


def load_dally(path: str | Path) -> Trace:
    """Load one of the seed's job JSON files.

    Mapping: ``max_parallelism`` -> gpus (gang size), ``total_iterations`` ->
    iterations, ``time_per_iteration`` -> iter_time_s, ``arrival_time`` ->
    arrival_s (trace offsets kept), ``duration`` -> duration_s, ``user``.
    The files are not in arrival order, so loading them emits a TraceWarning
    after sorting.
    """
    src = str(path)
    records = read_dally_records(path)
    if not records:
        raise TraceError(f"{src}: workload is empty: the JSON array has no job objects")
    raw = pd.DataFrame.from_records(records)
    require_columns(list(raw.columns), REQUIRED, src)
    rows = np.arange(1, len(raw) + 1)
    df = pd.DataFrame(
        {
            "job_id": parse_text(raw["job_id"], source=src, rows=rows, field_name="job_id"),
            "arrival_s": parse_numeric(
                raw["arrival_time"], source=src, rows=rows, field_name="arrival_time"
            ),
            "gpus": raw["max_parallelism"],
            "model": map_models(
                parse_text(raw["model"], source=src, rows=rows, field_name="model"),
                DALLY_MODELS,
                source=src,
                rows=rows,
                field_name="model",
            ),
            "iterations": raw["total_iterations"],
            "iter_time_s": raw["time_per_iteration"],
        }
    )
    if "duration" in raw.columns:
        df["duration_s"] = raw["duration"]
    if "user" in raw.columns:
        df["user"] = raw["user"]
    return make_trace(Path(path).stem, df, src, rows, _FIELDS)
