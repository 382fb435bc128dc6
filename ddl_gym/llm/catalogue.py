"""Default parallel layouts of the catalogue's LLMs (docs/llm.md).

Per model: the TP and PP sizes and the global batch. TP x PP are **our
choices** by two rules of thumb (Narayanan et al. 2021, section 3.3: tensor
parallelism inside a server, pipeline parallelism across servers): model
state of 16 bytes per parameter (fp16 weights and gradients, fp32 master
weights and Adam moments; Rajbhandari et al. 2020) over ``tp * pp`` GPUs at
most ~30 GB of an 80 GB A100 (the rest for activations), TP at most 8. The
175B layout is Narayanan et al.'s (Table 2: TP 8 x PP 12). Global batches
are the papers': GPT-3 Table 2.1 (1.3B 1M tokens, 6.7B and 13B 2M, 175B
3.2M; 2,048-token sequences), Llama 2 section 2.2 (4M tokens of 4,096-token
sequences). Micro-batch 1 sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddl_gym.llm.layout import Layout


@dataclass(frozen=True)
class DefaultLayout:
    """TP, PP and the global batch (sequences) of a model."""

    tp: int
    pp: int
    batch: int

    @property
    def replica(self) -> int:
        """GPUs of one model replica."""
        return self.tp * self.pp


# fmt: off
DEFAULT_LAYOUTS: dict[str, DefaultLayout] = {
    "gpt3_1.3b": DefaultLayout(1, 1, 512),     # 21 GB of state per GPU
    "gpt3_6.7b": DefaultLayout(4, 1, 1024),    # 27 GB
    "gpt3_13b": DefaultLayout(8, 1, 1024),     # 26 GB
    "gpt3_175b": DefaultLayout(8, 12, 1536),   # Narayanan et al. 2021, Table 2; 29 GB
    "llama2_7b": DefaultLayout(4, 1, 1024),    # 27 GB
    "llama2_13b": DefaultLayout(8, 1, 1024),   # 26 GB
    "llama2_70b": DefaultLayout(8, 8, 1024),   # 17 GB
}
# fmt: on


def layout_for(model: str, gpus: int) -> Layout:
    """The model's default layout on ``gpus`` GPUs: its TP and PP, DP the
    rest (``gpus`` a multiple of ``tp * pp``), the global batch split into
    micro-batches of one sequence per replica (at least ``pp`` of them)."""
    try:
        d = DEFAULT_LAYOUTS[model]
    except KeyError:
        raise ValueError(
            f"no default layout for {model!r}; known: {', '.join(DEFAULT_LAYOUTS)}"
        ) from None
    if gpus < d.replica or gpus % d.replica:
        raise ValueError(
            f"{model}: {gpus} GPUs is not a multiple of its replica of {d.replica} "
            f"(tp {d.tp} x pp {d.pp})"
        )
    dp = gpus // d.replica
    m = max(d.pp, d.batch // dp)
    return Layout(tp=d.tp, pp=d.pp, dp=dp, micro_batches=m)
