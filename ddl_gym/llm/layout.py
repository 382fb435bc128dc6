"""A job's parallel layout: tensor (TP) x pipeline (PP) x data (DP) parallelism.

``Layout(tp, pp, dp)`` runs ``tp * pp * dp`` GPUs: every model replica is cut
into ``pp`` pipeline stages of ``tp`` GPUs each (Megatron-LM's tensor
parallelism inside a stage), and ``dp`` replicas train on slices of the global
batch. ``zero`` says how the data-parallel state is sharded (ZeRO stage 0-3,
Rajbhandari et al. 2020; FSDP is stage 3). ``micro_batches`` (per replica and
iteration) and ``micro_batch_size`` (sequences per micro-batch) fix the global
batch: ``dp * micro_batches * micro_batch_size`` sequences per iteration.

The trace column ``layout`` spells it ``tp8-pp4-dp16`` (optionally
``-z3`` for ZeRO stage 3, ``-m64`` for 64 micro-batches, ``-b2`` for a
micro-batch of 2 sequences), :func:`parse_layout`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """TP x PP x DP layout of one training job (see the module docstring).

    Attributes:
        tp: tensor-parallel size (GPUs per pipeline stage).
        pp: pipeline-parallel size (stages per replica).
        dp: data-parallel size (replicas).
        zero: ZeRO stage of the data-parallel state: 0 (plain all-reduce of
            the gradients), 1 and 2 (reduce-scatter + all-gather: the same
            volume), 3 (parameters sharded too: 1.5x the volume).
        micro_batches: micro-batches per replica per iteration (``m``).
        micro_batch_size: sequences per micro-batch (``b``).
        recompute: full activation recomputation (the forward pass runs
            twice: Megatron-LM's default at scale, Narayanan et al. 2021).
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    zero: int = 0
    micro_batches: int = 1
    micro_batch_size: int = 1
    recompute: bool = True

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "micro_batches", "micro_batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"layout {name} must be a positive integer, got {value!r}")
        if isinstance(self.zero, bool) or self.zero not in (0, 1, 2, 3):
            raise ValueError(f"layout zero must be a ZeRO stage 0, 1, 2 or 3, got {self.zero!r}")
        if not isinstance(self.recompute, bool):
            raise ValueError(f"layout recompute must be True or False, got {self.recompute!r}")

    @property
    def gpus(self) -> int:
        """GPUs the layout runs on: ``tp * pp * dp``."""
        return self.tp * self.pp * self.dp

    @property
    def batch(self) -> int:
        """Global batch in sequences per iteration."""
        return self.dp * self.micro_batches * self.micro_batch_size

    @property
    def bubble(self) -> float:
        """Pipeline bubble as a share of the ideal time, ``(pp - 1) / m``
        (the 1F1B schedule; Narayanan et al. 2021, section 2.2.1)."""
        return (self.pp - 1) / self.micro_batches

    def spec(self) -> str:
        """The trace spelling, e.g. ``tp8-pp4-dp16`` (extras only where they
        differ from :func:`parse_layout`'s defaults)."""
        text = f"tp{self.tp}-pp{self.pp}-dp{self.dp}"
        if self.zero:
            text += f"-z{self.zero}"
        if self.micro_batches != self.pp:  # (parse_layout's default m is pp)
            text += f"-m{self.micro_batches}"
        if self.micro_batch_size != 1:
            text += f"-b{self.micro_batch_size}"
        return text


_PART = re.compile(r"^(tp|pp|dp|z|m|b)(\d+)$")
_FIELD = {"tp": "tp", "pp": "pp", "dp": "dp", "z": "zero", "m": "micro_batches",
          "b": "micro_batch_size"}  # fmt: skip


def parse_layout(text: str, gpus: int | None = None) -> Layout:
    """A layout from its spelling ``tp8-pp4-dp16[-z3][-m64][-b2]``.

    Parts may come in any order; a missing ``tp``/``pp``/``dp`` is 1, a
    missing ``m`` is ``pp`` when ``pp > 1`` (the smallest that fills the
    pipeline once). With ``gpus`` given, ``tp * pp * dp`` must equal it.
    Raises ``ValueError`` naming the bad part.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"layout {text!r}: empty (expected e.g. 'tp8-pp4-dp16')")
    values: dict[str, int] = {}
    for part in text.strip().lower().split("-"):
        match = _PART.match(part)
        if match is None:
            raise ValueError(
                f"layout {text!r}: part {part!r} is not one of tpN, ppN, dpN, zN, mN, bN "
                "(e.g. 'tp8-pp4-dp16')"
            )
        key = _FIELD[match.group(1)]
        if key in values:
            raise ValueError(f"layout {text!r}: {match.group(1)} given twice")
        values[key] = int(match.group(2))
    if "micro_batches" not in values:
        values["micro_batches"] = values.get("pp", 1)
    try:
        layout = Layout(
            tp=values.get("tp", 1),
            pp=values.get("pp", 1),
            dp=values.get("dp", 1),
            zero=values.get("zero", 0),
            micro_batches=values["micro_batches"],
            micro_batch_size=values.get("micro_batch_size", 1),
        )
    except ValueError as err:
        raise ValueError(f"layout {text!r}: {err}") from None
    if gpus is not None and layout.gpus != gpus:
        raise ValueError(
            f"layout {text!r}: tp*pp*dp = {layout.gpus} GPUs but the job asks for {gpus}"
        )
    return layout
