"""Iteration time of a data-parallel job on a placement, under network load.

For a job of model ``m`` with single-GPU iteration time ``t_c`` on a placement
that spans at most ``g`` GPUs of one server, ``s`` servers of one rack and
``r`` racks (``n`` GPUs in all)::

    t_iter  = t_c + exposed
    exposed = max(0, t_allreduce - overlap * backward_share(m) * t_c)

All-reduce of ``B`` gradient bytes (the catalogue's, times the fabric's
``comm_scale`` for the model) in ``nb`` buckets costs, per ring of ``k``
members over a link of bandwidth ``bw`` and latency ``alpha``::

    ring(k, bw, alpha) = 2 (k-1)/k * B / bw + nb * 2 (k-1) * alpha

* ``"ring"`` fabrics run one flat ring over all ``n`` GPUs, paced by the
  slowest level the placement spans (GPU link, NIC, rack uplink).
* ``"hierarchical"`` fabrics sum one ring per level: ``ring(g)`` on the GPU
  link, ``ring(s)`` on the NIC and ``ring(r)`` across racks. After the
  reduce-scatter inside a server its ``g`` GPUs share the NIC, so every level
  moves the full ``B`` through its link.
* ``"shared"`` fabrics also go level by level, but a server's GPUs share its
  links, so each level costs what its *busiest* server (``g`` GPUs) pays::

      gpu level:  2 (g-1)/g * B * g**h      / gpu_bw + nb 2 (g-1) alpha_gpu
      NIC level:  2 (n-1)/n * B * g**x      / nic_bw + nb 2 (s-1) alpha_nic
      racks:      2 (r-1)/r * B * (g s)**x  / up_bw  + nb 2 (r-1) alpha_up

  ``h = gpu_link_sharing`` (0: switched, 1: one PCIe host link) and
  ``x = nic_sharing`` (0: reduced inside the server first, 1: every GPU's
  traffic crosses the NIC). The NIC level is a flat ring's: each of its
  ``2 (n-1)`` steps moves ``B / n`` through every server's NIC (NCCL's ring
  over all GPUs of the job), so 2+2 GPUs cost more on the NIC than 1+1. With
  ``h > 0`` the cost is not monotone in servers: 4+4 GPUs can beat 8 on one
  PCIe server; 8+1 costs what 8 does plus the NIC ring.

Across racks the bandwidth is the job's share of the rack uplinks (the engine
computes it from the jobs that share each uplink and the background traffic,
see ``uplink_share``), capped by the NIC; the latency is the uplink's, inflated
by ``1 / (1 - background)`` for queueing at congested switches.

Everything here is closed-form and cached per (model, shape, uplink state), so
the engine can call it on every start, stop and rate change.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from functools import lru_cache

from ddl_gym.profiles import bucket_sizes, get_profile
from ddl_gym.topology import Cluster


class Level(IntEnum):
    """How far a job's GPUs spread: one server, one rack, several racks."""

    MACHINE = 0
    RACK = 1
    NETWORK = 2


@dataclass(frozen=True)
class Shape:
    """What the performance model needs of a placement.

    ``g``: most GPUs on one server; ``s``: most servers in one rack;
    ``r``: racks spanned; ``n``: GPUs in all.
    """

    n: int
    g: int
    s: int
    r: int

    @property
    def level(self) -> Level:
        if self.r > 1:
            return Level.NETWORK
        if self.s > 1:
            return Level.RACK
        return Level.MACHINE


def shape_of(placement: Iterable[tuple[int, int]], servers_per_rack: int) -> Shape:
    """Shape of a placement given as ``[(server, gpus), ...]``."""
    per_rack: dict[int, int] = {}
    n = g = 0
    for server, gpus in placement:
        n += gpus
        g = max(g, gpus)
        rack = server // servers_per_rack
        per_rack[rack] = per_rack.get(rack, 0) + 1
    return Shape(n=n, g=g, s=max(per_rack.values()), r=len(per_rack))


def _ring(k: int, nbytes: float, nbuckets: int, bw: float, alpha: float) -> float:
    if k <= 1:
        return 0.0
    return 2.0 * (k - 1) / k * nbytes / bw + nbuckets * 2.0 * (k - 1) * alpha


def _ring_nic(n: int, s: int, nbytes: float, nbuckets: int, bw: float, alpha: float) -> float:
    """The NIC's part of a flat ring over ``n`` GPUs on ``s`` servers: every
    one of its ``2 (n-1)`` steps moves ``B / n`` through each server's NIC;
    a step's latency is paid once per server hop."""
    if s <= 1:
        return 0.0
    return 2.0 * (n - 1) / n * nbytes / bw + nbuckets * 2.0 * (s - 1) * alpha


class PerfModel:
    """Iteration times of jobs on one cluster's fabric."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.fabric = cluster.fabric
        self.uplink_capacity = cluster.uplink_capacity
        # Cache per instance: the fabric is part of the key implicitly.
        self._allreduce = lru_cache(maxsize=65536)(self._allreduce_uncached)

    # -- uplinks -----------------------------------------------------------
    def uplink_latency(self, background: float) -> float:
        return self.fabric.uplink.latency / (1.0 - background)

    def uplink_share(self, background: float, jobs_on_uplink: int) -> float:
        """Bandwidth one of ``jobs_on_uplink`` cross-rack jobs gets on an uplink."""
        free = self.uplink_capacity * (1.0 - background)
        return min(self.fabric.nic.bandwidth, free / max(1, jobs_on_uplink))

    # -- all-reduce --------------------------------------------------------
    def _allreduce_uncached(
        self, model: str, n: int, g: int, s: int, r: int, uplink_bw: float, uplink_alpha: float
    ) -> float:
        if n <= 1:
            return 0.0
        f = self.fabric
        buckets = bucket_sizes(model, f.bucket_bytes)
        # A fitted fabric may say the model moves more or fewer bytes than its
        # fp32 parameters; the bucket count (latency term) stays the catalogue's.
        nbytes = float(sum(buckets)) * f.comm_scale_of(model)
        nb = len(buckets)
        if f.algorithm == "ring":
            if r > 1:
                bw, alpha = uplink_bw, uplink_alpha
            elif s > 1:
                bw, alpha = f.nic.bandwidth, f.nic.latency
            else:
                bw, alpha = f.gpu_link.bandwidth, f.gpu_link.latency
            return _ring(n, nbytes, nb, bw, alpha)
        if f.algorithm == "shared":
            h, x = f.gpu_link_sharing, f.nic_sharing
            return (
                _ring(g, nbytes * g**h, nb, f.gpu_link.bandwidth, f.gpu_link.latency)
                + _ring_nic(n, s, nbytes * g**x, nb, f.nic.bandwidth, f.nic.latency)
                + _ring(r, nbytes * (g * s) ** x, nb, uplink_bw, uplink_alpha)
            )
        return (
            _ring(g, nbytes, nb, f.gpu_link.bandwidth, f.gpu_link.latency)
            + _ring(s, nbytes, nb, f.nic.bandwidth, f.nic.latency)
            + _ring(r, nbytes, nb, uplink_bw, uplink_alpha)
        )

    def allreduce_time(
        self,
        model: str,
        shape: Shape,
        uplink_bw: float | None = None,
        uplink_alpha: float | None = None,
    ) -> float:
        """Seconds of one iteration's gradient all-reduce (unhidden)."""
        if shape.r <= 1:  # keep the cache small: uplink state is irrelevant
            return self._allreduce(model, shape.n, shape.g, shape.s, shape.r, 0.0, 0.0)
        if uplink_bw is None:
            uplink_bw = self.uplink_share(0.0, 1)
        if uplink_alpha is None:
            uplink_alpha = self.uplink_latency(0.0)
        return self._allreduce(model, shape.n, shape.g, shape.s, shape.r, uplink_bw, uplink_alpha)

    def exposed_comm(self, model: str, t_compute: float, allreduce: float) -> float:
        """All-reduce time the backward pass cannot hide."""
        hidden = self.fabric.overlap * get_profile(model).backward_share * t_compute
        return max(0.0, allreduce - hidden)

    def iter_time(
        self,
        model: str,
        t_compute: float,
        shape: Shape,
        uplink_bw: float | None = None,
        uplink_alpha: float | None = None,
    ) -> float:
        """Seconds per iteration of a job on ``shape``."""
        ar = self.allreduce_time(model, shape, uplink_bw, uplink_alpha)
        return t_compute + self.exposed_comm(model, t_compute, ar)

    # -- predictions for policies and observations -------------------------
    def tightest_shape(self, gpus: int, level: Level) -> Shape | None:
        """Tightest shape of ``gpus`` GPUs spanning exactly ``level`` on an empty cluster."""
        c = self.cluster
        G, S = c.gpus_per_server, c.servers_per_rack
        if gpus > c.num_gpus:
            return None
        servers = -(-gpus // G)
        racks = -(-servers // S)
        if level == Level.MACHINE:
            return Shape(gpus, gpus, 1, 1) if gpus <= G else None
        if level == Level.RACK:
            if servers > S:
                return None
            if servers == 1:  # split over two servers of the rack
                if gpus < 2 or S < 2:
                    return None
                return Shape(gpus, -(-gpus // 2), 2, 1)
            return Shape(gpus, G, servers, 1)
        if racks == 1:  # split over two racks
            if gpus < 2 or c.racks < 2:
                return None
            half = -(-gpus // 2)
            return Shape(gpus, min(G, half), -(-half // G), 2)
        return Shape(gpus, G, S, racks)

    def slowdown(
        self,
        model: str,
        gpus: int,
        level: Level,
        background: float = 0.0,
        t_compute: float | None = None,
    ) -> float | None:
        """Predicted ``t_iter / t_compute`` at the tightest shape of ``level``.

        The job is assumed alone on its uplinks; ``None`` where no shape of
        that level exists for ``gpus`` on this cluster.
        """
        shape = self.tightest_shape(gpus, level)
        if shape is None:
            return None
        if t_compute is None:
            t_compute = get_profile(model).iter_time_s
        bw = self.uplink_share(background, 1)
        alpha = self.uplink_latency(background)
        return self.iter_time(model, t_compute, shape, bw, alpha) / t_compute
