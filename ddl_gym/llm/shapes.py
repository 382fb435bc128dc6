"""Transformer shapes: what an LLM job's compute and traffic are derived from.

Sources (facts about the architectures):

* GPT-3 family: Brown et al. 2020, "Language Models are Few-Shot Learners",
  Table 2.1 (layers, d_model, heads; context 2,048; GPT-2's 50,257-token BPE
  vocabulary). The table prints d_model 5,140 for 13B; we use 5,120
  (= its 40 heads x d_head 128).
* Llama 2: Touvron et al. 2023, "Llama 2: Open Foundation and Fine-Tuned Chat
  Models", Table 1 (sizes, context 4,096, grouped-query attention for 70B) and
  section 2.2 (SwiGLU, RMSNorm, 32k vocabulary); hidden and FFN sizes as in the
  released configurations (7B 4,096 / 11,008; 13B 5,120 / 13,824; 70B 8,192 /
  28,672 with 8 key-value heads).
* Megatron GPT models of Narayanan et al. 2021 (SC'21, "Efficient Large-Scale
  Language Model Training on GPU Clusters Using Megatron-LM"), Table 1:
  sequence 2,048, vocabulary 51,200, FFN 4h.

FLOPs follow Narayanan et al. 2021 section 5.1: a layer's forward pass does
``2 b s P_layer + 4 b s^2 h`` (its weight matrices, then the attention
scores and their product with the values), the logit layer ``2 b s h V``; the
backward pass twice the forward; activation recomputation one forward more
for the layers. For GPT (``P_layer = 12 h^2``) this is their
``96 B s l h^2 (1 + s / 6h + V / 16 l h)`` per iteration.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TransformerShape:
    """A decoder-only transformer.

    Attributes:
        name: catalogue name.
        layers, hidden, heads: ``l``, ``h``, attention heads.
        seq_len: tokens per sequence ``s``.
        vocab: vocabulary ``V``.
        ffn: FFN hidden size (GPT 4h; Llama's SwiGLU sizes).
        mlp_matrices: weight matrices of the FFN (2 for GPT's GeLU MLP, 3
            for SwiGLU).
        kv_heads: key-value heads (grouped-query attention; = heads without).
        tied_embeddings: input and output embeddings shared (GPT).
        learned_positions: a learned position embedding of ``s x h`` (GPT).
        precision_bytes: bytes per activation / gradient element (2: fp16 or
            bf16 mixed precision).
        source: where the numbers come from.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int
    ffn: int
    mlp_matrices: int = 2
    kv_heads: int | None = None
    tied_embeddings: bool = True
    learned_positions: bool = True
    precision_bytes: int = 2
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "seq_len", "vocab", "ffn", "precision_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"transformer {self.name!r}: {name} must be >= 1, got {value!r}")
        if self.mlp_matrices not in (2, 3):
            raise ValueError(f"transformer {self.name!r}: mlp_matrices must be 2 or 3")
        kv = self.kv_heads if self.kv_heads is not None else self.heads
        if not (1 <= kv <= self.heads and self.heads % kv == 0):
            raise ValueError(f"transformer {self.name!r}: kv_heads must divide heads, got {kv}")

    # -- parameters ----------------------------------------------------------
    @property
    def layer_matrix_params(self) -> int:
        """Weight-matrix parameters of one layer (what its GEMMs multiply by)."""
        h = self.hidden
        kv = self.kv_heads if self.kv_heads is not None else self.heads
        kv_dim = h * kv // self.heads
        return 2 * h * h + 2 * h * kv_dim + self.mlp_matrices * h * self.ffn

    @property
    def layer_params(self) -> int:
        """One layer's parameters: matrices, biases and norms (GPT: 12h^2 + 13h)."""
        h = self.hidden
        if self.learned_positions:  # GPT: biases of every matrix, two LayerNorms
            kv = self.kv_heads if self.kv_heads is not None else self.heads
            biases = h + 2 * (h * kv // self.heads) + h + self.ffn + h
            return self.layer_matrix_params + biases + 4 * h
        return self.layer_matrix_params + 2 * h  # Llama: no biases, two RMSNorms

    @property
    def embedding_params(self) -> int:
        """Embeddings (input, output unless tied, positions) and the final norm."""
        h = self.hidden
        n = self.vocab * h * (1 if self.tied_embeddings else 2)
        if self.learned_positions:
            n += self.seq_len * h + 2 * h
        else:
            n += h
        return n

    @property
    def params(self) -> int:
        return self.layers * self.layer_params + self.embedding_params

    # -- FLOPs per micro-batch -------------------------------------------------
    def layer_forward_flops(self, b: int) -> float:
        """One layer's forward FLOPs for ``b`` sequences."""
        s, h = self.seq_len, self.hidden
        return 2.0 * b * s * self.layer_matrix_params + 4.0 * b * s * s * h

    def logits_forward_flops(self, b: int) -> float:
        return 2.0 * b * self.seq_len * self.hidden * self.vocab

    def train_flops(self, b: int, layers: int, logits: bool, recompute: bool) -> float:
        """Training FLOPs (forward, backward, recomputation) of ``layers``
        layers (and the logit layer if ``logits``) for ``b`` sequences."""
        passes = 4.0 if recompute else 3.0
        f = passes * layers * self.layer_forward_flops(b)
        if logits:
            f += 3.0 * self.logits_forward_flops(b)
        return f

    def iteration_flops(self, batch: int, recompute: bool = True) -> float:
        """FLOPs of one iteration over ``batch`` sequences (the count
        published throughputs divide by time)."""
        return self.train_flops(batch, self.layers, True, recompute)

    def activation_bytes(self, b: int) -> float:
        """Bytes of one layer boundary's activations, ``b s h`` elements."""
        return float(b * self.seq_len * self.hidden * self.precision_bytes)


def _gpt(name: str, layers: int, hidden: int, heads: int, vocab: int, source: str):
    return TransformerShape(name, layers, hidden, heads, 2048, vocab, 4 * hidden, source=source)


def _llama(name: str, layers: int, hidden: int, heads: int, ffn: int, kv: int | None = None):
    return TransformerShape(
        name, layers, hidden, heads, 4096, 32000, ffn, mlp_matrices=3, kv_heads=kv,
        tied_embeddings=False, learned_positions=False,
        source="Touvron et al. 2023 (Llama 2), Table 1 and released configs",
    )  # fmt: skip


_GPT3 = "Brown et al. 2020 (GPT-3), Table 2.1"
_MEGATRON = "Narayanan et al. 2021 (SC'21), Table 1"

# fmt: off
SHAPES: dict[str, TransformerShape] = {
    s.name: s for s in (
        _gpt("gpt3_125m", 12, 768, 12, 50257, _GPT3),
        _gpt("gpt3_350m", 24, 1024, 16, 50257, _GPT3),
        _gpt("gpt3_760m", 24, 1536, 16, 50257, _GPT3),
        _gpt("gpt3_1.3b", 24, 2048, 24, 50257, _GPT3),
        _gpt("gpt3_2.7b", 32, 2560, 32, 50257, _GPT3),
        _gpt("gpt3_6.7b", 32, 4096, 32, 50257, _GPT3),
        _gpt("gpt3_13b", 40, 5120, 40, 50257, _GPT3),
        _gpt("gpt3_175b", 96, 12288, 96, 50257, _GPT3),
        _llama("llama2_7b", 32, 4096, 32, 11008),
        _llama("llama2_13b", 40, 5120, 40, 13824),
        _llama("llama2_70b", 80, 8192, 64, 28672, kv=8),
        _gpt("megatron_1.7b", 24, 2304, 24, 51200, _MEGATRON),
        _gpt("megatron_3.6b", 30, 3072, 32, 51200, _MEGATRON),
        _gpt("megatron_7.5b", 36, 4096, 32, 51200, _MEGATRON),
        _gpt("megatron_18.4b", 40, 6144, 48, 51200, _MEGATRON),
        _gpt("megatron_39.1b", 48, 8192, 64, 51200, _MEGATRON),
        _gpt("megatron_76.1b", 60, 10240, 80, 51200, _MEGATRON),
        _gpt("megatron_145.6b", 80, 12288, 96, 51200, _MEGATRON),
        _gpt("megatron_174.6b", 96, 12288, 96, 51200, "Narayanan et al. 2021, Table 2 (GPT-3)"),
        _gpt("megatron_310.1b", 96, 16384, 128, 51200, _MEGATRON),
        _gpt("megatron_529.6b", 105, 20480, 128, 51200, _MEGATRON),
        _gpt("megatron_1008b", 128, 25600, 160, 51200, _MEGATRON),
    )
}
# fmt: on


def get_shape(name: str) -> TransformerShape:
    """A transformer of :data:`SHAPES` by name."""
    try:
        return SHAPES[name]
    except KeyError:
        raise ValueError(f"unknown transformer {name!r}; known: {', '.join(SHAPES)}") from None
