"""Per-job simulation state (plain slots object: the engine's hot loop reads
and writes these fields directly, without pandas)."""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING

from ddl_gym.perf import Level, PerfModel, Shape

if TYPE_CHECKING:
    from ddl_gym.llm.layout import Layout


class Status(IntEnum):
    FUTURE = 0  # not arrived yet
    PENDING = 1
    RUNNING = 2
    DONE = 3


_FUTURE = Status.FUTURE  # (a module constant: one job each is made per trace row)
_NAN = float("nan")


class Job:
    """One job of the trace. Policies must treat it as read-only."""

    __slots__ = (
        # from the trace
        "index",
        "job_id",
        "arrival",
        "gpus",
        "model",
        "iterations",
        "t_compute",
        # state
        "status",
        "progress",
        "last_update",
        "rate",
        "t_iter",
        "straggle",
        "exposed",
        "uplink",
        "finish",
        "placement",
        "shape",
        "level",
        "racks",
        "busy_until",
        "restore_debt",
        "queued_since",
        "started_at",
        "version",
        "lease_version",
        # GPU types (typed clusters; ``engine/typed.py``)
        "accepts",
        "kind",
        "tfac",
        "perf",
        # LLM jobs (``ddl_gym/llm``): the layout, and the GPUs a server's
        # share must be a multiple of (its TP size; 1 for every other job)
        "layout",
        "unit",
        # accounting
        "first_start",
        "end",
        "queued_time",
        "run_time",
        "compute_time",
        "comm_time",
        "overhead_time",
        "attained",
        "preemptions",
        "starts_per_level",
    )

    def __init__(
        self,
        index: int,
        job_id: str,
        arrival: float,
        gpus: int,
        model: str,
        iterations: float,
        t_compute: float,
    ) -> None:
        self.index = index
        self.job_id = job_id
        self.arrival = arrival
        self.gpus = gpus
        self.model = model
        self.iterations = iterations
        self.t_compute = t_compute
        self.status = _FUTURE
        self.progress = 0.0
        self.last_update = arrival
        self.rate = 0.0
        self.t_iter = t_compute
        self.straggle = 1.0  # compute-time factor of the gang's slowest GPU
        self.exposed = 0.0
        # (uplink bandwidth, uplink latency) its rate was last computed with
        # (cross-rack placements only; the engine skips a re-rate's model
        # evaluation when neither changed)
        self.uplink: tuple[float, float] | None = None
        self.finish = _NAN  # time of its live completion event (nan: none)
        self.placement: tuple[tuple[int, int], ...] = ()
        self.shape: Shape | None = None
        self.level: Level | None = None
        self.racks: tuple[int, ...] = ()
        self.busy_until = 0.0
        self.restore_debt = 0.0
        self.queued_since = arrival
        self.started_at = 0.0
        self.version = 0
        self.lease_version = 0
        # typed clusters: the type indices it accepts, the type it runs on
        # (-1: none or several), its compute-time factor there (1 untyped)
        # and the perf model of its placement (None: the engine's)
        self.accepts: tuple[int, ...] = ()
        self.kind = -1
        self.tfac = 1.0
        self.layout: Layout | None = None
        self.unit = 1
        self.perf: PerfModel | None = None
        self.first_start = _NAN
        self.end = _NAN
        self.queued_time = 0.0
        self.run_time = 0.0
        self.compute_time = 0.0
        self.comm_time = 0.0
        self.overhead_time = 0.0
        self.attained = 0.0
        self.preemptions = 0
        self.starts_per_level = [0, 0, 0]

    @property
    def work(self) -> float:
        """Single-GPU seconds of compute the job needs in all."""
        return self.iterations * self.t_compute

    @property
    def slowdown(self) -> float:
        """Current ``t_iter / t_compute`` (1 for a pending job)."""
        return self.t_iter / self.t_compute if self.status == Status.RUNNING else 1.0

    @property
    def efficiency(self) -> float:
        """Time-averaged compute / (compute + exposed comm); 0 before any run
        (so that, as in the seed, new jobs come first in re-offers)."""
        busy = self.compute_time + self.comm_time
        return self.compute_time / busy if busy > 0 else 0.0

    def __repr__(self) -> str:
        return (
            f"Job({self.index}, id={self.job_id!r}, gpus={self.gpus}, model={self.model}, "
            f"status={self.status.name})"
        )
