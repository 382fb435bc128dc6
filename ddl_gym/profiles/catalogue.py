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

* ``transformer-flops`` models (GPT-2 small/medium/large/XL, ViT-L/16,
  Llama 2 7B; ``TRANSFORMER_MODELS``): parameter counts of the reference
  implementations (Radford et al. 2019 via Hugging Face ``gpt2*``;
  Dosovitskiy et al. 2021 via torchvision ``vit_l_16``; Touvron et al. 2023),
  iteration times **estimated** from training FLOPs: ``6 N`` per token plus
  the attention term ``6 n_layer n_ctx d_model`` (Kaplan et al. 2020, forward
  ``2 N + 2 n_layer n_ctx d_model``, backward twice that), times the tokens of
  one GPU's batch, over an assumed sustained throughput (``_V100`` and
  ``_A100`` below). Data parallel only, fp32 gradients (4 bytes per
  parameter, as PyTorch DDP with AMP all-reduces them). docs/model.md has the
  derivation and what it leaves out (a 7B model under plain data parallelism
  does not fit one GPU's memory; memory is not modelled).

Parameter counts of models without a layer profile are facts about the
architectures (torchvision / original papers); their gradients are split into
``n_tensors`` equal tensors, a simplification that only matters when the
fabric does not bucket gradients.

``register_model`` adds a model at run time (a scenario file's ``[models]``
table calls it), so that traces, the engine and the env accept its name;
``model_names()`` lists every name known now. The registry is process-wide on
purpose: the engine, the performance model and trace validation look models
up by name, and a name means one model everywhere.
"""

from __future__ import annotations

import re
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


@dataclass(frozen=True)
class TransformerSpec:
    """What a transformer's estimated iteration time is derived from."""

    params: int  # trainable parameters (reference implementation)
    n_tensors: int  # parameter tensors (weights and biases)
    n_layer: int
    d_model: int
    n_ctx: int  # tokens per sequence (ViT: patches + class token)
    sequences: int  # sequences (images) per GPU per iteration
    peak_flops: float  # the reference GPU's dense fp16/bf16 peak, FLOP/s
    mfu: float  # assumed share of that peak sustained in training
    reference: str

    @property
    def flops_per_token(self) -> float:
        """Training FLOPs per token: 6 N + 6 n_layer n_ctx d_model (Kaplan et al. 2020)."""
        return 6.0 * self.params + 6.0 * self.n_layer * self.n_ctx * self.d_model

    @property
    def iter_time_s(self) -> float:
        tokens = self.sequences * self.n_ctx
        return self.flops_per_token * tokens / (self.peak_flops * self.mfu)


# Sustained throughput assumptions (estimates, see docs/model.md):
# V100 tensor-core fp16 peak 125 TFLOP/s at 30% (Megatron-LM, Shoeybi et al.
# 2019: 39 TFLOP/s on one V100 for a 1.2B GPT-2); A100 bf16 peak 312 TFLOP/s
# at 40% (Narayanan et al. 2021 sustain 44-52% with tensor + pipeline
# parallelism; plain data parallelism does worse).
_V100 = (125e12, 0.30)
_A100 = (312e12, 0.40)

# fmt: off
TRANSFORMERS: dict[str, TransformerSpec] = {
    # GPT-2 (Hugging Face counts, tied embeddings), n_ctx 1024, 8 sequences / GPU
    "gpt2": TransformerSpec(124_439_808, 148, 12, 768, 1024, 8, *_V100,
                            "V100 est., 8 x 1024 tokens"),
    "gpt2_medium": TransformerSpec(354_823_168, 292, 24, 1024, 1024, 8, *_V100,
                                   "V100 est., 8 x 1024 tokens"),
    "gpt2_large": TransformerSpec(774_030_080, 436, 36, 1280, 1024, 4, *_V100,
                                  "V100 est., 4 x 1024 tokens"),
    "gpt2_xl": TransformerSpec(1_557_611_200, 580, 48, 1600, 1024, 2, *_V100,
                               "V100 est., 2 x 1024 tokens"),
    # ViT-L/16 at 224 px: 196 patches + class token, 32 images / GPU
    "vit_l16": TransformerSpec(304_326_632, 296, 24, 1024, 197, 32, *_V100,
                               "V100 est., batch 32 (224 px)"),
    # Llama 2 7B, 4 sequences of 4096 tokens / GPU per iteration
    "llama2_7b": TransformerSpec(6_738_415_616, 291, 32, 4096, 4096, 4, *_A100,
                                 "A100 est., 4 x 4096 tokens"),
}
# fmt: on
#: The transformer models added to the catalogue (estimated compute times).
TRANSFORMER_MODELS: tuple[str, ...] = tuple(TRANSFORMERS)

# LLMs meant to run with a parallel layout (a trace's ``layout`` column,
# ddl_gym/llm and docs/llm.md); their entries here only make the names valid
# in traces and give a data-parallel fallback: fp32 gradients, one sequence
# per GPU per iteration on an A100 at 40% of peak (as ``llama2_7b``).
# Parameter counts: ddl_gym.llm.SHAPES (GPT-3: Brown et al. 2020, Table 2.1;
# Llama 2: Touvron et al. 2023, the released 13B / 70B), tested equal.
# fmt: off
LLM_SPECS: dict[str, TransformerSpec] = {
    "gpt3_1.3b": TransformerSpec(1_315_723_264, 12 * 24 + 4, 24, 2048, 2048, 1, *_A100,
                                 "A100 est., 1 x 2048 tokens (LLM: use a layout)"),
    "gpt3_6.7b": TransformerSpec(6_658_404_352, 12 * 32 + 4, 32, 4096, 2048, 1, *_A100,
                                 "A100 est., 1 x 2048 tokens (LLM: use a layout)"),
    "gpt3_13b": TransformerSpec(12_853_386_240, 12 * 40 + 4, 40, 5120, 2048, 1, *_A100,
                                "A100 est., 1 x 2048 tokens (LLM: use a layout)"),
    "gpt3_175b": TransformerSpec(174_604_259_328, 12 * 96 + 4, 96, 12288, 2048, 1, *_A100,
                                 "A100 est., 1 x 2048 tokens (LLM: use a layout)"),
    "llama2_13b": TransformerSpec(13_015_864_320, 9 * 40 + 3, 40, 5120, 4096, 1, *_A100,
                                  "A100 est., 1 x 4096 tokens (LLM: use a layout)"),
    "llama2_70b": TransformerSpec(68_976_648_192, 9 * 80 + 3, 80, 8192, 4096, 1, *_A100,
                                  "A100 est., 1 x 4096 tokens (LLM: use a layout)"),
}
# fmt: on
#: LLM models with default layouts (ddl_gym/llm/catalogue.py); with
#: ``llama2_7b`` the catalogue's LLMs. Not in :data:`MODEL_NAMES` (kept the
#: data-parallel catalogue, so tables and sweeps over it do not change); in
#: :func:`model_names`, so traces may name them.
LLM_MODELS: tuple[str, ...] = tuple(LLM_SPECS)

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
    for name, spec in TRANSFORMERS.items():
        profiles[name] = ModelProfile(
            name=name,
            iter_time_s=spec.iter_time_s,
            backward_share=DEFAULT_BACKWARD_SHARE,
            grad_bytes=_equal_split(4 * spec.params, spec.n_tensors),
            source="transformer-flops",
            reference=spec.reference,
        )
    return profiles


_CATALOGUE = _build()

#: Canonical names of the built-in catalogue, the seed paper's six first.
MODEL_NAMES: tuple[str, ...] = tuple(_CATALOGUE)
SEED_MODELS: tuple[str, ...] = tuple(_LAYER_PROFILES)
#: The models seeded model assignment (rule "uniform") draws from and the
#: fidelity report sweeps: the catalogue before the transformer models, kept
#: fixed so that adding a model never changes a trace or an existing table.
ASSIGNABLE_MODELS: tuple[str, ...] = tuple(n for n in MODEL_NAMES if n not in TRANSFORMER_MODELS)
for _name, _spec in LLM_SPECS.items():
    _CATALOGUE[_name] = ModelProfile(
        name=_name,
        iter_time_s=_spec.iter_time_s,
        backward_share=DEFAULT_BACKWARD_SHARE,
        grad_bytes=_equal_split(4 * _spec.params, _spec.n_tensors),
        source="llm-flops",
        reference=_spec.reference,
    )
_BUILTIN = frozenset(_CATALOGUE)


class UnknownModelError(KeyError):
    """A model name that is not in the catalogue."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


def model_names() -> tuple[str, ...]:
    """Every model name known in this process: the catalogue, then the
    registered ones (``register_model``) in registration order."""
    return tuple(_CATALOGUE)


def get_profile(name: str) -> ModelProfile:
    """The catalogue entry of a canonical model name."""
    try:
        return _CATALOGUE[name]
    except KeyError:
        raise UnknownModelError(
            f"unknown model {name!r}; known models: {', '.join(_CATALOGUE)}. Add one with "
            "ddl_gym.profiles.register_model(...) or a [models] table in a scenario file "
            "(docs/model.md)"
        ) from None


_NAME = re.compile(r"^[a-z0-9][a-z0-9_.\-]*$")


def register_model(
    name: str,
    iter_time_s: float,
    *,
    params: int | None = None,
    grad_bytes: tuple[int, ...] | list[int] | None = None,
    n_tensors: int = 1,
    backward_share: float = DEFAULT_BACKWARD_SHARE,
    source: str = "user",
    reference: str = "",
) -> ModelProfile:
    """Add a data-parallel model to the catalogue and return its profile.

    Give ``iter_time_s`` (single-GPU compute time per iteration on the GPUs
    you simulate, s) and either ``params`` (trainable parameters; fp32
    gradients of 4 bytes each, split into ``n_tensors`` equal tensors in
    backward order) or ``grad_bytes`` (each gradient tensor's bytes in
    backward order: last layer first). ``backward_share`` is the share of
    the iteration spent in the backward pass, which all-reduce can overlap.

    Registering a name again with the same numbers returns the profile
    (scenario files register on every load, in every worker); other
    numbers, or a built-in name, raise ``ValueError``: a name means one model.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"model name {name!r}: lower-case letters, digits, '_', '.', '-' (a letter or "
            "digit first)"
        )
    t = float(iter_time_s)
    if not (t > 0 and t < float("inf")):
        raise ValueError(f"model {name!r}: iter_time_s must be a positive number, got {t}")
    if not 0.0 <= float(backward_share) <= 1.0:
        raise ValueError(f"model {name!r}: backward_share must be in [0, 1], got {backward_share}")
    if (params is None) == (grad_bytes is None):
        raise ValueError(f"model {name!r}: give exactly one of params and grad_bytes")
    if grad_bytes is not None:
        grads = tuple(int(b) for b in grad_bytes)
        if not grads or any(b <= 0 for b in grads):
            raise ValueError(f"model {name!r}: grad_bytes must be positive byte counts")
    else:
        assert params is not None  # exactly one of params and grad_bytes (checked above)
        if int(params) <= 0 or int(n_tensors) <= 0 or int(n_tensors) > int(params):
            raise ValueError(
                f"model {name!r}: params and n_tensors must be positive (n_tensors <= params)"
            )
        grads = _equal_split(4 * int(params), int(n_tensors))
    profile = ModelProfile(name, t, float(backward_share), grads, source, reference)
    known = _CATALOGUE.get(name)
    if known is not None:
        if known == profile and name not in _BUILTIN:
            return known
        what = "a built-in catalogue model" if name in _BUILTIN else "registered with other numbers"
        raise ValueError(f"model {name!r} is {what}; pick another name")
    _CATALOGUE[name] = profile
    return profile


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
