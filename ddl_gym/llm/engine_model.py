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
from ddl_gym.perf import Shape
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
