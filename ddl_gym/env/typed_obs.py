"""GPU types in the env's observations, masks and actions (typed clusters).

Shared by both observation builders (``observation.ObsBuilder``, the Dict
observation, and ``set_observation.SetObsBuilder``, the size-free one). Two
things live here:

* **Placement feasibility from free counts, per type.** ``TypeFeasibility``
  answers, without building placements, whether the engine's packer finds a
  placement for a job within a level on one type (``Place(job, level,
  gpu_type=k)``) or by the engine's own rule (``gpu_type=None``: the tightest
  level over the job's accepted types; with ``mix_types`` a placement over the
  union of its accepted types). The conditions are ``observation``'s (some
  server / rack / the whole pool has that many GPUs free), applied to each
  type's own free counts (``engine.types``), so the mask equals
  ``Engine.check`` on typed clusters too.
* **The typed features** (only in the typed layout): ``MAX_TYPES`` type slots
  (the cluster's types in ``gpu_kinds`` order; unused slots are zeros), so one
  network can act on any cluster of up to ``MAX_TYPES`` types. An untyped
  cluster seen in the typed layout (``typed=True``) has one type in slot 0
  (speed 1, its whole free pool), so a typed agent runs on it too.

Per pending job and type slot (``TYPE_PENDING_FIELDS``): ``speed`` (the
job's predicted compute speed on the type, ``EngineView.type_speed``,
divided by its speed on its best accepted type; 0 for a type it does not
accept or an empty slot) and ``feasible_machine|rack|network`` (the mask of
``Place(job, level, gpu_type=slot)``). Per running job
(``TYPE_RUNNING_FIELDS``): ``speed`` on the type it runs on (same
normalisation; a mixed placement's slowest member), ``mixed`` (1 on a
placement over several types), ``on_type_t`` (one-hot of its type; zeros when
mixed). Per type slot, cluster-wide (``TYPE_GLOBAL_FIELDS``): ``present``,
``free`` (free GPUs of the type / its GPUs), ``share`` (its GPUs / the
cluster's), ``max_server_free`` (largest free block on one of its servers /
GPUs per server).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ddl_gym.engine import Engine, Job
from ddl_gym.topology import Cluster

# type slots of the typed layout: one network for any cluster of up to 8 types
# (openb's own node list has 7: P100, V100-16GB, V100-32GB, T4, A10, G2, G3)
MAX_TYPES = 8

TYPE_PENDING_FIELDS = ("speed", "feasible_machine", "feasible_rack", "feasible_network")
TYPE_RUNNING_FIELDS = ("speed", "mixed", *(f"on_type_{t}" for t in range(MAX_TYPES)))
TYPE_GLOBAL_FIELDS = ("present", "free", "share", "max_server_free")


def check_type_count(cluster: Cluster) -> None:
    """A cluster with more types than the typed layout's slots is an error."""
    n = len(cluster.gpu_kinds)
    if n > MAX_TYPES:
        raise ValueError(
            f"cluster has {n} GPU types ({', '.join(cluster.type_names)}); the env's "
            f"typed observation and actions have {MAX_TYPES} type slots (MAX_TYPES in "
            "ddl_gym/env/typed_obs.py): use at most that many types"
        )


class TypeFeasibility:
    """Which placements exist now, per GPU type and by the engine's rule.

    ``refresh()`` once per observation update, then ``blind(job)`` (the
    engine's ``gpu_type=None`` rule, as ``(machine, rack, network)``) and
    ``on_types(job)`` (``3 * n`` flags, type-major). On an untyped engine
    there is one type, the whole cluster.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        pools = engine.types
        self.pools = pools
        c = engine.cluster
        self.n = pools.n if pools is not None else 1
        self.mix = c.mix_types
        self.max_free = [0] * self.n
        self.max_rack = [0] * self.n
        self.type_free: Sequence[int] = [0]
        self._union: dict[tuple[int, ...], tuple[int, int, int]] = {}
        self._whole = (0, 0, 0)

    def refresh(self) -> None:
        e = self.engine
        pools = self.pools
        self._union.clear()
        if pools is None:
            self.max_free = [max(e.free)]
            self.max_rack = [max(e.rack_free)]
            self.type_free = [e.total_free]
            return
        self.max_free = [index.largest() for index in pools.index]  # (no scan)
        self.max_rack = [max(r) for r in pools.rack_free]
        self.type_free = pools.type_free
        if self.mix:
            self._whole = (max(e.free), max(e.rack_free), e.total_free)

    def _union_counts(self, accepts: tuple[int, ...]) -> tuple[int, int, int]:
        """(largest server, largest rack, total) free over ``accepts``' servers."""
        got = self._union.get(accepts)
        if got is None:
            pools = self.pools
            assert pools is not None
            if len(accepts) == self.n:
                got = self._whole
            else:
                per_type = [pools.rack_free[k] for k in accepts]
                racks = [sum(col) for col in zip(*per_type, strict=True)]
                got = (
                    max(self.max_free[k] for k in accepts),
                    max(racks),
                    sum(self.type_free[k] for k in accepts),
                )
            self._union[accepts] = got
        return got

    def blind(self, job: Job) -> tuple[bool, bool, bool]:
        """Whether ``Place(job, level)`` (no type: the engine's rule) is valid, per level."""
        g = job.gpus
        if self.pools is None:
            return (g <= self.max_free[0], g <= self.max_rack[0], g <= self.type_free[0])
        accepts = job.accepts
        if self.mix:
            mf, mr, tf = self._union_counts(accepts)
            return (g <= mf, g <= mr, g <= tf)
        fm = fr = fn = False
        for k in accepts:
            if g <= self.type_free[k]:
                fn = True
                if g <= self.max_rack[k]:
                    fr = True
                    if g <= self.max_free[k]:
                        return (True, True, True)
        return (fm, fr, fn)

    def pending(
        self, job: Job, typed: TypeFeatures | None, mask: list[bool], rows: list[float]
    ) -> tuple[bool, bool, bool]:
        """What an observation takes per pending job on a typed cluster:
        ``blind(job)``, and with ``typed`` (the typed layout) the job's typed
        place-action flags appended to ``mask`` (padded to ``MAX_TYPES``
        slots) and its typed row to ``rows``."""
        if typed is not None:
            on = self.on_types(job)
            mask += on
            mask += [False] * (3 * MAX_TYPES - len(on))
            rows += typed.pending_row(job, on)
        return self.blind(job)

    def on_types(self, job: Job) -> list[bool]:
        """``Place(job, level, gpu_type=k)`` valid, for k in types, level in
        machine, rack, network (type-major, ``3 * n`` flags)."""
        g = job.gpus
        out = [False] * (3 * self.n)
        accepts = job.accepts if self.pools is not None else (0,)
        for k in accepts:
            if g <= self.type_free[k]:
                i = 3 * k
                out[i + 2] = True
                if g <= self.max_rack[k]:
                    out[i + 1] = True
                    out[i] = g <= self.max_free[k]
        return out


class TypeFeatures:
    """The typed features of one engine (see the module docstring)."""

    def __init__(self, engine: Engine, feas: TypeFeasibility) -> None:
        check_type_count(engine.cluster)
        self.engine = engine
        self.feas = feas
        pools = engine.types
        c = engine.cluster
        self.n = feas.n
        self.G = c.gpus_per_server
        self.capacity = list(pools.capacity) if pools is not None else [c.num_gpus]
        self._inv_n = 1.0 / c.num_gpus
        # per (model, accepted types): normalised speed per type slot
        self._speeds: dict[tuple[str, tuple[int, ...]], tuple[float, ...]] = {}
        self._best: dict[tuple[str, tuple[int, ...]], float] = {}
        # a running job's row changes only when it starts again: job -> (start, row)
        self._running: dict[int, tuple[float, list[float]]] = {}
        self._pad = [0.0] * (len(TYPE_PENDING_FIELDS) * (MAX_TYPES - self.n))

    def speeds(self, job: Job) -> tuple[float, ...]:
        """Speed on each type slot / speed on the best accepted type (0 unaccepted)."""
        pools = self.engine.types
        key = (job.model, job.accepts)
        got = self._speeds.get(key)
        if got is None:
            if pools is None:
                got = (1.0,) + (0.0,) * (MAX_TYPES - 1)
                self._best[key] = 1.0
            else:
                raw = [1.0 / f for f in pools.factor[job.model]]
                best = max(raw[k] for k in job.accepts)
                ok = set(job.accepts)
                got = tuple(raw[k] / best if k in ok else 0.0 for k in range(self.n))
                got += (0.0,) * (MAX_TYPES - self.n)
                self._best[key] = best
            self._speeds[key] = got
        return got

    def pending_row(self, job: Job, on_types: list[bool]) -> list[float]:
        """``TYPE_PENDING_FIELDS`` per slot, slot-major (``MAX_TYPES * 4`` values)."""
        sp = self.speeds(job)
        out: list[float] = []
        for t in range(self.n):
            i = 3 * t
            out += (sp[t], _F[on_types[i]], _F[on_types[i + 1]], _F[on_types[i + 2]])
        out += self._pad  # empty slots
        return out

    def running_row(self, job: Job) -> list[float]:
        """``TYPE_RUNNING_FIELDS`` of a running job."""
        got = self._running.get(job.index)
        if got is not None and got[0] == job.started_at:
            return got[1]
        row = self._running_row(job)
        self._running[job.index] = (job.started_at, row)
        return row

    def _running_row(self, job: Job) -> list[float]:
        self.speeds(job)  # fills _best
        best = self._best[(job.model, job.accepts)]
        onehot = [0.0] * MAX_TYPES
        if self.engine.types is None:
            onehot[0] = 1.0
            return [1.0, 0.0, *onehot]
        kind = job.kind
        if kind >= 0:
            onehot[kind] = 1.0
        return [(1.0 / job.tfac) / best, _F[kind < 0], *onehot]

    def block(self, pending_rows: list[float], running: list[Job], K: int, M: int) -> np.ndarray:
        """The typed block (pending rows, running rows, type slots), float32,
        empty rows zeros (written by numpy, not converted value by value)."""
        fp, fr = len(TYPE_PENDING_FIELDS) * MAX_TYPES, len(TYPE_RUNNING_FIELDS)
        out = np.zeros(K * fp + M * fr + len(TYPE_GLOBAL_FIELDS) * MAX_TYPES, dtype=np.float32)
        out[: len(pending_rows)] = pending_rows
        at = K * fp
        if running:
            rows: list[float] = []
            for job in running:
                rows += self.running_row(job)
            out[at : at + len(rows)] = rows
        out[at + M * fr :] = self.global_rows()
        return out

    def global_rows(self) -> list[float]:
        """``TYPE_GLOBAL_FIELDS`` per slot, slot-major (``MAX_TYPES * 4`` values)."""
        feas = self.feas
        out: list[float] = []
        inv_g = 1.0 / self.G
        for t in range(MAX_TYPES):
            if t < self.n:
                cap = self.capacity[t]
                out += (
                    1.0,
                    feas.type_free[t] / cap,
                    cap * self._inv_n,
                    feas.max_free[t] * inv_g,
                )
            else:
                out += _ZERO4
        return out


_F = (0.0, 1.0)
_ZERO4 = (0.0, 0.0, 0.0, 0.0)
