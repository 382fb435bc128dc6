"""The size-free ("set") observation of ``SetClusterEnv`` (``set_env``).

The default observation (``observation``) has one entry per server and per rack
and a window of the first ``K`` queued jobs, so its shape depends on the
cluster and a policy trained on one cluster cannot run on another. This one
is a *set of candidates* padded to a fixed number of rows, and its shape
depends only on the padding (``K`` pending rows, ``M`` running rows), never
on the cluster: every per-server or per-rack quantity is pooled into a
fraction (largest hole / server size, share of free servers, ...). A
permutation-equivariant network (``ddl_gym.agents.set_policy``) scores every row with
the same weights, so it runs on any cluster and any queue length.

Which pending jobs become rows, when more than ``K`` wait: half the rows go
to the longest-waiting jobs (so starvation and delay timers are visible),
the rest to the jobs asking the fewest GPUs (the ones that can be packed
now), each group in arrival order. Every row carries features of its own job
only, plus its rank in the queue as a fraction, so the observation (as a
set) does not depend on row order. What the rows miss is summarised in the
global features (share of the queue not shown, GPUs asked by the whole
queue as a fraction of the cluster).

No feature uses information a real scheduler would not have: nothing about
jobs that have not arrived, no count of the episode's jobs, no job sizes
unless ``clairvoyant``. The mask does not either: WAIT is refused exactly
when no job runs and some wait (the cluster must not idle with a queue), not
"when no event is due", which would reveal whether more jobs will arrive.

The preemption guard: at most ``preempt_budget`` preemptions per decision
instant (counted from the engine's state, see ``preempted_now``), on top of
the engine-level rule that a job started at this instant cannot be preempted
at it. Preempting a job and placing it again at the same instant is a
migration (it pays the checkpoint-restore cost).

GPU types (typed clusters): the mask of a place action follows the job's
accepted types and each type's free counts (``typed_obs.TypeFeasibility``),
whatever the layout. The typed layout (``SetObsConfig.typed``) appends, after
the untyped observation, a typed block (``split_typed_set_obs`` cuts it): per
pending row ``MAX_TYPES x TYPE_PENDING_FIELDS`` (speed per type, normalised by
the job's best accepted type, and feasibility per type and level), per
running row ``TYPE_RUNNING_FIELDS``, and per type slot ``TYPE_GLOBAL_FIELDS``
(fraction free, share of the cluster, largest free block); and the actions
gain ``3 * MAX_TYPES`` typed place actions per pending row (``actions``). The
untyped prefix keeps its meaning, so a type-blind network reads it as it is.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from ddl_gym.engine import Engine, Job
from ddl_gym.env.observation import LevelSlowdowns, _model_features
from ddl_gym.env.typed_obs import (
    MAX_TYPES,
    TYPE_GLOBAL_FIELDS,
    TYPE_PENDING_FIELDS,
    TYPE_RUNNING_FIELDS,
    TypeFeasibility,
    TypeFeatures,
)

SET_PENDING_FIELDS = (
    "present",
    "gpus_share",  # g / cluster GPUs
    "gpus_server",  # g / (g + GPUs per server)
    "fits_machine",
    "fits_rack",
    "log_grad_bytes",
    "log_buckets",
    "backward_share",
    "log_iter_time",
    "slowdown_machine",
    "slowdown_rack",
    "slowdown_network",
    "feasible_machine",
    "feasible_rack",
    "feasible_network",
    "waited_1h",  # w / (w + 1 h)
    "waited_24h",  # w / (w + 24 h)
    "age_24h",
    "preemptions",
    "attained_per_gpu",  # GPU-seconds / g, over (x + 24 h)
    "queue_rank",  # share of the queue that arrived before it
    "progress",  # clairvoyant only
    "remaining",  # clairvoyant only
)
SET_RUNNING_FIELDS = (
    "present",
    "gpus_share",
    "gpus_server",
    "log_grad_bytes",
    "log_buckets",
    "backward_share",
    "log_iter_time",
    "level_machine",
    "level_rack",
    "level_network",
    "slowdown",
    "efficiency",
    "running_for_1h",
    "running_for_24h",
    "restoring",
    "lease_expired",
    "preemptions",
    "attained_per_gpu",
    "preemptible",
    "progress",  # clairvoyant only
    "remaining",  # clairvoyant only
)
SET_GLOBAL_FIELDS = (
    "used",  # GPU share in use
    "background",
    "max_server_free",  # largest free block in one server / GPUs per server
    "max_rack_free",  # largest free block in one rack / GPUs per rack
    "free_servers",  # share of servers with every GPU free
    "uplink_load",  # mean over racks of u / (u + 1), u = cross-rack jobs on the uplink
    "queue_gpus",  # GPUs asked by the queue / cluster GPUs, x / (1 + x)
    "queue_share",  # waiting jobs / jobs in the system
    "hidden_share",  # share of the queue not shown in the rows
    "queue_waited_24h",  # mean wait of the whole queue, over (x + 24 h)
    "lease_expired",
    "tick",  # this instant is a periodic tick or a timer
    "preempt_budget",  # preemptions left at this instant / budget
)

DAY_S = 86400.0
HOUR_S = 3600.0


@dataclass(frozen=True)
class SetObsConfig:
    K: int = 64  # pending rows
    M: int = 64  # running rows
    clairvoyant: bool = False
    preempt_budget: int = 1  # preemptions per decision instant (0: none)
    typed: bool = False  # the typed layout (typed block and typed place actions)


def untyped_set_obs_size(K: int, M: int) -> int:
    """Values of the untyped set observation (the typed one's prefix)."""
    return K * len(SET_PENDING_FIELDS) + M * len(SET_RUNNING_FIELDS) + len(SET_GLOBAL_FIELDS)


def typed_block_size(K: int, M: int) -> int:
    """Values of the typed block appended in the typed layout."""
    return (
        K * MAX_TYPES * len(TYPE_PENDING_FIELDS)
        + M * len(TYPE_RUNNING_FIELDS)
        + MAX_TYPES * len(TYPE_GLOBAL_FIELDS)
    )


def set_obs_size(cfg: SetObsConfig) -> int:
    size = untyped_set_obs_size(cfg.K, cfg.M)
    return size + typed_block_size(cfg.K, cfg.M) if cfg.typed else size


def split_set_obs(flat, K: int, M: int):
    """Cut a flat set observation (numpy or torch, any leading batch dims)
    into ``(pending (.., K, Fp), running (.., M, Fr), global (.., Fg))``; of a
    typed one, its untyped prefix."""
    fp, fr = len(SET_PENDING_FIELDS), len(SET_RUNNING_FIELDS)
    a = K * fp
    b = a + M * fr
    lead = flat.shape[:-1]
    return (
        flat[..., :a].reshape(*lead, K, fp),
        flat[..., a:b].reshape(*lead, M, fr),
        flat[..., b : b + len(SET_GLOBAL_FIELDS)],
    )


def split_typed_set_obs(flat, K: int, M: int):
    """Cut the typed block of a typed set observation into ``(pending types
    (.., K, MAX_TYPES, Ftp), running types (.., M, Ftr), types (.., MAX_TYPES,
    Ftg))``; ``split_set_obs`` cuts its prefix."""
    ftp, ftr, ftg = len(TYPE_PENDING_FIELDS), len(TYPE_RUNNING_FIELDS), len(TYPE_GLOBAL_FIELDS)
    a = untyped_set_obs_size(K, M)
    b = a + K * MAX_TYPES * ftp
    c = b + M * ftr
    lead = flat.shape[:-1]
    return (
        flat[..., a:b].reshape(*lead, K, MAX_TYPES, ftp),
        flat[..., b:c].reshape(*lead, M, ftr),
        flat[..., c : c + MAX_TYPES * ftg].reshape(*lead, MAX_TYPES, ftg),
    )


class SetObsBuilder:
    """Flat set observation, candidate rows and mask for one engine.

    Actions: ``0`` WAIT; ``1 + 3k + l`` place pending row ``k`` at level
    ``l``; ``1 + 3K + j`` preempt running row ``j``. Same interface as
    ``observation.ObsBuilder`` (``update``, ``mask``, ``has_choice``,
    ``win_pending``, ``win_running``), so ``ClusterEnv`` drives either.
    """

    def __init__(self, engine: Engine, cfg: SetObsConfig) -> None:
        self.engine = engine
        self.cfg = cfg
        c = engine.cluster
        self.G = c.gpus_per_server
        T = MAX_TYPES if cfg.typed else 0
        self.n_actions = 1 + 3 * cfg.K + cfg.M + 3 * T * cfg.K
        self._size = set_obs_size(cfg)
        # per-type feasibility: typed engines (the mask) and the typed layout
        self._feas = TypeFeasibility(engine) if engine.types is not None or cfg.typed else None
        self._typed = TypeFeatures(engine, self._feas) if cfg.typed and self._feas else None
        n = c.num_gpus
        per_model: dict[str, tuple[float, float, float]] = {}
        self._static: list[tuple[float, ...]] = []  # gpus_share .. log_iter_time (no fits)
        self._fits: list[tuple[float, float]] = []
        for j in engine.jobs:
            feats = per_model.get(j.model)
            if feats is None:
                feats = per_model[j.model] = _model_features(j.model, c.fabric)
            log_t = min(1.0, max(0.0, (math.log10(max(j.t_compute, 1e-9)) + 5.0) / 6.0))
            g = j.gpus
            self._static.append((min(1.0, g / n), g / (g + self.G), *feats, log_t))
            self._fits.append((float(g <= self.G), float(g <= c.gpus_per_rack)))
        self._slowdowns = LevelSlowdowns(engine)
        self.win_pending: list[Job] = []
        self.win_running: list[Job] = []
        self.wait_ok = True
        self.mask = np.zeros(self.n_actions, dtype=bool)
        self.has_choice = False
        self.obs = np.zeros(self._size, dtype=np.float32)

    # -- guard ---------------------------------------------------------------
    def preempted_now(self) -> int:
        """Jobs preempted at this instant, read from the engine's state (a
        preempted job's ``queued_since`` is the preemption time, and it keeps
        it if placed again at once: a migration), so the env and a policy in
        ``simulate()`` count the same without bookkeeping."""
        e = self.engine
        now = e.now
        n = sum(1 for j in e.pending if j.preemptions and j.queued_since == now)
        return n + sum(1 for j in e.running.values() if j.preemptions and j.queued_since == now)

    # -- rows ----------------------------------------------------------------
    def _pending_rows(self) -> list[Job]:
        pending = self.engine.pending  # arrival order (re-queued jobs by arrival too)
        K = self.cfg.K
        if len(pending) <= K:
            return list(pending)
        half = K // 2
        oldest = heapq.nsmallest(half, pending, key=lambda j: (j.queued_since, j.arrival))
        taken = {j.index for j in oldest}
        rest = (j for j in pending if j.index not in taken)
        small = heapq.nsmallest(K - half, rest, key=lambda j: (j.gpus, j.arrival))
        rows = oldest + small
        rows.sort(key=lambda j: (j.arrival, j.index))
        return rows

    def update(self) -> None:
        """Recompute rows, mask and observation from the engine (a new array
        every time, so observations handed out earlier stay valid)."""
        e = self.engine
        cfg = self.cfg
        K, M = cfg.K, cfg.M
        c = e.cluster
        now = e.now
        clair = cfg.clairvoyant
        preempted = self.preempted_now() if cfg.preempt_budget > 0 else 0
        free, rack_free = e.free, e.rack_free
        max_free, max_rack, total = max(free), max(rack_free), e.total_free
        G = self.G
        # WAIT is refused while the cluster is idle and jobs wait: with ticks a
        # policy could otherwise idle forever, and whether an arrival is due
        # is future information (so the mask does not depend on it either).
        self.wait_ok = e.done or bool(e.running) or not e.pending
        m: list[bool] = [self.wait_ok]
        buf: list[float] = []
        feas, typed = self._feas, self._typed
        if feas is not None:
            feas.refresh()
        typed_m: list[bool] = []  # typed place actions, after the preemptions
        typed_p: list[float] = []  # typed pending rows, after the global fields

        pending = e.pending
        n_pending = len(pending)
        rows = self._pending_rows() if pending else []
        self.win_pending = rows
        # queue rank: position in arrival order among waiting jobs
        if rows and n_pending > 1:
            order = {j.index: i for i, j in enumerate(pending)}
            inv = 1.0 / (n_pending - 1)
        else:
            order, inv = {}, 0.0
        for job in rows:
            g = job.gpus
            if feas is None:
                fm = g <= G and g <= max_free
                fr = g <= max_rack
                fn = g <= total
            else:  # typed: on the job's accepted types
                fm, fr, fn = feas.pending(job, typed, typed_m, typed_p)
            m += (fm, fr, fn)
            waited = now - job.queued_since
            age = now - job.arrival
            apg = job.attained / g
            if clair:
                it = job.iterations
                prog = job.progress / it if it > 0 else 1.0
                rem = (it - job.progress) * job.t_compute / g
                rem = rem / (rem + DAY_S)
            else:
                prog = rem = 0.0
            st = self._static[job.index]
            buf += (1.0, st[0], st[1])
            buf += self._fits[job.index]
            buf += st[2:]
            buf += self._slowdowns(job)
            buf += (
                float(fm),
                float(fr),
                float(fn),
                waited / (waited + HOUR_S),
                waited / (waited + DAY_S),
                age / (age + DAY_S),
                job.preemptions / (job.preemptions + 1.0),
                apg / (apg + DAY_S),
                order.get(job.index, 0) * inv,
                prog,
                rem,
            )
        fp = len(SET_PENDING_FIELDS)
        buf += [0.0] * (fp * (K - len(rows)))
        m += [False] * (3 * (K - len(rows)))

        running = list(e.running.values())
        if len(running) > M:  # keep the widest jobs (preempting them frees most)
            running = sorted(running, key=lambda j: (-j.gpus, j.started_at, j.index))[:M]
            running.sort(key=lambda j: (j.started_at, j.index))
        self.win_running = running
        budget_ok = preempted < cfg.preempt_budget
        expired = {j.index for j in e.lease_expired} if e.lease_expired else ()
        onehot = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
        for job in running:
            i = job.index
            ran = now - job.started_at
            ct = job.compute_time
            busy = ct + job.comm_time
            apg = e.attained_service(job) / job.gpus
            ok = budget_ok and job.started_at < now
            m.append(ok)
            if clair:
                left = e.remaining_iterations(job)
                it = job.iterations
                prog = 1.0 - left / it if it > 0 else 1.0
                # (its time on its GPU type; x 1.0 untyped keeps every bit)
                rem = left * job.t_compute * job.tfac / job.gpus
                rem = rem / (rem + DAY_S)
            else:
                prog = rem = 0.0
            st = self._static[i]
            buf.append(1.0)
            buf += st
            buf += onehot[job.level]  # pyright: ignore[reportCallIssue, reportArgumentType]
            buf += (
                1.0 - job.t_compute * job.tfac / job.t_iter,
                ct / busy if busy > 0 else 0.0,
                ran / (ran + HOUR_S),
                ran / (ran + DAY_S),
                float(job.busy_until > now),
                float(i in expired),
                job.preemptions / (job.preemptions + 1.0),
                apg / (apg + DAY_S),
                float(ok),
                prog,
                rem,
            )
        fr_ = len(SET_RUNNING_FIELDS)
        buf += [0.0] * (fr_ * (M - len(running)))
        m += [False] * (M - len(running))
        if e.done:
            m[0] = True
        if typed is None:
            self.mask = np.fromiter(m, dtype=bool, count=self.n_actions)
        else:  # typed place actions after the untyped ones; empty rows False
            mask = np.zeros(self.n_actions, dtype=bool)
            mask[: len(m)] = m
            mask[len(m) : len(m) + len(typed_m)] = typed_m
            self.mask = mask
        self.has_choice = any(m[1:])

        n_run = len(e.running)
        queue_gpus = sum(j.gpus for j in pending) / c.num_gpus if n_pending else 0.0
        mean_wait = sum(now - j.queued_since for j in pending) / n_pending if n_pending else 0.0
        uplinks = e.uplink_jobs
        events = e.events_now
        budget = cfg.preempt_budget
        buf += (
            1.0 - total / c.num_gpus,
            float(e.background),
            max_free / G,
            max_rack / c.gpus_per_rack,
            sum(1 for f in free if f == G) / len(free),
            sum(len(u) / (len(u) + 1.0) for u in uplinks) / len(uplinks),
            queue_gpus / (1.0 + queue_gpus),
            n_pending / (n_pending + n_run) if n_pending + n_run else 0.0,
            (n_pending - len(rows)) / n_pending if n_pending else 0.0,
            mean_wait / (mean_wait + DAY_S),
            float(bool(e.lease_expired)),
            float(any(kind in ("tick", "wake") for kind, _ in events)),
            (budget - preempted) / budget if budget > 0 else 0.0,
        )
        if typed is None:
            self.obs = np.fromiter(buf, dtype=np.float32, count=self._size)
        else:
            base = np.fromiter(buf, dtype=np.float32, count=len(buf))
            self.obs = np.concatenate((base, typed.block(typed_p, running, K, M)))

    def observation(self) -> np.ndarray:
        return self.obs
