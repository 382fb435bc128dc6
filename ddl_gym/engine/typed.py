"""GPU types in the engine: which servers a job may use and how fast it runs.

Only a typed cluster (``Cluster.gpu_kinds``) builds a :class:`TypePools`; an
untyped one never reaches this module, so its runs are exactly as before.

* **Accepted types.** A job accepts the types its trace's ``gpu_types`` cell
  names (``|``-separated catalogue, openb or Gavel names; empty: any type)
  that the cluster has and, where its trace gives ``gpu_mem_gib``, whose
  memory holds it (a type of unknown memory is kept). A job no accepted type
  can ever hold is an error naming its row, before the run.
* **Placement.** Each type keeps its own free counts (zero on other types'
  servers) and its own :class:`~ddl_gym.engine.packer.FreeIndex`, so a
  placement on one type is the packer's best fit over that type's servers.
  Without a type the engine takes the tightest level over the job's accepted
  types, ties to the type listed first in ``gpu_kinds``; with ``mix_types``
  a job that accepts every type is placed over the whole cluster, one that
  accepts some over their union.
* **Speed.** A job on type ``k`` computes ``iter_time_s /
  relative_speed(model, k)`` per iteration (:mod:`ddl_gym.type_speed`;
  ``iter_time_s`` read as the V100 time) and all-reduces inside a server over
  type ``k``'s GPU link. A mixed placement runs at its slowest member's
  compute speed, over the slowest member's GPU link.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ddl_gym.engine.job import Job
from ddl_gym.engine.packer import FreeIndex, find_placement
from ddl_gym.gpu_types import get_gpu_type, gpu_type_set
from ddl_gym.perf import Level, PerfModel
from ddl_gym.topology import Cluster, Link
from ddl_gym.traces import Trace, TraceError
from ddl_gym.type_speed import relative_speed

MIXED = -1  # ``Job.kind`` of a placement over several types


class TypePools:
    """The engine's per-type state (see the module docstring)."""

    def __init__(self, cluster: Cluster, perf: PerfModel, trace: Trace) -> None:
        self.cluster = cluster
        kinds = cluster.gpu_kinds
        self.names = cluster.type_names
        self.n = len(kinds)
        self.server_kind = cluster.server_kind
        self.capacity = cluster.type_capacities()
        # per type: its servers' largest capacity (what one server can hold)
        self.largest_server = [0] * self.n
        for k, g in zip(self.server_kind, cluster.capacities(), strict=True):
            self.largest_server[k] = max(self.largest_server[k], g)
        models = sorted(set(trace.jobs["model"]))
        # compute-time factor (1 / relative speed) per model and type
        self.factor: dict[str, tuple[float, ...]] = {
            m: tuple(1.0 / relative_speed(m, k.name, k.speed) for k in kinds) for m in models
        }
        # one perf model per distinct GPU link (types without one share ``perf``)
        self._perf_of_link: dict[Link, PerfModel] = {}
        self.perf_of_kind = [self._perf_for(k.gpu_link, perf) for k in kinds]
        self._base_perf = perf
        self.all_kinds = tuple(range(self.n))
        self._accepts = self._read_accepts(trace)
        self.gpu_seconds = [0.0] * self.n

    def _perf_for(self, link: Link | None, base: PerfModel) -> PerfModel:
        if link is None or link == self.cluster.fabric.gpu_link:
            return base
        pm = self._perf_of_link.get(link)
        if pm is None:
            fabric = replace(self.cluster.fabric, gpu_link=link)
            pm = self._perf_of_link[link] = PerfModel(replace(self.cluster, fabric=fabric))
        return pm

    def _read_accepts(self, trace: Trace) -> list[tuple[int, ...]]:
        """Each job's accepted type indices (checked: some type can hold it)."""
        jobs = trace.jobs
        n_jobs = len(jobs)
        specs = jobs["gpu_types"].tolist() if "gpu_types" in jobs else [""] * n_jobs
        mems = (
            jobs["gpu_mem_gib"].astype(float).tolist()
            if "gpu_mem_gib" in jobs
            else [math.nan] * n_jobs
        )
        gpus = jobs["gpus"].astype(int).tolist()
        index = {name: k for k, name in enumerate(self.names)}
        memory = [get_gpu_type(name).memory_gib for name in self.names]
        cache: dict[tuple[str, float], tuple[int, ...]] = {}
        out: list[tuple[int, ...]] = []
        src = trace.source or trace.name
        for i, (spec, mem) in enumerate(zip(specs, mems, strict=True)):
            spec = "" if spec is None or (isinstance(spec, float) and math.isnan(spec)) else spec
            key = (str(spec), mem)
            accepts = cache.get(key)
            if accepts is None:
                accepts = cache[key] = self._accepts_of(
                    str(spec), mem, index, memory, src, trace, i
                )
            if not self._can_hold(accepts, gpus[i]):
                names = "|".join(self.names[k] for k in accepts) or "none"
                raise TraceError(
                    f"{src}: {trace.row_label(i)}, field 'gpus': job asks for {gpus[i]} GPUs "
                    f"but its accepted GPU types ({names}) hold only "
                    f"{self._most(accepts)} in this cluster"
                )
            out.append(accepts)
        return out

    def _accepts_of(
        self,
        spec: str,
        mem: float,
        index: dict[str, int],
        memory: list[float | None],
        src: str,
        trace: Trace,
        i: int,
    ) -> tuple[int, ...]:
        if spec.strip():
            try:
                wanted = gpu_type_set(spec)
            except KeyError as e:
                raise TraceError(
                    f"{src}: {trace.row_label(i)}, field 'gpu_types': {e.args[0]}"
                ) from None
            accepts = [k for k, name in enumerate(self.names) if name in wanted]
        else:
            accepts = list(self.all_kinds)
        if mem == mem:  # (known memory need)
            accepts = [k for k in accepts if (m := memory[k]) is None or m >= mem]
        return tuple(accepts)

    def _most(self, accepts: tuple[int, ...]) -> int:
        """GPUs the largest placement over ``accepts`` can have."""
        if self.cluster.mix_types:
            return sum(self.capacity[k] for k in accepts)
        return max((self.capacity[k] for k in accepts), default=0)

    def _can_hold(self, accepts: tuple[int, ...], gpus: int) -> bool:
        return gpus <= self._most(accepts)

    def setup_jobs(self, jobs: list[Job]) -> None:
        for job, accepts in zip(jobs, self._accepts, strict=True):
            job.accepts = accepts

    # -- free GPUs per type ----------------------------------------------------
    def reset(self, free: list[int]) -> None:
        c = self.cluster
        S = c.servers_per_rack
        self.free = [[0] * len(free) for _ in range(self.n)]
        self.rack_free = [[0] * c.racks for _ in range(self.n)]
        for s, f in enumerate(free):
            k = self.server_kind[s]
            self.free[k][s] = f
            self.rack_free[k][s // S] += f
        self.index = [
            FreeIndex(self.free[k], self.rack_free[k], S, c.gpus_per_server) for k in range(self.n)
        ]
        self.type_free = list(self.capacity)
        self.gpu_seconds = [0.0] * self.n

    def moved(self, server: int, old: int, new: int) -> None:
        """Server ``server``'s free count went from ``old`` to ``new``."""
        k = self.server_kind[server]
        self.index[k].move(server, old, new)
        self.free[k][server] = new
        self.rack_free[k][server // self.cluster.servers_per_rack] += new - old
        self.type_free[k] += new - old

    # -- placement -------------------------------------------------------------
    def find(
        self, job: Job, level: Level, kind: int | None, whole: FreeIndex
    ) -> list[tuple[int, int]] | None:
        """The placement the engine gives ``job`` within ``level`` on type
        ``kind`` (None: the rule of the module docstring)."""
        gpus = job.gpus
        if kind is not None:
            if self.type_free[kind] < gpus:
                return None
            return self.index[kind].find(gpus, level)
        accepts = job.accepts
        if self.cluster.mix_types:
            if len(accepts) == self.n:
                return whole.find(gpus, level)
            if sum(self.type_free[k] for k in accepts) < gpus:
                return None
            return self._find_union(accepts, gpus, level)
        for lv in (Level.MACHINE, Level.RACK, Level.NETWORK):
            if lv > level:
                break
            for k in accepts:
                if self.type_free[k] >= gpus:
                    p = self.index[k].find(gpus, lv)
                    if p is not None:
                        return p
        return None

    def _find_union(
        self, accepts: tuple[int, ...], gpus: int, level: Level
    ) -> list[tuple[int, int]] | None:
        """The packer's placement over the servers of ``accepts`` (a scan:
        only mixed placements over some types come here)."""
        c = self.cluster
        S = c.servers_per_rack
        free = [0] * c.num_servers
        rack_free = [0] * c.racks
        for k in accepts:
            for s, f in enumerate(self.free[k]):
                if f:
                    free[s] = f
                    rack_free[s // S] += f
        return find_placement(free, rack_free, S, c.gpus_per_server, gpus, level)

    def why_not_kind(self, job: Job, kind: object) -> str | None:
        """Why ``job`` may not be placed on type ``kind`` (None: it may)."""
        if not isinstance(kind, int) or not 0 <= kind < self.n:
            return f"unknown GPU type index {kind!r} (the cluster's types: {self._listing()})"
        if kind not in job.accepts:
            names = "|".join(self.names[k] for k in job.accepts)
            return f"job {job.job_id} does not accept GPU type {self.names[kind]} (accepts {names})"
        return None

    def _listing(self) -> str:
        return ", ".join(f"{k}={name}" for k, name in enumerate(self.names))

    # -- a start and a stop ----------------------------------------------------
    def started(self, job: Job, placement: tuple[tuple[int, int], ...]) -> None:
        """Set the job's type, compute factor and perf model for ``placement``."""
        sk = self.server_kind
        first = sk[placement[0][0]]
        factors = self.factor[job.model]
        if all(sk[s] == first for s, _ in placement):
            job.kind = first
            job.tfac = factors[first]
            job.perf = self.perf_of_kind[first]
            return
        kinds = sorted({sk[s] for s, _ in placement})
        job.kind = MIXED
        job.tfac = max(factors[k] for k in kinds)
        job.perf = self._slowest_link_perf(kinds)

    def _slowest_link_perf(self, kinds: list[int]) -> PerfModel:
        fabric_link = self.cluster.fabric.gpu_link
        links = [self.cluster.gpu_kinds[k].gpu_link or fabric_link for k in kinds]
        slowest = Link(min(x.bandwidth for x in links), max(x.latency for x in links))
        return self._perf_for(slowest, self._base_perf)

    def stopped(self, job: Job, held: float) -> None:
        """Count the GPU-seconds ``job`` held on each type."""
        sk = self.server_kind
        for s, g in job.placement:
            self.gpu_seconds[sk[s]] += g * held
