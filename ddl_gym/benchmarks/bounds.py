"""A lower bound on the mean job completion time (JCT) any policy can reach.

``mean_jct_lower_bound(trace, cluster, congestion)`` is a number no schedule
of the engine can beat on that (trace, cluster, congestion), whatever the
policy (clairvoyant or not, preemptive or not). The leaderboard places every
policy between the best heuristic and it (``position``). Two valid bounds on
the *total* JCT, the larger taken:

(a) **Each job alone** (:func:`alone_run_times`). A job ``j`` of ``n`` GPUs
    and single-GPU work ``w = iterations * t_compute`` runs in the engine at
    ``n / t_iter`` iterations per second, so it needs at least
    ``p_j = iterations / (n / t_iter*)`` seconds of running, where ``t_iter*``
    is the least iteration time any placement of ``n`` GPUs on this cluster
    can get: every shape ``(n, g, s, r)`` a placement can have is tried
    (:func:`best_allreduce`), with the job alone on its rack uplinks (sharing
    only lowers its bandwidth) at the congestion's lightest background (a
    time-varying level is at least that light). Usually that is the tightest
    shape its size allows (one server, else fewest servers of one rack, else
    fewest racks); on fabrics where GPUs share a PCIe link (``shared``
    fabrics with ``gpu_link_sharing > 0``) a spread shape can be faster, and
    the bound takes it. Waiting, restore time after a preemption and slower
    placements only add, so ``JCT_j >= p_j`` and ``sum JCT >= sum p_j``. For
    a trace of one job run by any policy that places it at once at the best
    shape, ``JCT == p_j`` (``tests/test_bounds.py`` checks it).

(b) **Capacity (fluid) relaxation** (:func:`fluid_srpt_total`). Give job
    ``j`` the area ``a_j = n_j * p_j`` (GPU-seconds) and release date
    ``r_j`` (its arrival). Let ``phi_j(t)`` be the fraction of job ``j``
    completed per second in a cluster schedule: ``phi_j(t) <= 1 / p_j``
    while it holds its GPUs (it progresses at most at its best rate), 0
    otherwise, and it integrates to 1 between ``r_j`` and ``C_j``. Process
    ``j`` on a single machine of capacity ``G`` (the cluster's GPUs) at rate
    ``a_j * phi_j(t) <= n_j`` units per second: at any ``t`` the rates sum to
    at most the GPUs held, ``<= G``; ``j`` gets ``a_j`` units in all and ends
    at ``C_j``. So every cluster schedule gives a feasible preemptive
    schedule of jobs of processing time ``a_j / G`` with release dates
    ``r_j`` on one unit-speed machine with the same completion times (the
    relaxation drops the cap ``n_j`` on a job's rate and the lower bound
    ``p_j`` on its duration: it may only finish jobs sooner, which keeps it a
    relaxation). Preemptive shortest-remaining-processing-time (SRPT)
    minimises ``sum C_j`` over all such schedules (Schrage 1968: an exchange
    argument; the problem ``1 | r_j, pmtn | sum C_j``), hence
    ``sum JCT = sum (C_j - r_j) >= sum (C_j^SRPT - r_j)``.

The mean bound is ``max(sum p_j, sum (C^SRPT - r)) / number of jobs``. (a)
dominates on light loads, (b) when jobs queue for capacity. O(n log n) for
the SRPT pass plus one performance-model sweep per distinct (model, GPUs):
milliseconds per trace.

Scope: the closed-form performance model the benchmark runs (the engine's
default ``perf_source``); clusters with stragglers are refused (a restart
draws a new, possibly faster, gang factor, so no finite per-job rate bound
holds).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ddl_gym.perf import PerfModel, Shape
from ddl_gym.topology import Cluster, Congestion, get_cluster, get_congestion
from ddl_gym.traces import Trace


@dataclass(frozen=True)
class LowerBound:
    """The two bounds of one (trace, cluster, congestion), per job and summed.

    ``alone``: each job's least run time (s), in trace order; ``shapes``:
    the placement shape that reaches it; ``fluid_total``: the SRPT relaxation's
    total of ``completion - arrival`` (s)."""

    alone: np.ndarray
    shapes: tuple[Shape, ...]
    fluid_total: float

    @property
    def n_jobs(self) -> int:
        return len(self.alone)

    @property
    def alone_total(self) -> float:
        return float(self.alone.sum())

    @property
    def total(self) -> float:
        """Lower bound on the sum of JCTs (s)."""
        return max(self.alone_total, self.fluid_total)

    @property
    def mean(self) -> float:
        """Lower bound on the mean JCT (s); nan for an empty trace."""
        return self.total / self.n_jobs if self.n_jobs else math.nan

    @property
    def dominant(self) -> str:
        """Which bound is the larger: ``"alone"`` or ``"fluid"``."""
        return "fluid" if self.fluid_total > self.alone_total else "alone"


def lightest_background(congestion: Congestion) -> float:
    """The least background fraction the congestion level ever has."""
    if congestion.schedule is None:
        return congestion.background
    return min(f for _, f in congestion.schedule)


def _shapes(n: int, cluster: Cluster) -> list[Shape]:
    """Every shape ``(n, g, s, r)`` a placement of ``n`` GPUs can have, up to
    the racks spanned: per ``(g, s)`` the fewest racks that hold it and one
    more. Why that suffices: with ``g`` and ``s`` fixed, a ``hierarchical``
    or ``shared`` all-reduce costs more with every rack (its rack ring grows,
    the other levels do not change) and a ``ring`` one costs the same for
    every ``r >= 2``. A shape is realisable iff ``g <= G``, ``s <= S``,
    ``r <= R`` and ``g + (s - 1) + (r - 1) <= n <= g * s * r`` (one server
    of ``g`` GPUs, ``s`` servers in its rack, every other server and rack at
    least one GPU)."""
    G, S, R = cluster.gpus_per_server, cluster.servers_per_rack, cluster.racks
    out = []
    for g in range(1, min(G, n) + 1):
        for s in range(1, min(S, n - g + 1) + 1):
            r_min = max(1, -(-n // (g * s)))
            for r in (r_min, r_min + 1):
                if r <= R and g + (s - 1) + (r - 1) <= n <= g * s * r:
                    out.append(Shape(n=n, g=g, s=s, r=r))
    return out


def best_allreduce(
    perf: PerfModel, model: str, gpus: int, background: float
) -> tuple[float, Shape]:
    """The least all-reduce time (s) of ``model`` on ``gpus`` GPUs over every
    placement shape of the cluster, alone on its uplinks at ``background``,
    and a shape reaching it (the tightest on ties: the search goes from the
    most GPUs per server and fewest servers and racks). The iteration time
    grows with the all-reduce time whatever the compute time, so this shape
    also gives the least iteration time."""
    bw = perf.uplink_share(background, 1)
    alpha = perf.uplink_latency(background)
    best: tuple[float, Shape] | None = None
    # tightest first: on ties the first found is kept
    order = sorted(_shapes(gpus, perf.cluster), key=lambda sh: (sh.r, sh.s, -sh.g))
    for shape in order:
        ar = perf.allreduce_time(model, shape, bw, alpha)
        if best is None or ar < best[0]:
            best = (ar, shape)
    if best is None:
        raise ValueError(f"{gpus} GPUs do not fit the cluster ({perf.cluster.num_gpus} GPUs)")
    return best


def _as_jobs(trace: Trace | pd.DataFrame) -> pd.DataFrame:
    return trace.jobs if isinstance(trace, Trace) else trace


def alone_run_times(
    trace: Trace | pd.DataFrame,
    cluster: Cluster | str,
    congestion: str | float | Congestion = "none",
) -> tuple[np.ndarray, tuple[Shape, ...]]:
    """Each job's run time (s) alone at its best placement, as the engine
    computes it (``iterations / (gpus / t_iter)``), and that placement's shape."""
    the_cluster = get_cluster(cluster)
    if the_cluster.stragglers.enabled:
        raise ValueError(
            "no JCT lower bound with stragglers: a restarted gang draws a new compute-time "
            "factor, which may be below 1"
        )
    background = lightest_background(get_congestion(congestion))
    perf = PerfModel(the_cluster)
    jobs = _as_jobs(trace)
    gpus = jobs["gpus"].astype(int).tolist()
    models = [str(m) for m in jobs["model"].tolist()]
    iterations = jobs["iterations"].astype(float).tolist()
    t_compute = jobs["iter_time_s"].astype(float).tolist()
    cache: dict[tuple[str, int], tuple[float, Shape]] = {}
    out = np.empty(len(gpus))
    shapes = []
    for i, (n, model, its, tc) in enumerate(zip(gpus, models, iterations, t_compute, strict=True)):
        key = (model, n)
        found = cache.get(key)
        if found is None:
            found = cache[key] = best_allreduce(perf, model, n, background)
        ar, shape = found
        # the engine's own arithmetic (Engine._rate, Engine._renew)
        t_iter = tc + perf.exposed_comm(model, tc, ar)
        out[i] = its / (n / t_iter)
        shapes.append(shape)
    return out, tuple(shapes)


def fluid_srpt_total(
    arrivals: Sequence[float] | np.ndarray, sizes: Sequence[float] | np.ndarray
) -> float:
    """Sum over jobs of ``completion - release`` under preemptive SRPT on one
    unit-speed machine (job ``j`` released at ``arrivals[j]``, needing
    ``sizes[j]`` seconds of processing): the least such sum any preemptive
    schedule reaches."""
    if len(arrivals) != len(sizes):
        raise ValueError("arrivals and sizes differ in length")
    order = np.argsort(np.asarray(arrivals, dtype=float), kind="stable")
    rel = np.asarray(arrivals, dtype=float)[order]
    size = np.asarray(sizes, dtype=float)[order]
    heap: list[tuple[float, int]] = []  # (remaining, position in ``order``)
    t = -math.inf
    total = 0.0
    for k in range(len(rel)):
        r = rel[k]
        # run the shortest remaining jobs until this release
        while heap and t < r:
            rem, j = heap[0]
            if t + rem <= r:
                heapq.heappop(heap)
                t += rem
                total += t - rel[j]
            else:
                heapq.heapreplace(heap, (rem - (r - t), j))
                t = r
        t = max(t, r)
        heapq.heappush(heap, (float(size[k]), k))
    while heap:
        rem, j = heapq.heappop(heap)
        t += rem
        total += t - rel[j]
    return total


def jct_lower_bound(
    trace: Trace | pd.DataFrame,
    cluster: Cluster | str,
    congestion: str | float | Congestion = "none",
) -> LowerBound:
    """Both bounds of the module docstring for one (trace, cluster, congestion)."""
    the_cluster = get_cluster(cluster)
    alone, shapes = alone_run_times(trace, the_cluster, congestion)
    jobs = _as_jobs(trace)
    gpus = jobs["gpus"].astype(float).to_numpy()
    arrivals = jobs["arrival_s"].astype(float).to_numpy()
    fluid = fluid_srpt_total(arrivals, gpus * alone / the_cluster.num_gpus)
    return LowerBound(alone=alone, shapes=shapes, fluid_total=fluid)


def mean_jct_lower_bound(
    trace: Trace | pd.DataFrame,
    cluster: Cluster | str,
    congestion: str | float | Congestion = "none",
) -> float:
    """A lower bound (s) on the mean JCT of any schedule of ``trace`` on
    ``cluster`` under ``congestion`` (see the module docstring)."""
    return jct_lower_bound(trace, cluster, congestion).mean


def case_lower_bound(case, seed: int) -> float:
    """The mean-JCT lower bound of a benchmark case's run with ``seed`` (the
    case's workload drawn with that seed)."""
    return mean_jct_lower_bound(case.workload.build(seed), case.cluster(), case.congestion)


__all__ = [
    "LowerBound",
    "alone_run_times",
    "best_allreduce",
    "case_lower_bound",
    "fluid_srpt_total",
    "jct_lower_bound",
    "lightest_background",
    "mean_jct_lower_bound",
]
