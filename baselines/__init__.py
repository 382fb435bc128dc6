"""Heuristic schedulers acting through the engine's actions.

``make_policy(name, **kwargs)`` builds one by registry name; keyword
arguments override the policy's parameters. Each policy has a ``name``,
``reset(view, seed=None)``, ``act(view)`` and ``engine_kwargs()`` (the engine
settings it needs, which ``ddl_gym.experiments.grid`` merges into ``simulate``).
``make_policy(name, reference=True)`` builds a Dally variant's reference twin
(``dally_reference.ReferenceDally``: the same results, written to be read).

==============  ==============================================================
name            policy
==============  ==============================================================
fifo            first come first served, first fit at any level, no backfill
consolidation   FIFO that only accepts a one-machine (one-rack if larger than
                a machine; network if larger than a rack) placement
sjf             shortest (remaining GPU-time) job first, backfilling
srtf            shortest remaining GPU-time first, preemptive
srsf            shortest remaining service first, preemptive, rack-consolidating
                with compact cross-rack placements and migration (oracle)
tiresias        discretised 2D-LAS, starvation promotion, sensitive models
                kept within a rack
gandiva         affinity packing by GPU demand, migration of fragmented jobs,
                no checkpoint cost
dally-delay     Dally layer 1 only: delay timers 1/2 leases, no preemption
dally-1-2       Dally layers 1+2: delay timers 1/2 leases + network-sensitive
                preemption at lease expiry
dally-6-12      the same with timers 6/12 leases
dally           Dally, all three layers: + auto-tuned timers
tiresias-c1     Tiresias that consolidates every job (sensitivity 1.0: any
                predicted slowdown across racks counts); tuned for ddl-gym-v3
random          random valid actions (seeded)
==============  ==============================================================

Typed clusters (GPU types, issue 53) add four policies, in ``TYPED`` (built by
``make_policy``, left out of ``POLICY_NAMES`` so the type-blind comparisons,
golden cells and suites keep their sets); on an untyped cluster each of the
three variants gives its parent's results exactly:

==============  ==============================================================
gavel           rounds (360 s) of throughput-normalised max-min fairness, a
                greedy approximation of Gavel's (not its LP); preempts at
                round starts to move jobs between types (``gavel.py``)
tiresias-typed  Tiresias on the fastest accepted type that fits, else the
                next fastest; preemption on one type (``typed.py``)
gandiva-typed   Gandiva on the fastest accepted type that fits, else the next
                fastest; migration kept on the job's type (``typed.py``)
dally-typed     Dally (auto-tuned) with a type timer: a job waits up to 6
                leases for its fastest type (``dally_typed.py``)
==============  ==============================================================

The tuned variants (``TUNED``) were chosen on ddl-gym-v3's train and
validation cases and are frozen in that suite's heuristic set; ``HEURISTICS``
keeps the eight names the older suites were designed with (a benchmark
reads its own set: ``Suite.heuristics``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .common import DEFAULT_ENGINE_KWARGS, BasePolicy
from .consolidation import ConsolidationPolicy
from .dally import AutoTuner, DallyPolicy
from .dally_reference import ReferenceDally
from .dally_typed import TypedDallyPolicy
from .fifo import FifoPolicy
from .gandiva import GandivaPolicy
from .gavel import GavelPolicy
from .random_policy import RandomPolicy
from .sjf import SjfPolicy, SrtfPolicy
from .srsf import SrsfPolicy
from .tiresias import TiresiasPolicy
from .typed import TypedGandivaPolicy, TypedTiresiasPolicy

_FACTORIES: dict[str, Callable[..., BasePolicy]] = {
    "fifo": FifoPolicy,
    "consolidation": ConsolidationPolicy,
    "sjf": SjfPolicy,
    "srtf": SrtfPolicy,
    "srsf": SrsfPolicy,
    "tiresias": TiresiasPolicy,
    "gandiva": GandivaPolicy,
    "dally-delay": lambda **kw: DallyPolicy(
        **{"rack_timer": 1, "network_timer": 2, "preempt": False, "name": "dally-delay", **kw}
    ),
    "dally-1-2": lambda **kw: DallyPolicy(
        **{"rack_timer": 1, "network_timer": 2, "name": "dally-1-2", **kw}
    ),
    "dally-6-12": lambda **kw: DallyPolicy(
        **{"rack_timer": 6, "network_timer": 12, "name": "dally-6-12", **kw}
    ),
    "dally": lambda **kw: DallyPolicy(**{"auto_tune": True, "name": "dally", **kw}),
    "tiresias-c1": lambda **kw: TiresiasPolicy(**{"sensitivity": 1.0, "name": "tiresias-c1", **kw}),
    "random": RandomPolicy,
}

POLICY_NAMES: tuple[str, ...] = tuple(_FACTORIES)


# slow policies make_policy builds but POLICY_NAMES leaves out (every comparison,
# golden cell and fuzz run iterates those): the lookahead planner (planner.py)
def _planner(**kwargs: Any) -> BasePolicy:
    from .planner import PlannerPolicy  # imported on use: it builds simulators per decision

    return PlannerPolicy(**kwargs)


SLOW: dict[str, Callable[..., BasePolicy]] = {"planner": _planner}
# the policies written for typed clusters (issue 53): built by name, not in
# POLICY_NAMES (which every type-blind comparison, golden cell and suite reads)
TYPED: dict[str, Callable[..., BasePolicy]] = {
    "gavel": GavelPolicy,
    "tiresias-typed": TypedTiresiasPolicy,
    "gandiva-typed": TypedGandivaPolicy,
    "dally-typed": lambda **kw: TypedDallyPolicy(**{"auto_tune": True, **kw}),
}
TYPED_NAMES: tuple[str, ...] = tuple(TYPED)
# each typed variant's type-blind parent (same results on an untyped cluster)
TYPED_PARENT: dict[str, str] = {
    "tiresias-typed": "tiresias",
    "gandiva-typed": "gandiva",
    "dally-typed": "dally",
}
# The policies comparisons rank: every registered one but random, split into
# the non-clairvoyant heuristics and the oracles, which read true job sizes
ORACLES: tuple[str, ...] = ("sjf", "srtf", "srsf")
# heuristic settings tuned for ddl-gym-v3 (train/validation only), not in HEURISTICS
TUNED: tuple[str, ...] = ("tiresias-c1",)
HEURISTICS: tuple[str, ...] = tuple(
    n for n in POLICY_NAMES if n not in ORACLES and n not in TUNED and n != "random"
)


def make_policy(name: str, reference: bool = False, **kwargs: Any) -> BasePolicy:
    """A fresh policy by registry name (see ``POLICY_NAMES``); ``reference``:
    the reference twin of a Dally variant (``ReferenceDally``)."""
    factory = _FACTORIES.get(name) or TYPED.get(name) or SLOW.get(name)
    if factory is None:
        known = ", ".join((*POLICY_NAMES, *TYPED, *SLOW))
        raise ValueError(f"unknown policy {name!r}; known: {known}")
    policy = factory(**kwargs)
    if not reference:
        return policy
    if name in TYPED:
        raise ValueError(f"no reference version of {name!r}: only of the type-blind Dally variants")
    if not isinstance(policy, DallyPolicy):
        raise ValueError(f"no reference version of {name!r}: only of the Dally variants")
    return ReferenceDally.like(policy)


__all__ = [
    "DEFAULT_ENGINE_KWARGS",
    "HEURISTICS",
    "ORACLES",
    "POLICY_NAMES",
    "AutoTuner",
    "BasePolicy",
    "ConsolidationPolicy",
    "DallyPolicy",
    "FifoPolicy",
    "GandivaPolicy",
    "RandomPolicy",
    "ReferenceDally",
    "SjfPolicy",
    "SrsfPolicy",
    "SrtfPolicy",
    "TUNED",
    "TYPED",
    "TYPED_NAMES",
    "TYPED_PARENT",
    "GavelPolicy",
    "TiresiasPolicy",
    "TypedDallyPolicy",
    "TypedGandivaPolicy",
    "TypedTiresiasPolicy",
    "make_policy",
]

if __name__ != "ddl_gym.baselines":  # imported as the old top-level `baselines` from a checkout
    import warnings

    warnings.warn(
        "importing `baselines` is deprecated: use `ddl_gym.baselines` (the installed name)",
        DeprecationWarning,
        stacklevel=2,
    )
