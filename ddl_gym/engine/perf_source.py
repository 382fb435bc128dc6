"""Performance sources the engine takes besides its closed-form model.

The engine's own source is ``"closed_form"`` (:class:`ddl_gym.perf.PerfModel`,
with contention and congestion). Any other is an object passed in as
``perf_source``: a per-placement slowdown table such as the seed authors'
(``ddl_gym.seed.SlowdownTable``, built by whoever asks for it: a scenario
with ``perf_source = "seed_astra"``). The engine never imports one, so the
seed wing and the engine stay apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

CLOSED_FORM = "closed_form"


@runtime_checkable
class SlowdownSource(Protocol):
    """Iteration-time inflation of a placement, a property of the placement
    alone: no contention between jobs and no congestion."""

    def placement_slowdown(
        self, model: str, placement: Iterable[tuple[int, int]], servers_per_rack: int
    ) -> float:
        """Slowdown (>= 1) of ``model`` on ``placement`` (``[(server, gpus), ...]``)."""
        ...


def check_perf_source(perf_source: object) -> SlowdownSource | None:
    """The slowdown source ``perf_source`` names (None: the closed form)."""
    if perf_source == CLOSED_FORM:
        return None
    if isinstance(perf_source, SlowdownSource):
        return perf_source
    if perf_source == "seed_astra":
        raise ValueError(
            "perf_source='seed_astra' is a table the engine does not load itself: pass "
            "perf_source=ddl_gym.seed.SlowdownTable.load() (a scenario with "
            "perf_source = 'seed_astra' does this for you)"
        )
    raise ValueError(
        f"perf_source must be {CLOSED_FORM!r} or a SlowdownSource (e.g. "
        f"ddl_gym.seed.SlowdownTable.load()), got {perf_source!r}"
    )
