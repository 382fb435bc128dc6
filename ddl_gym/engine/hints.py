"""What a policy tells the engine about the instants it may skip.

A policy that knows some decision points would change nothing for it states
so in one frozen ``LeaseHints`` value (``EngineView.hint``); the engine keeps
the latest and asks its tests without knowing what they mean, as an event
loop calls its callbacks. Two kinds of instant can be skipped:

* **lease boundaries** (with ``lazy_leases``): ``engine/leases.py`` passes over
  a boundary whose expiring jobs the hints say nobody waiting could take GPUs
  from (``floor``, ``needs``, ``levels``, ``levels_for``, ``levels_at``) or
  where the policy's own last test (``lease_matters``) says it would only wait;
* **wake-ups** (``wake_at``): at a wake-up with nothing else happening,
  ``wake_matters`` False drops it (no decision point).

Every test is asked with the engine's clock at the instant in question
(``asked_at``), so the policy reads its view as it would there. Each must be
free of side effects a later instant reads, except what it plans for that very
instant (Dally keeps the re-offer it dry-ran, used only if the instant comes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ddl_gym.engine.job import Job

# (machine, rack, network) smallest waiting demands; with ``until`` appended,
# valid for every instant before ``until``
Levels = tuple[float, float, float]
LevelsUntil = tuple[float, float, float, float]


@dataclass(frozen=True, slots=True)
class LeaseHints:
    """The lease boundaries and wake-ups that can matter to a policy, until
    its next hint. The defaults say nothing: every boundary (while a job
    waits) and every wake-up makes an instant.

    Attributes:
        floor: a boundary matters only if some expiring job's efficiency
            may exceed it (None: any).
        needs: ``(threshold, gpus)`` pairs, thresholds ascending and ``gpus``
            descending: a boundary whose expiring jobs' largest efficiency
            bound exceeds ``threshold`` matters only if their GPUs plus the
            free ones number at least the ``gpus`` of the last such threshold
            (and not at all if it exceeds none). Empty: no demand test.
        levels: ``(machine, rack, network, until)``: the smallest waiting
            demand that accepts only one server, only one rack, any
            placement (inf: none), valid before ``until``. A boundary then
            matters only if one of them fits, by the packer's tests, in the
            free GPUs plus the expiring jobs'. None: no level test.
        levels_for: ``levels_for(top)``: the same three minima over only the
            waiting jobs that could take GPUs from expiring jobs of largest
            efficiency bound ``top`` (refines ``levels``; only with it).
        levels_at: ``levels`` asked again at a later boundary, once they run
            out, with no decision point in between (only with ``levels``).
        lease_matters: the last word on a boundary the tests above keep,
            given its expiring jobs in start order; False: the policy would
            only wait there, and no instant is made.
        wake_matters: asked at a wake-up with nothing else happening; False
            drops it. None: every wake-up makes an instant.
    """

    floor: float | None = None
    needs: Sequence[tuple[float, int]] = ()
    levels: LevelsUntil | None = None
    levels_for: Callable[[float], Levels] | None = None
    levels_at: Callable[[], LevelsUntil] | None = None
    lease_matters: Callable[[list[Job]], bool] | None = None
    wake_matters: Callable[[], bool] | None = None


NO_HINTS = LeaseHints()


class Clock(Protocol):
    now: float


T = TypeVar("T")


def asked_at(clock: Clock, t: float, test: Callable[..., T], *args: Any) -> T:
    """``test(*args)`` with ``clock.now`` moved to ``t`` for the call (a hint
    reads the view as at that instant), then moved back."""
    before = clock.now
    clock.now = t
    try:
        return test(*args)
    finally:
        clock.now = before


__all__ = ["NO_HINTS", "LeaseHints", "Levels", "LevelsUntil", "asked_at"]
