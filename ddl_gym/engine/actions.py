"""The three things a scheduler can do at a decision point."""

from __future__ import annotations

from dataclasses import dataclass

from ddl_gym.perf import Level


@dataclass(frozen=True, slots=True)
class Wait:
    """No more actions now: time advances to the next event."""


@dataclass(frozen=True, slots=True)
class Place:
    """Start pending job ``job`` on the tightest placement whose span is at
    most ``level`` (``Level.MACHINE`` < ``RACK`` < ``NETWORK``).

    ``job`` is the job's index, an int: ``Job.index``, its position in
    ``view.jobs`` (``Place(view.pending[0].index)``), not the ``Job`` object,
    not its ``job_id`` string and not its position in ``view.pending``."""

    job: int
    level: Level = Level.NETWORK
    # typed clusters: the GPU type to run on, an index into
    # ``cluster.gpu_kinds`` (None: the tightest over the job's accepted types)
    gpu_type: int | None = None


@dataclass(frozen=True, slots=True)
class Preempt:
    """Checkpoint running job ``job`` (its index, ``Job.index``, as for
    :class:`Place`) and return it to the queue."""

    job: int


Action = Wait | Place | Preempt

WAIT = Wait()


class InvalidAction(ValueError):
    """An action that is not valid in the current state; nothing was changed."""
