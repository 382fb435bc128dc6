"""Read-only view of the engine for policies.

Heuristics and learned agents see the cluster through this view and act
through the engine's actions, in ``simulate()`` and in the env alike. The job
objects it hands out are the engine's own: read them, never write them.
Besides reads it has two calls: ``wake_at`` (a timer) and ``hint`` (which
instants can matter to the policy, ``LeaseHints``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ddl_gym.engine.engine import Engine
from ddl_gym.engine.hints import LeaseHints
from ddl_gym.engine.job import Job, Status
from ddl_gym.engine.packer import FreeIndex
from ddl_gym.perf import Level, PerfModel
from ddl_gym.topology import Cluster


class EngineView:
    __slots__ = ("_engine",)

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    # -- time and configuration -------------------------------------------
    @property
    def now(self) -> float:
        return self._engine.now

    @property
    def cluster(self) -> Cluster:
        return self._engine.cluster

    @property
    def perf(self) -> PerfModel:
        return self._engine.perf

    @property
    def background(self) -> float:
        """Current background traffic on rack uplinks (fraction of capacity)."""
        return self._engine.background

    @property
    def lease_s(self) -> float | None:
        return self._engine.lease_s

    @property
    def restore_s_per_gpu(self) -> float:
        return self._engine.restore_s_per_gpu

    @property
    def clairvoyant(self) -> bool:
        return self._engine.clairvoyant

    # -- jobs --------------------------------------------------------------
    @property
    def pending(self) -> Sequence[Job]:
        """Waiting jobs in arrival order (preempted jobs keep their place)."""
        return self._engine.pending

    def pending_demands(self) -> Mapping[int, int]:
        """GPU demand -> number of waiting jobs asking for it (kept by the
        queue as jobs come and go: no scan of the queue)."""
        return self._engine.pending.demands()

    def first_pending(self, gpus: int) -> Job | None:
        """The first waiting job (in ``pending``'s order) that asks for
        ``gpus`` GPUs, or None (no scan of the queue)."""
        return self._engine.pending.first(gpus)

    @property
    def running(self) -> Sequence[Job]:
        """Running jobs in start order."""
        return tuple(self._engine.running.values())

    @property
    def n_running(self) -> int:
        return len(self._engine.running)

    @property
    def jobs(self) -> Sequence[Job]:
        return self._engine.jobs

    def job(self, index: int) -> Job:
        return self._engine.jobs[index]

    @property
    def n_done(self) -> int:
        return self._engine.n_done

    @property
    def done(self) -> bool:
        return self._engine.done

    @property
    def lease_expired(self) -> Sequence[Job]:
        """Running jobs whose lease expired at this instant."""
        return tuple(self._engine.lease_expired)

    @property
    def instant(self) -> int:
        """Number of the current decision point (counts up by one per instant;
        a policy that keeps state per instant can tell instants apart with it,
        even two at the same time)."""
        return self._engine.instant

    @property
    def events(self) -> Sequence[tuple[str, int]]:
        """What happened at this instant: ``(kind, job index or -1)``."""
        return tuple(self._engine.events_now)

    def waited(self, job: Job) -> float:
        """Seconds since the job's last resource change (arrival or preemption)."""
        return self._engine.now - job.queued_since if job.status == Status.PENDING else 0.0

    def attained(self, job: Job) -> float:
        """GPU-seconds the job has held so far (``job.attained`` counts only
        finished runs)."""
        return self._engine.attained_service(job)

    def efficiency(self, job: Job) -> float:
        """Placement efficiency as of now (``job.efficiency`` lags while the
        job runs)."""
        return self._engine.efficiency(job)

    def efficiencies(self, jobs: Iterable[Job]) -> list[float]:
        """``efficiency`` of each of ``jobs``, in order."""
        return self._engine.efficiencies(jobs)

    def remaining_work(self, job: Job) -> float:
        """Single-GPU seconds of work left; only when the scenario is clairvoyant."""
        if not self._engine.clairvoyant:
            raise PermissionError("remaining work is hidden: the scenario is not clairvoyant")
        return self._engine.remaining_iterations(job) * job.t_compute

    # -- resources ---------------------------------------------------------
    @property
    def free_per_server(self) -> Sequence[int]:
        """Free GPUs per server: the engine's own list, live and not copied
        (a copy per call cost O(servers) at every decision that looked):
        read it, never write it; ``list(...)`` it to keep a snapshot past
        the next action."""
        return self._engine.free

    @property
    def free_per_rack(self) -> Sequence[int]:
        """Free GPUs per rack: the engine's own list (as ``free_per_server``)."""
        return self._engine.rack_free

    @property
    def total_free(self) -> int:
        return self._engine.total_free

    def uplink_jobs(self, rack: int) -> int:
        """Cross-rack jobs now sharing the uplink of ``rack``."""
        return len(self._engine.uplink_jobs[rack])

    def free_on(self, server: int) -> int:
        """Free GPUs on one server (no copy of the whole list)."""
        return self._engine.free[server]

    def largest_server_free(self) -> int:
        """The most free GPUs on any one server."""
        return self._engine.free_index.largest()

    def best_fit_server(self, gpus: int, changed: dict[int, int]) -> int | None:
        """The packer's one-server choice for ``gpus`` GPUs (at most a
        server's) if the servers of ``changed`` had its free counts instead
        (``FreeIndex.best_fit``); None: no server holds them."""
        return self._engine.free_index.best_fit(gpus, changed)

    def free_index(self) -> FreeIndex:
        """A copy of the engine's packer index (its own copies of the free
        GPUs per server and rack) for dry-run placements: ``move`` servers'
        counts on it and ``find`` answers as the engine's packer would."""
        return self._engine.free_index.copy()

    def can_place(self, job: Job, level: Level, gpu_type: int | None = None) -> bool:
        return (
            job.status == Status.PENDING
            and self._engine.placement_for(job, level, gpu_type) is not None
        )

    def placement_for(
        self, job: Job, level: Level, gpu_type: int | None = None
    ) -> list[tuple[int, int]] | None:
        """The placement ``Place(job, level, gpu_type)`` would get now (or None)."""
        return self._engine.placement_for(job, level, gpu_type)

    # -- GPU types (typed clusters) ----------------------------------------
    @property
    def gpu_types(self) -> tuple[str, ...]:
        """The cluster's GPU types (catalogue names; ``Place.gpu_type``
        indexes them); empty on an untyped cluster."""
        return self._engine.cluster.type_names

    @property
    def free_per_type(self) -> Sequence[int]:
        """Free GPUs per GPU type (live, read-only; ``[total_free]`` untyped)."""
        types = self._engine.types
        return [self._engine.total_free] if types is None else types.type_free

    def accepted_types(self, job: Job) -> tuple[int, ...]:
        """The type indices ``job`` may run on (empty on an untyped cluster)."""
        return job.accepts

    def type_speed(self, job: Job, gpu_type: int) -> float:
        """``job``'s compute speed on type ``gpu_type`` relative to a V100
        (its trace time is the V100 time); 1.0 on an untyped cluster."""
        types = self._engine.types
        return 1.0 if types is None else 1.0 / types.factor[job.model][gpu_type]

    def predicted_slowdown(self, job: Job, level: Level) -> float | None:
        """Model prediction of ``t_iter / t_compute`` at the tightest shape of
        ``level``, under the current background traffic (an LLM job's from its
        layout, ``ddl_gym.llm``)."""
        engine = self._engine
        layout = engine.layout_of(job)
        if layout is not None and engine.llm is not None:
            return engine.llm.slowdown(job.model, layout, level, engine.background)
        return engine.perf.slowdown(job.model, job.gpus, level, engine.background, job.t_compute)

    def layout(self, job: Job):
        """``job``'s TP x PP x DP layout (``ddl_gym.llm.Layout``; None:
        data-parallel)."""
        return self._engine.layout_of(job)

    def hint(self, hints: LeaseHints) -> None:
        """Tell the engine which instants can matter to this policy, until the
        next hint (``LeaseHints``: lease boundaries it may pass over with lazy
        leases, and the test of its wake-ups). The only call that is not a
        read: it changes no state but which instants are skipped."""
        self._engine.hint(hints)

    def wake_at(self, t: float) -> None:
        """Ask for a decision point at ``t`` (e.g. when a delay timer fires;
        the hints' ``wake_matters`` may drop it)."""
        self._engine.wake_at(t)
