"""GPU types as data: a catalogue of GPU generations with their sources.

Every number is labelled: ``measured`` (from a measured table, named in
``source``) or ``estimate`` (a vendor datasheet figure, named in ``source``,
or an undisclosed type). ``speed`` is the type's training throughput relative
to a V100, the factor :mod:`ddl_gym.gpu_speed` falls back on when no measured
job of the same model family exists:

* K80, P100, V100: measured. The median over Gavel's 26 job types of the
  1-GPU throughput ratio to V100 (stanford-futuredata/gavel, commit c4fa4009,
  ``scheduler/simulation_throughputs.json``; ``scripts/gpu_types.py --docs``
  recomputes them and a data test checks these constants against it).
* Other types: estimate, the geometric mean of the FP32-TFLOPS ratio and the
  memory-bandwidth ratio to V100 SXM2 (15.7 TFLOPS, 900 GB/s), both from the
  vendor datasheets cited per entry. Training is partly compute-, partly
  memory-bound, hence the geometric mean; tensor-core speed-ups (TF32/FP16)
  are not assumed because Gavel's jobs run in FP32.

Alibaba's openb node list names G2 and G3 without disclosing the GPU; they
are catalogued with no numbers (``speed`` None) so a trace can name them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "CATALOGUE",
    "GpuType",
    "OPENB_NAMES",
    "V100_FP32_TFLOPS",
    "V100_MEM_BW_GBS",
    "datasheet_speed",
    "get_gpu_type",
    "gpu_type_set",
]

Label = Literal["measured", "estimate"]

# V100 SXM2 (NVIDIA Tesla V100 datasheet, 2017/2020): the speed reference.
V100_FP32_TFLOPS = 15.7
V100_MEM_BW_GBS = 900.0


@dataclass(frozen=True)
class GpuType:
    """One GPU generation (per GPU, not per board).

    ``link`` is the intra-server GPU link family and ``link_gbs`` its total
    bandwidth per GPU in GB/s (datasheet). ``speed_label`` says whether
    ``speed`` is measured or estimated; ``source`` cites where the numbers
    come from.
    """

    name: str
    memory_gib: float | None
    fp32_tflops: float | None
    mem_bw_gbs: float | None
    link: str | None
    link_gbs: float | None
    speed: float | None
    speed_label: Label
    source: str


def datasheet_speed(fp32_tflops: float, mem_bw_gbs: float) -> float:
    """Speed relative to V100 from datasheet figures (geometric mean of the
    FP32 and memory-bandwidth ratios)."""
    return math.sqrt((fp32_tflops / V100_FP32_TFLOPS) * (mem_bw_gbs / V100_MEM_BW_GBS))


def _est(
    name: str,
    memory_gib: float,
    fp32: float,
    bw: float,
    link: str,
    link_gbs: float,
    source: str,
) -> GpuType:
    return GpuType(
        name, memory_gib, fp32, bw, link, link_gbs, datasheet_speed(fp32, bw), "estimate", source
    )


_GAVEL = (
    "speed measured: Gavel 1-GPU throughputs (stanford-futuredata/gavel c4fa4009, "
    "scheduler/simulation_throughputs.json), median ratio to V100 over 26 job types; "
)

CATALOGUE: dict[str, GpuType] = {
    t.name: t
    for t in (
        # measured speeds (see the module docstring); specs from the datasheets
        GpuType(
            "K80",
            12.0,
            4.37,
            240.0,
            "PCIe3",
            15.75,
            0.247,
            "measured",
            _GAVEL + "specs: NVIDIA Tesla K80 datasheet (per board 24 GB, 480 GB/s, "
            "8.73 FP32 TFLOPS with boost; halved per GPU)",
        ),
        GpuType(
            "P100",
            16.0,
            9.3,
            732.0,
            "PCIe3",
            15.75,
            0.813,
            "measured",
            _GAVEL + "specs: NVIDIA Tesla P100 PCIe datasheet (16 GB HBM2, 732 GB/s, "
            "9.3 FP32 TFLOPS)",
        ),
        GpuType(
            "V100-16GB",
            16.0,
            15.7,
            900.0,
            "NVLink2",
            300.0,
            1.0,
            "measured",
            _GAVEL + "the reference; specs: NVIDIA Tesla V100 datasheet (SXM2: 15.7 FP32 "
            "TFLOPS, 900 GB/s HBM2, NVLink 300 GB/s)",
        ),
        GpuType(
            "V100-32GB",
            32.0,
            15.7,
            900.0,
            "NVLink2",
            300.0,
            1.0,
            "measured",
            _GAVEL + "same silicon as V100-16GB (Gavel does not say which memory size); "
            "specs: NVIDIA Tesla V100 datasheet (SXM2 32 GB)",
        ),
        _est(
            "T4",
            16.0,
            8.1,
            320.0,
            "PCIe3",
            15.75,
            "NVIDIA T4 datasheet: 8.1 FP32 TFLOPS, 65 FP16 tensor TFLOPS, 320 GB/s GDDR6",
        ),
        _est(
            "A10",
            24.0,
            31.2,
            600.0,
            "PCIe4",
            31.5,
            "NVIDIA A10 datasheet: 31.2 FP32 TFLOPS, 62.5 TF32 tensor TFLOPS, 600 GB/s GDDR6",
        ),
        _est(
            "A100-40GB",
            40.0,
            19.5,
            1555.0,
            "NVLink3",
            600.0,
            "NVIDIA A100 datasheet (SXM 40 GB): 19.5 FP32 TFLOPS, 156 TF32 tensor TFLOPS, "
            "1,555 GB/s HBM2, NVLink 600 GB/s",
        ),
        _est(
            "A100-80GB",
            80.0,
            19.5,
            2039.0,
            "NVLink3",
            600.0,
            "NVIDIA A100 datasheet (SXM 80 GB): 19.5 FP32 TFLOPS, 156 TF32 tensor TFLOPS, "
            "2,039 GB/s HBM2e, NVLink 600 GB/s",
        ),
        _est(
            "H100",
            80.0,
            67.0,
            3350.0,
            "NVLink4",
            900.0,
            "NVIDIA H100 datasheet (SXM5 80 GB): 67 FP32 TFLOPS, 494.7 TF32 tensor TFLOPS "
            "dense, 3.35 TB/s HBM3, NVLink 900 GB/s",
        ),
        # openb's undisclosed models: named so traces can refer to them
        GpuType(
            "G2",
            None,
            None,
            None,
            None,
            None,
            None,
            "estimate",
            "alibaba/clusterdata cluster-trace-gpu-v2023 (openb node list): GPU model "
            "undisclosed; no numbers",
        ),
        GpuType(
            "G3",
            None,
            None,
            None,
            None,
            None,
            None,
            "estimate",
            "alibaba/clusterdata cluster-trace-gpu-v2023 (openb node list): GPU model "
            "undisclosed; no numbers",
        ),
    )
}

# The spelling in Alibaba's openb node list and gpu_spec -> catalogue name.
OPENB_NAMES: dict[str, str] = {
    "P100": "P100",
    "T4": "T4",
    "V100M16": "V100-16GB",
    "V100M32": "V100-32GB",
    "A10": "A10",
    "G2": "G2",
    "G3": "G3",
}

# Gavel's worker-type spelling -> catalogue name (Gavel's V100s are 16 GB: AWS p3).
GAVEL_NAMES: dict[str, str] = {"k80": "K80", "p100": "P100", "v100": "V100-16GB"}


def get_gpu_type(name: str) -> GpuType:
    """The catalogue entry for ``name`` (catalogue, openb or Gavel spelling)."""
    key = OPENB_NAMES.get(name) or GAVEL_NAMES.get(name) or name
    if key not in CATALOGUE:
        known = ", ".join(sorted(set(CATALOGUE) | set(OPENB_NAMES)))
        raise KeyError(f"unknown GPU type {name!r}; known: {known}")
    return CATALOGUE[key]


def gpu_type_set(text: str) -> frozenset[str]:
    """The catalogue names of a ``|``-joined list of GPU types (catalogue,
    openb or Gavel spellings; blank parts ignored; empty: the empty set, which
    a trace's ``gpu_types`` reads as any type). KeyError names an unknown one."""
    return frozenset(get_gpu_type(p.strip()).name for p in text.split("|") if p.strip())
