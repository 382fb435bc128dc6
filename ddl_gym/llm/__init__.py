"""LLM training jobs with tensor, pipeline and data parallelism (issue 54).

``Layout`` (TP x PP x DP, ZeRO, micro-batches), ``TransformerShape`` (the
model's dimensions, :data:`SHAPES`), ``iteration_time`` (per-iteration time
under a placement) and the calibration against published throughputs
(``ddl_gym.llm.calibration``, docs/llm.md).
"""

from ddl_gym.llm.iteration import (
    DEFAULT_PARAMS,
    PEAK_FLOPS,
    IterationTime,
    Links,
    LLMParams,
    canonical_shape,
    iteration_time,
    links_of,
    ring_time,
    tflops_per_gpu,
)
from ddl_gym.llm.layout import Layout, parse_layout
from ddl_gym.llm.shapes import SHAPES, TransformerShape, get_shape

__all__ = [
    "DEFAULT_PARAMS",
    "PEAK_FLOPS",
    "SHAPES",
    "IterationTime",
    "LLMParams",
    "Layout",
    "Links",
    "TransformerShape",
    "canonical_shape",
    "get_shape",
    "iteration_time",
    "links_of",
    "parse_layout",
    "ring_time",
    "tflops_per_gpu",
]
