"""Per-iteration time of a TP x PP x DP transformer job on a placement.

Terms (``docs/llm.md`` has the derivation and the calibration):

* **compute** of one micro-batch on the slowest stage: its ``ceil(l / pp)``
  layers (and the logit layer on the last stage), forward + backward (+ one
  more forward with recomputation), split over ``tp`` GPUs, at the GPU's
  sustained rate ``peak * mfu * h / (h + h_half)``: large GEMMs run near
  ``mfu`` of peak, and the memory-bound element-wise work (norms,
  softmax, dropout: per element, not per FLOP) weighs more at small ``h``.
* **TP**: Megatron-LM's tensor parallelism all-reduces ``b s h`` elements 2x
  in the forward and 2x in the backward pass of every layer (2x more when
  the forward is recomputed), ring all-reduces within the TP group.
* **PP**: each micro-batch sends its ``b s h`` activations forward and their
  gradient back across every stage boundary; across servers each of the
  ``tp`` ranks sends its ``1 / tp`` share on its own NIC rail (Megatron's
  scatter/gather, Narayanan et al. 2021 section 4.1).
* **pipeline**: 1F1B, ``(m + pp - 1)`` micro-batch slots on the slowest
  stage, i.e. the bubble ``(pp - 1) / m`` of the ideal time.
* **DP**: each GPU's gradient shard (its stage's parameters / tp) is
  all-reduced across the ``dp`` replicas after the backward pass (Megatron-LM
  2021 does not overlap it); ZeRO 1-2 reduce-scatter + all-gather (same
  volume), ZeRO 3 moves 1.5x and prefetches, overlapping the compute.

**Canonical mapping** of ranks to a placement: ranks are numbered TP fastest,
then PP, then DP, and fill the placement's servers in order. So a TP group
sits inside one server when the server's share is a multiple of ``tp``
(the packer's rule), consecutive stages share a server while they fit, and
DP replicas are spaced ``tp * pp`` ranks apart. Which link each group
crosses follows from the placement's :class:`~ddl_gym.perf.Shape` (``g`` GPUs
on the busiest server, ``s`` servers of a rack, ``r`` racks):

* inside a server: the fabric's ``gpu_link``;
* across servers of a rack: the server's NIC; with 8 rails, a GPU's share is
  ``nic / gpus_per_server`` (all ranks of a server talk at once);
* across racks: the job's share of the rack uplink (``uplink_bw``, the
  engine's contention share, as in ``PerfModel.allreduce_time``) and its
  latency ``uplink_alpha``.

Every bandwidth is derated by ``link_eff`` (what collectives achieve of the
nominal link rate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ddl_gym.llm.layout import Layout
from ddl_gym.llm.shapes import TransformerShape
from ddl_gym.perf import Shape
from ddl_gym.topology import Fabric

TFLOPS = 1e12

# Dense fp16/bf16 tensor-core peaks (vendor datasheets; no sparsity), by the
# GPU catalogue's names (ddl_gym/gpu_types.py).
PEAK_FLOPS: dict[str, float] = {
    "V100": 125 * TFLOPS,  # NVIDIA Tesla V100 datasheet (SXM2)
    "V100-16GB": 125 * TFLOPS,
    "V100-32GB": 125 * TFLOPS,
    "T4": 65 * TFLOPS,  # NVIDIA T4 datasheet
    "A10": 125 * TFLOPS,  # NVIDIA A10 datasheet
    "A100-40GB": 312 * TFLOPS,  # NVIDIA A100 datasheet (SXM)
    "A100-80GB": 312 * TFLOPS,
    "H100": 989 * TFLOPS,  # NVIDIA H100 datasheet (SXM5), dense BF16
}


@dataclass(frozen=True)
class LLMParams:
    """The model's stated and fitted constants.

    Defaults: ``mfu`` and ``h_half`` fitted to the published A100 throughputs
    (``ddl_gym.llm.calibration.fit``, docs/llm.md); ``link_eff`` 0.8 stated
    (NCCL's all-reduce bus bandwidth on NVSwitch and HDR InfiniBand is
    roughly 80% of the links' nominal rate; 1.0 moves no published row by more
    than 3 points, docs/llm.md).

    Attributes:
        mfu: share of the GPU's peak that large layers' GEMMs sustain.
        h_half: hidden size at which the sustained rate is half of that
            (memory-bound element-wise work per element of ``b s h``).
        link_eff: share of a link's nominal bandwidth a collective achieves.
        dp_overlap: share of the compute that hides the DP traffic (None:
            0 for ZeRO 0-2 as Megatron-LM 2021, 1 for ZeRO 3 which
            prefetches).
    """

    mfu: float = 0.6652
    h_half: float = 1183.0
    link_eff: float = 0.80
    dp_overlap: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.mfu <= 1:
            raise ValueError(f"LLMParams mfu must be in (0, 1], got {self.mfu}")
        if not self.h_half >= 0:
            raise ValueError(f"LLMParams h_half must be >= 0, got {self.h_half}")
        if not 0 < self.link_eff <= 1:
            raise ValueError(f"LLMParams link_eff must be in (0, 1], got {self.link_eff}")
        if self.dp_overlap is not None and not 0 <= self.dp_overlap <= 1:
            raise ValueError(f"LLMParams dp_overlap must be in [0, 1], got {self.dp_overlap}")


#: The calibrated constants (docs/llm.md).
DEFAULT_PARAMS = LLMParams()


@dataclass(frozen=True)
class IterationTime:
    """One iteration's time and its parts, in seconds.

    ``compute``: micro-batch compute of the slowest stage times ``m``;
    ``bubble``: the pipeline's idle slots ``(pp - 1)`` x a slot; ``tp`` and
    ``pp``: TP all-reduces and stage-to-stage sends on the critical path
    (``m + pp - 1`` slots); ``dp``: the exposed gradient synchronisation.
    """

    compute: float
    bubble: float
    tp: float
    pp: float
    dp: float

    @property
    def total(self) -> float:
        return self.compute + self.bubble + self.tp + self.pp + self.dp


def ring_time(k: int, nbytes: float, bw: float, alpha: float) -> float:
    """Ring all-reduce of ``nbytes`` over ``k`` members: ``2 (k-1)/k B / bw
    + 2 (k-1) alpha``."""
    if k <= 1:
        return 0.0
    return 2.0 * (k - 1) / k * nbytes / bw + 2.0 * (k - 1) * alpha


@dataclass(frozen=True)
class Links:
    """Per-GPU link rates a job sees (bytes/s, s per step)."""

    gpu_bw: float  # GPU link (one GPU's port)
    gpu_alpha: float
    nic_bw: float  # one server's NIC bandwidth (all rails)
    nic_alpha: float
    up_bw: float  # the job's share of a rack uplink (capped by the NIC)
    up_alpha: float
    gpus_per_server: int

    @property
    def rail_bw(self) -> float:
        """One GPU's share of its server's NIC."""
        return self.nic_bw / self.gpus_per_server

    @property
    def up_rail_bw(self) -> float:
        """One GPU's share of its server's uplink share."""
        return min(self.up_bw, self.nic_bw) / self.gpus_per_server


def links_of(
    fabric: Fabric,
    gpus_per_server: int,
    uplink_bw: float | None = None,
    uplink_alpha: float | None = None,
    link_eff: float = 1.0,
) -> Links:
    """The links of ``fabric`` derated by ``link_eff``; the uplink defaults
    to a lone job's (the NIC's bandwidth, the uplink's latency)."""
    up = fabric.nic.bandwidth if uplink_bw is None else uplink_bw
    alpha = fabric.uplink.latency if uplink_alpha is None else uplink_alpha
    return Links(
        fabric.gpu_link.bandwidth * link_eff,
        fabric.gpu_link.latency,
        fabric.nic.bandwidth * link_eff,
        fabric.nic.latency,
        up * link_eff,
        alpha,
        gpus_per_server,
    )


def _crossing(size: int, shape: Shape) -> int:
    """Widest level (0 server, 1 rack, 2 racks) a block of ``size``
    consecutive ranks crosses under the canonical mapping of ``shape``."""
    g, per_rack = shape.g, shape.g * shape.s
    if size <= g and g % size == 0:
        return 0
    if shape.r > 1 and (size > per_rack or per_rack % size != 0):
        return 2
    return 1 if shape.s > 1 or shape.r > 1 else 0


def iteration_time(
    model: TransformerShape,
    layout: Layout,
    shape: Shape,
    links: Links,
    peak_flops: float,
    params: LLMParams = DEFAULT_PARAMS,
) -> IterationTime:
    """Seconds of one training iteration of ``model`` with ``layout`` on a
    placement of shape ``shape`` (see the module docstring)."""
    tp, pp, dp = layout.tp, layout.pp, layout.dp
    b, m = layout.micro_batch_size, layout.micro_batches
    if shape.n != layout.gpus:
        raise ValueError(f"layout {layout.spec()} runs {layout.gpus} GPUs, placement has {shape.n}")
    # -- compute of one micro-batch on the slowest stage (the last: logits)
    stage_layers = -(-model.layers // pp)
    flops = model.train_flops(b, stage_layers, True, layout.recompute) / tp
    h = model.hidden
    rate = peak_flops * params.mfu * h / (h + params.h_half)
    t_mb = flops / rate
    # -- TP: 4 all-reduces per layer (6 with recomputation) per micro-batch
    act = model.activation_bytes(b)
    level_tp = _crossing(tp, shape)
    if tp > 1:
        bw, alpha = (
            (links.gpu_bw, links.gpu_alpha),
            (links.rail_bw, links.nic_alpha),
            (links.up_rail_bw, links.up_alpha),
        )[level_tp]
        n_ar = 6 if layout.recompute else 4
        t_tp = stage_layers * n_ar * ring_time(tp, act, bw, alpha)
    else:
        t_tp = 0.0
    # -- PP: activations forward and gradients back, per micro-batch
    if pp > 1:
        level_pp = _crossing(tp * pp, shape)
        if level_pp == 0:
            t_p2p = act / links.gpu_bw + links.gpu_alpha
        elif level_pp == 1 or shape.r <= 1:
            t_p2p = act / tp / links.rail_bw + links.nic_alpha
        else:
            t_p2p = act / tp / links.up_rail_bw + links.up_alpha
        t_pp = 2.0 * t_p2p
    else:
        t_pp = 0.0
    slots = m + pp - 1
    # -- DP: each GPU's gradient shard across the dp replicas
    t_dp = 0.0
    if dp > 1:
        # the largest stage's parameters (layers + embeddings), over tp
        stage_params = stage_layers * model.layer_params + model.embedding_params
        shard = stage_params / tp * model.precision_bytes
        if layout.zero == 3:
            shard *= 1.5  # all-gather fwd + bwd, reduce-scatter (ZeRO, section 7)
        replica = tp * pp
        g = shape.g
        k = max(1, g // replica) if replica <= g else 1  # DP peers on a server
        t_dp = ring_time(k, shard, links.gpu_bw, links.gpu_alpha)
        if shape.n > g:  # the DP ring leaves the server: each server's NIC carries
            # the ring traffic of every DP group it holds a member of; across
            # racks the ring's slowest hop is the job's uplink share
            groups = min(g, replica)
            servers = -(-dp // k)
            bw = links.nic_bw if shape.r <= 1 else min(links.nic_bw, links.up_bw)
            t_dp += 2.0 * (dp - 1) / dp * groups * shard / bw
            t_dp += 2.0 * (servers - shape.r) * links.nic_alpha
            t_dp += 2.0 * (shape.r - 1) * links.up_alpha
        overlap = params.dp_overlap
        if overlap is None:
            overlap = 1.0 if layout.zero == 3 else 0.0
        t_dp = max(0.0, t_dp - overlap * slots * t_mb)
    return IterationTime(
        compute=m * t_mb,
        bubble=(pp - 1) * t_mb,
        tp=slots * t_tp,
        pp=slots * t_pp,
        dp=t_dp,
    )


def tflops_per_gpu(model: TransformerShape, layout: Layout, seconds: float) -> float:
    """Achieved TFLOP/s per GPU as published throughputs count it: the
    iteration's FLOPs (Narayanan et al. 2021's formula) over time and GPUs."""
    return model.iteration_flops(layout.batch, layout.recompute) / (seconds * layout.gpus) / TFLOPS


def canonical_shape(gpus: int, gpus_per_server: int, servers_per_rack: int) -> Shape:
    """The tightest placement of ``gpus`` GPUs on an empty cluster: full
    servers, full racks."""
    g = min(gpus, gpus_per_server)
    servers = math.ceil(gpus / gpus_per_server)
    return Shape(gpus, g, min(servers, servers_per_rack), math.ceil(servers / servers_per_rack))
