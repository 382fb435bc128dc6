"""The model catalogue: what the performance model needs to know about a DNN.

Per model we keep the single-GPU iteration time on a reference GPU (split into
forward and backward), and the gradient tensors that data-parallel training
all-reduces every iteration, in the order the backward pass produces them.

Sources (numbers only; no file is copied):

* ``seed`` models (resnet50, resnet18, alexnet, mobilenet_v3, vgg11, bert_large):
  the per-layer PyTorch-profiler tables of the seed paper's simulator
  (aakash-sharma/cluster-sim @4cd660e9, ``astra-sim/workload/*.csv``; in
  ``../shared/data/profiles/dally_layers``). Gradient sizes are that file's
  weight-gradient all-reduce column, which is in **bytes** (ResNet18's conv1,
  64x3x7x7 fp32, is listed as 37632 = 9408 x 4). Compute times are the
  profiled cycles times the authors' per-model scale factor, in seconds: the
  compute the authors simulate. Layers are as present in the files (BERT-large
  has 66 of its declared 145 lines; MobileNetV3 52 of 54).
* ``gavel`` models: single-GPU V100 throughput (steps/s) of Gavel's isolated
  profile (stanford-futuredata/gavel @c4fa4009), at the batch size named.
* ``pollux`` models: single-T4 step time of Pollux's placement profile
  (petuum/adaptdl osdi21-artifact ``simulator/traces/<model>/placements.csv``,
  placement "1", the smallest local batch size).
* ``flops`` models (CNNs of the Tiresias and Chronus tables without a layer
  profile): iteration time estimated as ResNet50's Gavel V100 time (batch 32)
  scaled by the ratio of forward GFLOPs per image, an estimate.

Parameter counts of models without a layer profile are facts about the
architectures (torchvision / original papers); their gradients are split into
``n_tensors`` equal tensors, a simplification that only matters when the
fabric does not bucket gradients.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

# Share of a training iteration spent in the backward pass for models without
# a layer profile: backward is about twice the forward cost for dense layers.
DEFAULT_BACKWARD_SHARE = 2.0 / 3.0


@dataclass(frozen=True)
class ModelProfile:
    """What the performance model knows about one DNN.

    Attributes:
        name: canonical catalogue name.
        iter_time_s: single-GPU iteration time on the reference GPU (s).
        backward_share: fraction of ``iter_time_s`` spent in the backward pass,
            the part that gradient all-reduce can overlap with.
        grad_bytes: gradient tensors in bytes, in backward-pass order (last
            layer first), as all-reduced each iteration.
        source: where the numbers come from (see the module docstring).
        reference: reference GPU and batch size the time was measured at.
    """

    name: str
    iter_time_s: float
    backward_share: float
    grad_bytes: tuple[int, ...]
    source: str
    reference: str

    @property
    def params(self) -> int:
        """Trainable parameters (fp32 gradients are 4 bytes each)."""
        return self.total_grad_bytes // 4

    @property
    def total_grad_bytes(self) -> int:
        return sum(self.grad_bytes)

    @property
    def n_layers(self) -> int:
        return len(self.grad_bytes)


# (forward s, backward s, per-layer gradient bytes in forward order)
# fmt: off
_LAYER_PROFILES: dict[str, tuple[float, float, tuple[int, ...]]] = {
    "resnet50": (0.00269148, 0.00913131, (
        37632, 16384, 147456, 65536, 65536, 65536, 147456, 65536, 65536, 147456, 65536, 131072,
        589824, 262144, 524288, 262144, 589824, 262144, 262144, 589824, 262144, 262144, 589824,
        262144, 524288, 2359296, 1048576, 2097152, 1048576, 2359296, 1048576, 1048576, 2359296,
        1048576, 1048576, 2359296, 1048576, 1048576, 2359296, 1048576, 1048576, 2359296,
        1048576, 2097152, 9437184, 4194304, 8388608, 4194304, 9437184, 4194304, 4194304,
        9437184, 4194304, 8192000
    )),
    "resnet18": (3.85633e-05, 0.000141678, (
        37632, 147456, 147456, 147456, 147456, 294912, 589824, 32768, 589824, 589824, 1179648,
        2359296, 131072, 2359296, 2359296, 4718592, 9437184, 524288, 9437184, 9437184, 2048000
    )),
    "alexnet": (0.00036529, 0.00084187, (
        92928, 1228800, 2654208, 3538944, 2359296, 150994944, 67108864, 16384000
    )),
    "mobilenet_v3": (4.67873e-06, 5.85572e-05, (
        1728, 576, 512, 512, 1024, 4608, 2592, 6912, 8448, 3168, 8448, 9216, 9600, 9216, 9216,
        15360, 38400, 24000, 61440, 61440, 38400, 38400, 24000, 61440, 61440, 38400, 19200,
        15360, 15360, 23040, 27648, 14400, 23040, 23040, 27648, 55296, 28800, 82944, 82944,
        110592, 221184, 57600, 331776, 331776, 221184, 57600, 331776, 331776, 221184, 221184,
        2359296, 4096000
    )),
    "vgg11": (0.00120224, 0.00263482, (
        6912, 294912, 1179648, 2359296, 4718592, 9437184, 9437184, 9437184, 411041792, 67108864,
        16384000
    )),
    "bert_large": (0.000520468, 0.0011909, (
        4194304, 4194304, 16777216, 4194304, 4194304, 4194304, 16777216, 16777216, 4194304,
        4194304, 16777216, 4194304, 4194304, 4194304, 16777216, 4194304, 4194304, 4194304,
        4194304, 16777216, 4194304, 4194304, 4194304, 16777216, 4194304, 4194304, 4194304,
        16777216, 16777216, 4194304, 4194304, 4194304, 16777216, 16777216, 4194304, 4194304,
        4194304, 16777216, 16777216, 4194304, 4194304, 4194304, 16777216, 16777216, 4194304,
        4194304, 4194304, 16777216, 16777216, 4194304, 4194304, 4194304, 16777216, 16777216,
        4194304, 4194304, 4194304, 16777216, 16777216, 4194304, 4194304, 4194304, 4194304,
        16777216, 16777216, 8192
    )),
}
# fmt: on

_RESNET50_V100_BS32_S = 1.0 / 7.787264918596293  # Gavel, v100, ResNet-50 bs32
_RESNET50_GFLOPS = 4.1

# name: (iteration time s, parameters, parameter tensors, source, reference)
_SUMMARY_PROFILES: dict[str, tuple[float, int, int, str, str]] = {
    # Gavel isolated V100 throughputs (steps/s -> s/step).
    "transformer": (1.0 / 8.61775899193302, 65_000_000, 186, "gavel", "V100, batch 64"),
    "lstm_lm": (1.0 / 45.23737155222392, 13_500_000, 6, "gavel", "V100, batch 40"),
    "recommendation": (1.0 / 7.469632060833725, 40_000_000, 6, "gavel", "V100, batch 2048"),
    "a3c": (1.0 / 7.175767179667988, 1_300_000, 10, "gavel", "V100"),
    "cyclegan": (1.0 / 4.426088263367452, 28_300_000, 160, "gavel", "V100, batch 1"),
    # Pollux single-T4 step times, placement "1".
    "bert_base": (0.45532354712486267, 110_000_000, 199, "pollux", "T4, batch 4"),
    "deepspeech2": (0.46644578874111176, 26_000_000, 40, "pollux", "T4, batch 10"),
    "yolov3": (0.26693882048130035, 61_900_000, 222, "pollux", "T4, batch 4"),
    "ncf": (0.007305891513824463, 5_000_000, 8, "pollux", "T4, batch 32"),
    # ResNet50 time x GFLOPs ratio (estimate), parameters from torchvision.
    "vgg16": (
        _RESNET50_V100_BS32_S * 15.5 / _RESNET50_GFLOPS,
        138_357_544,
        32,
        "flops",
        "V100 est., batch 32",
    ),
    "vgg19": (
        _RESNET50_V100_BS32_S * 19.6 / _RESNET50_GFLOPS,
        143_667_240,
        38,
        "flops",
        "V100 est., batch 32",
    ),
    "resnet101": (
        _RESNET50_V100_BS32_S * 7.8 / _RESNET50_GFLOPS,
        44_549_160,
        314,
        "flops",
        "V100 est., batch 32",
    ),
    "resnet152": (
        _RESNET50_V100_BS32_S * 11.6 / _RESNET50_GFLOPS,
        60_192_808,
        467,
        "flops",
        "V100 est., batch 32",
    ),
    "inception_v3": (
        _RESNET50_V100_BS32_S * 5.7 / _RESNET50_GFLOPS,
        27_161_264,
        292,
        "flops",
        "V100 est., batch 32",
    ),
    "inception_v4": (
        _RESNET50_V100_BS32_S * 12.3 / _RESNET50_GFLOPS,
        42_679_816,
        449,
        "flops",
        "V100 est., batch 32",
    ),
    "googlenet": (
        _RESNET50_V100_BS32_S * 1.5 / _RESNET50_GFLOPS,
        6_624_904,
        173,
        "flops",
        "V100 est., batch 32",
    ),
    "mobilenet_v2": (
        _RESNET50_V100_BS32_S * 0.3 / _RESNET50_GFLOPS,
        3_504_872,
        158,
        "flops",
        "V100 est., batch 32",
    ),
}

_SEED_REFERENCE = "authors' scaled profile (batch 512; VGG11 and BERT-large 256)"


def _equal_split(total_bytes: int, n: int) -> tuple[int, ...]:
    base, rest = divmod(total_bytes, n)
    return tuple(base + (1 if i < rest else 0) for i in range(n))


def _build() -> dict[str, ModelProfile]:
    profiles: dict[str, ModelProfile] = {}
    for name, (fwd, bwd, layers) in _LAYER_PROFILES.items():
        profiles[name] = ModelProfile(
            name=name,
            iter_time_s=fwd + bwd,
            backward_share=bwd / (fwd + bwd),
            grad_bytes=tuple(reversed(layers)),
            source="seed",
            reference=_SEED_REFERENCE,
        )
    for name, (t, params, n_tensors, source, ref) in _SUMMARY_PROFILES.items():
        profiles[name] = ModelProfile(
            name=name,
            iter_time_s=t,
            backward_share=DEFAULT_BACKWARD_SHARE,
            grad_bytes=_equal_split(4 * params, n_tensors),
            source=source,
            reference=ref,
        )
    return profiles


_CATALOGUE = _build()

#: Canonical model names, the seed paper's six first.
MODEL_NAMES: tuple[str, ...] = tuple(_CATALOGUE)
SEED_MODELS: tuple[str, ...] = tuple(_LAYER_PROFILES)


class UnknownModelError(KeyError):
    """A model name that is not in the catalogue."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


def get_profile(name: str) -> ModelProfile:
    """The catalogue entry of a canonical model name."""
    try:
        return _CATALOGUE[name]
    except KeyError:
        raise UnknownModelError(
            f"unknown model {name!r}; known models: {', '.join(MODEL_NAMES)}"
        ) from None


@cache
def bucket_sizes(name: str, bucket_bytes: float | None) -> tuple[int, ...]:
    """Gradient buckets all-reduced per iteration, in bytes.

    ``None`` all-reduces each layer on its own (the seed's model). Otherwise
    layers are packed greedily in backward order into buckets of at least
    ``bucket_bytes``, as PyTorch DDP does (its default is 25 MB).
    """
    grads = get_profile(name).grad_bytes
    if bucket_bytes is None:
        return grads
    buckets: list[int] = []
    current = 0
    for size in grads:
        current += size
        if current >= bucket_bytes:
            buckets.append(current)
            current = 0
    if current:
        buckets.append(current)
    return tuple(buckets)
