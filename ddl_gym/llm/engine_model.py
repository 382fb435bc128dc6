"""The LLM model as the engine asks it: per job, the placement-independent
compute of an iteration and the communication a placement exposes.

An LLM job (a trace row with a ``layout``) runs ``iterations`` training
iterations of its layout (global steps). The engine keeps its convention of
single-GPU work (a job of ``gpus`` GPUs advances ``gpus / t_iter`` per
second), so it counts such a job's work as ``iterations * gpus`` and its
``t_compute`` as the iteration's compute and bubble
(``IterationTime.compute + bubble``, placement-independent); the exposed
communication (TP + PP + DP) comes from the placement's shape and the
uplink share, as for data-parallel jobs.
"""

from __future__ import annotations

from functools import lru_cache

from ddl_gym.llm.iteration import (
    DEFAULT_PARAMS,
    PEAK_FLOPS,
    LLMParams,
    canonical_shape,
    iteration_time,
    links_of,
)
from ddl_gym.llm.layout import Layout
from ddl_gym.llm.shapes import SHAPES
from ddl_gym.perf import Level, PerfModel, Shape
from ddl_gym.topology import Cluster


class LLMPerf:
    """Iteration times of LLM jobs on one (untyped) cluster's fabric, whose
    GPUs are ``gpu`` (a :data:`PEAK_FLOPS` name; default the calibrated
    A100)."""

    def __init__(
        self, cluster: Cluster, gpu: str = "A100-80GB", params: LLMParams = DEFAULT_PARAMS
    ) -> None:
        if gpu not in PEAK_FLOPS:
            raise ValueError(f"llm_gpu {gpu!r}: no peak known; known: {', '.join(PEAK_FLOPS)}")
        self.cluster = cluster
        self.peak = PEAK_FLOPS[gpu]
        self.params = params
        self._times = lru_cache(maxsize=65536)(self._times_uncached)
        self._perf = PerfModel(cluster)  # (its uplink share and latency rules)

    def _times_uncached(
        self, model: str, layout: Layout, shape: Shape, bw: float | None, alpha: float | None
    ) -> tuple[float, float]:
        c = self.cluster
        links = links_of(c.fabric, c.gpus_per_server, bw, alpha, self.params.link_eff)
        it = iteration_time(SHAPES[model], layout, shape, links, self.peak, self.params)
        return it.compute + it.bubble, it.tp + it.pp + it.dp

    def compute(self, model: str, layout: Layout) -> float:
        """Seconds of compute (and pipeline bubble) per iteration."""
        c = self.cluster
        shape = canonical_shape(layout.gpus, c.gpus_per_server, c.servers_per_rack)
        return self._times(model, layout, shape, None, None)[0]

    def exposed(
        self,
        model: str,
        layout: Layout,
        shape: Shape,
        uplink_bw: float | None = None,
        uplink_alpha: float | None = None,
    ) -> float:
        """Seconds of exposed communication per iteration on ``shape``."""
        if shape.r <= 1:  # the uplink is not crossed: keep the cache small
            uplink_bw = uplink_alpha = None
        return self._times(model, layout, shape, uplink_bw, uplink_alpha)[1]

    # -- predictions for policies (as ``PerfModel.slowdown`` for DP jobs) ----
    def tightest_shape(self, layout: Layout, level: Level) -> Shape | None:
        """Tightest shape of the layout's GPUs spanning exactly ``level`` on an
        empty cluster, whole TP groups per server (None: no such shape)."""
        c = self.cluster
        G, S, n, t = c.gpus_per_server, c.servers_per_rack, layout.gpus, layout.tp
        if n > c.num_gpus or t > G:
            return None
        servers = -(-n // G)
        racks = -(-servers // S)
        if level == Level.MACHINE:
            return Shape(n, n, 1, 1) if n <= G else None
        if level == Level.RACK:
            if servers > S:
                return None
            if servers == 1:  # split over two servers: halves of whole TP groups
                if S < 2 or n % (2 * t):
                    return None
                return Shape(n, n // 2, 2, 1)
            return Shape(n, G, servers, 1)
        if racks == 1:  # split over two racks
            if c.racks < 2 or n % (2 * t):
                return None
            half = n // 2
            return Shape(n, min(G, half), -(-half // G), 2)
        return Shape(n, G, S, racks)

    def slowdown(
        self, model: str, layout: Layout, level: Level, background: float = 0.0
    ) -> float | None:
        """Predicted iteration time over its compute at the tightest shape of
        ``level``, alone on its uplinks (None where no shape exists)."""
        shape = self.tightest_shape(layout, level)
        if shape is None:
            return None
        perf = self._perf
        bw, alpha = perf.uplink_share(background, 1), perf.uplink_latency(background)
        compute = self.compute(model, layout)
        return (compute + self.exposed(model, layout, shape, bw, alpha)) / compute
