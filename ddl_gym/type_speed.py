"""A model's training speed on each GPU type, as the engine uses it.

``relative_speed(model, gpu_type)`` is the model's 1-GPU throughput on
``gpu_type`` over its throughput on a V100 (16 GB): a typed cluster runs a
job whose trace says ``iter_time_s`` (read as its V100 time, the catalogue's
reference) at ``iter_time_s / relative_speed`` per iteration on that type.

Where the numbers come from, in this order (``speed_source`` says which):

1. ``measured``: the model's own family in Gavel's measured 1-GPU throughputs
   (stanford-futuredata/gavel @c4fa4009, ``isolated_throughputs``; K80, P100
   and V100) at the batch size the catalogue profiles, through
   :class:`ddl_gym.gpu_speed.SpeedModel` (``MEASURED`` below; a data test
   recomputes it from the table).
2. ``measured median``: a model Gavel did not measure, on K80 or P100: the
   median ratio over Gavel's 26 job types (the catalogue's measured
   ``speed``).
3. ``datasheet``: a type Gavel did not measure (T4, A10, A100, H100): the
   catalogue's datasheet estimate, the same for every model.
4. ``assumed``: a type the catalogue has no numbers for (openb's G2, G3):
   the speed the cluster states for it (:class:`ddl_gym.topology.GpuKind`),
   else an error naming the type.
"""

from __future__ import annotations

from ddl_gym.gpu_types import get_gpu_type

__all__ = ["GAVEL_JOB_OF_MODEL", "MEASURED", "REFERENCE_TYPE", "relative_speed", "speed_source"]

REFERENCE_TYPE = "V100-16GB"

# catalogue model -> the Gavel job type (family at the catalogue's batch size)
GAVEL_JOB_OF_MODEL: dict[str, str] = {
    "resnet50": "ResNet-50 (batch size 32)",
    "resnet18": "ResNet-18 (batch size 32)",
    "transformer": "Transformer (batch size 64)",
    "lstm_lm": "LM (batch size 40)",
    "recommendation": "Recommendation (batch size 2048)",
    "a3c": "A3C",
    "cyclegan": "CycleGAN",
}

# relative_speed of the models Gavel measured, on the types it measured
# (SpeedModel over Gavel's isolated throughputs, rounded to 4 digits;
# tests/test_type_speed.py recomputes them from the table)
MEASURED: dict[str, dict[str, float]] = {
    "resnet50": {"K80": 0.1588, "P100": 0.6277},
    "resnet18": {"K80": 0.2396, "P100": 1.1963},
    "transformer": {"K80": 0.2033, "P100": 0.5909},
    "lstm_lm": {"K80": 0.2542, "P100": 0.7906},
    "recommendation": {"K80": 1.3978, "P100": 2.2219},
    "a3c": {"K80": 0.4792, "P100": 0.7917},
    "cyclegan": {"K80": 0.114, "P100": 0.5428},
}


def speed_source(model: str, gpu_type: str, assumed: float | None = None) -> tuple[float, str]:
    """(speed relative to a V100, where it comes from) of ``model`` on
    ``gpu_type`` (see the module docstring); ``assumed`` serves a type
    without numbers."""
    t = get_gpu_type(gpu_type)
    if t.name in (REFERENCE_TYPE, "V100-32GB"):
        return 1.0, "measured"
    measured = MEASURED.get(model, {}).get(t.name)
    if measured is not None:
        return measured, "measured"
    if t.speed is not None:
        return t.speed, "measured median" if t.speed_label == "measured" else "datasheet"
    if assumed is not None:
        return assumed, "assumed"
    raise ValueError(
        f"GPU type {t.name} has no speed (undisclosed in its source): state one as an "
        f"assumption, e.g. GpuKind({t.name!r}, speed=1.0)"
    )


def relative_speed(model: str, gpu_type: str, assumed: float | None = None) -> float:
    """``model``'s throughput on ``gpu_type`` over its V100 throughput."""
    return speed_source(model, gpu_type, assumed)[0]
