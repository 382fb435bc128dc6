"""Published per-GPU throughputs of GPT training on A100 DGX clusters, and the
model's predictions of them (docs/llm.md).

Every row is a number printed in a paper (cited per row). The cluster is the
one the papers describe: NVIDIA Selene, DGX A100 servers (8 x A100 80 GB on
NVSwitch, 8 x 200 Gb/s HDR InfiniBand each), i.e. the ``a100_nvlink_ib``
fabric preset, DGX SuperPOD scalable units of 20 servers as racks
(non-blocking fat tree).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ddl_gym.llm.iteration import (
    DEFAULT_PARAMS,
    PEAK_FLOPS,
    IterationTime,
    LLMParams,
    canonical_shape,
    iteration_time,
    links_of,
    tflops_per_gpu,
)
from ddl_gym.llm.layout import Layout
from ddl_gym.llm.shapes import get_shape
from ddl_gym.topology import FABRICS

SELENE_FABRIC = FABRICS["a100_nvlink_ib"]
SELENE_GPUS_PER_SERVER = 8
SELENE_SERVERS_PER_RACK = 20  # a DGX SuperPOD scalable unit

_T1 = "Narayanan et al. 2021 (SC'21), Table 1"
_T2 = "Narayanan et al. 2021 (SC'21), Table 2"


@dataclass(frozen=True)
class Published:
    """One published measurement: model, layout, achieved TFLOP/s per GPU."""

    model: str
    layout: Layout
    tflops: float
    source: str

    @property
    def gpus(self) -> int:
        return self.layout.gpus


def _row(model: str, tp: int, pp: int, gpus: int, batch: int, b: int, tflops: float, src: str,
         zero: int = 0) -> Published:  # fmt: skip
    dp = gpus // (tp * pp)
    m = batch // (dp * b)
    assert dp * tp * pp == gpus and m * dp * b == batch, (model, gpus, batch)
    return Published(model, Layout(tp, pp, dp, zero, m, b), tflops, src)


# Table 1 (weak scaling; sequence 2,048, vocabulary 51,200): parameters,
# TP, PP, GPUs, batch, achieved TFLOP/s per GPU. Micro-batch size 1 (the
# table does not print it; Table 2's PTD-P rows state 1). Table 2: GPT-3
# 175B (96 layers, h 12,288) and 530B with PTD-P (microbatch 1) and with
# ZeRO-3 without model parallelism (microbatch 4/2/1 as printed).
# fmt: off
PUBLISHED: tuple[Published, ...] = (
    _row("megatron_1.7b", 1, 1, 32, 512, 1, 137, f"{_T1}, row 1.7B"),
    _row("megatron_3.6b", 2, 1, 64, 512, 1, 138, f"{_T1}, row 3.6B"),
    _row("megatron_7.5b", 4, 1, 128, 512, 1, 142, f"{_T1}, row 7.5B"),
    _row("megatron_18.4b", 8, 1, 256, 1024, 1, 135, f"{_T1}, row 18.4B"),
    _row("megatron_39.1b", 8, 2, 512, 1536, 1, 138, f"{_T1}, row 39.1B"),
    _row("megatron_76.1b", 8, 4, 1024, 1792, 1, 140, f"{_T1}, row 76.1B"),
    _row("megatron_145.6b", 8, 8, 1536, 2304, 1, 148, f"{_T1}, row 145.6B"),
    _row("megatron_310.1b", 8, 16, 1920, 2160, 1, 155, f"{_T1}, row 310.1B"),
    _row("megatron_529.6b", 8, 35, 2520, 2520, 1, 163, f"{_T1}, row 529.6B"),
    _row("megatron_1008b", 8, 64, 3072, 3072, 1, 163, f"{_T1}, row 1008.0B"),
    _row("megatron_174.6b", 8, 12, 384, 1536, 1, 153, f"{_T2}, PTD-P 174.6B, 384 GPUs"),
    _row("megatron_174.6b", 8, 12, 768, 1536, 1, 149, f"{_T2}, PTD-P 174.6B, 768 GPUs"),
    _row("megatron_174.6b", 8, 12, 1536, 1536, 1, 141, f"{_T2}, PTD-P 174.6B, 1536 GPUs"),
    _row("megatron_529.6b", 8, 35, 560, 2240, 1, 171, f"{_T2}, PTD-P 529.6B, 560 GPUs"),
    _row("megatron_529.6b", 8, 35, 1120, 2240, 1, 167, f"{_T2}, PTD-P 529.6B, 1120 GPUs"),
    _row("megatron_529.6b", 8, 35, 2240, 2240, 1, 159, f"{_T2}, PTD-P 529.6B, 2240 GPUs"),
    _row("megatron_174.6b", 1, 1, 384, 1536, 4, 144, f"{_T2}, ZeRO-3 174.6B, 384 GPUs", 3),
    _row("megatron_174.6b", 1, 1, 768, 1536, 2, 88, f"{_T2}, ZeRO-3 174.6B, 768 GPUs", 3),
    _row("megatron_174.6b", 1, 1, 1536, 1536, 1, 44, f"{_T2}, ZeRO-3 174.6B, 1536 GPUs", 3),
    _row("megatron_529.6b", 1, 1, 640, 2560, 4, 138, f"{_T2}, ZeRO-3 529.6B, 640 GPUs", 3),
    _row("megatron_529.6b", 1, 1, 1120, 2240, 2, 98, f"{_T2}, ZeRO-3 529.6B, 1120 GPUs", 3),
    _row("megatron_529.6b", 1, 1, 2240, 2240, 1, 48, f"{_T2}, ZeRO-3 529.6B, 2240 GPUs", 3),
)
# fmt: on


def predict(row: Published, params: LLMParams = DEFAULT_PARAMS) -> tuple[float, IterationTime]:
    """(predicted TFLOP/s per GPU, iteration time) of a published row on Selene."""
    shape = canonical_shape(row.gpus, SELENE_GPUS_PER_SERVER, SELENE_SERVERS_PER_RACK)
    links = links_of(SELENE_FABRIC, SELENE_GPUS_PER_SERVER, link_eff=params.link_eff)
    model = get_shape(row.model)
    it = iteration_time(model, row.layout, shape, links, PEAK_FLOPS["A100-80GB"], params)
    return tflops_per_gpu(model, row.layout, it.total), it


def errors(
    params: LLMParams = DEFAULT_PARAMS, rows: tuple[Published, ...] = PUBLISHED
) -> list[float]:
    """Relative error (predicted / published - 1) per row."""
    return [predict(r, params)[0] / r.tflops - 1.0 for r in rows]


def fitted_rows() -> tuple[Published, ...]:
    """The rows the constants are fitted to: every row but ZeRO-3's (which
    the model misses, docs/llm.md)."""
    return tuple(r for r in PUBLISHED if r.layout.zero != 3)


_FIT_START = LLMParams(mfu=0.5, h_half=1000.0)
_FIT_GRIDS = ((0.02, 100.0, 15), (0.004, 20.0, 5), (0.001, 4.0, 5), (0.0002, 1.0, 5))


def fit(rows=None, base: LLMParams = _FIT_START) -> LLMParams:
    """Least squares in log error over ``mfu`` and ``h_half`` (``link_eff``
    and the rest stay ``base``'s): a grid around ``base``, then finer grids
    around the best (deterministic)."""
    rows = fitted_rows() if rows is None else rows

    def loss(p: LLMParams) -> float:
        return sum(math.log1p(e) ** 2 for e in errors(p, rows))

    best = base
    best_loss = loss(best)
    for mfu_step, h_step, span in _FIT_GRIDS:
        centre = best
        for i in range(-span, span + 1):
            for j in range(-span, span + 1):
                mfu = centre.mfu + i * mfu_step
                h_half = centre.h_half + j * h_step
                if not (0 < mfu <= 1 and h_half >= 0):
                    continue
                p = replace(centre, mfu=round(mfu, 6), h_half=round(h_half, 3))
                value = loss(p)
                if value < best_loss - 1e-15:
                    best, best_loss = p, value
    return best


def report_table(params: LLMParams = DEFAULT_PARAMS) -> str:
    """The error table of docs/model.md (markdown), one row per published number."""
    lines = [
        "| source | model | TP | PP | DP | ZeRO | GPUs | batch | published TF/s | "
        "predicted TF/s | error |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in PUBLISHED:
        pred, _ = predict(row, params)
        lay = row.layout
        err = pred / row.tflops - 1.0
        lines.append(
            f"| {row.source} | {row.model} | {lay.tp} | {lay.pp} | {lay.dp} | {lay.zero} | "
            f"{row.gpus:,} | {lay.batch:,} | {row.tflops:.0f} | {pred:.1f} | {err:+.1%} |"
        )
    return "\n".join(lines)
