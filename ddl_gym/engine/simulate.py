"""Run a whole trace under one policy.

The driver loop lives here, not in ``engine.py``: it needs the view, and the
view reads the engine, so the imports run one way (engine <- view <- simulate).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from typing import Any

from ddl_gym.engine.actions import WAIT, InvalidAction, Place, Preempt, Wait
from ddl_gym.engine.engine import Engine
from ddl_gym.engine.gcpause import cyclic_gc_paused
from ddl_gym.engine.metrics import Result
from ddl_gym.engine.view import EngineView


class PolicyEngineWarning(UserWarning):
    """A caller's engine setting contradicts what the policy asks for."""


def policy_engine_kwargs(policy: Any) -> dict[str, Any]:
    """The engine settings ``policy`` needs (``policy.engine_kwargs()``; none
    when it has no such method)."""
    get: Callable[[], Mapping[str, Any]] | None = getattr(policy, "engine_kwargs", None)
    return dict(get()) if callable(get) else {}


def merge_engine_kwargs(
    policy: Any, explicit: Mapping[str, Any], *, stacklevel: int = 3
) -> dict[str, Any]:
    """The policy's engine settings overridden by the caller's ``explicit`` ones.

    A policy's requirements travel with it (Dally's leases drive its
    preemption layer; without them it silently becomes another scheduler), so
    they are applied by default. An explicit value that differs from the
    policy's wins (ablations such as "Dally without leases" stay possible) but
    gives a :class:`PolicyEngineWarning` naming both values, so it is never
    silent. Filter the warning to make a deliberate override quiet.
    """
    wanted = policy_engine_kwargs(policy)
    for key, value in explicit.items():
        if key in wanted and wanted[key] != value:
            name = getattr(policy, "name", type(policy).__name__)
            warnings.warn(
                f"{key}={value!r} overrides {name}'s {key}={wanted[key]!r} "
                "(its engine_kwargs()); the policy may not behave as designed",
                PolicyEngineWarning,
                stacklevel=stacklevel,
            )
    return {**wanted, **explicit}


def simulate(trace, cluster, policy, seed: int | None = 0, **engine_kwargs) -> Result:
    """Simulate ``trace`` on ``cluster`` with ``policy`` and return the ``Result``.

    The engine runs with the policy's own settings (``policy.engine_kwargs()``,
    e.g. Dally's 20 s lazy leases, Gandiva's free migration) plus ``engine_kwargs``
    (congestion, lease_s, tick_s, restore_s_per_gpu, clairvoyant,
    record_series, record_placements, lazy_leases). An explicit value that
    contradicts the policy's wins and warns (:class:`PolicyEngineWarning`).
    ``seed`` seeds the policy; the engine itself is deterministic.
    """
    kwargs = merge_engine_kwargs(policy, engine_kwargs)
    engine = Engine(trace, cluster, **kwargs)
    policy.reset(EngineView(engine), seed=seed)
    run_policy(engine, policy)
    return engine.result()


def run_policy(
    engine: Engine,
    policy,
    max_actions_per_instant: int = 100_000,
    pause_gc: bool = True,
) -> None:
    """Drive ``engine`` to the end with ``policy`` (see ``simulate``).
    ``pause_gc``: run with the cyclic garbage collector off
    (:func:`cyclic_gc_paused`; False leaves it alone).

    On a typed cluster a policy that is not type-aware (no true
    ``type_aware`` attribute) reasons about free GPUs as if the cluster had
    one type, so it may ask for a placement no single accepted type can hold
    (and, with LLM jobs, one that would split a TP group):
    that placement is not made and ends the policy's turn, as if it had
    waited (a type-blind scheduler's attempt failing; ``Engine.forgives``). ``engine.deferred``
    counts them (the result's ``deferred_places``). Such a policy may also
    preempt for a job its free counts say would then fit and, when it does
    not, put the victim back and preempt it again: preempting a job a second
    time at one instant is not done and ends its turn, which breaks that
    cycle (a migration, one preemption and one placement, is unaffected)."""
    with cyclic_gc_paused() if pause_gc else nullcontext():
        view = EngineView(engine)
        act = policy.act
        type_blind = engine.forgives(policy)
        preempted: set[int] = set()  # (type-blind on a typed cluster: this instant's)
        while not engine.done:
            for _ in range(max_actions_per_instant):
                action = act(view)
                if action is WAIT or isinstance(action, Wait):
                    break
                if type_blind:
                    if isinstance(action, Place):
                        try:
                            engine.apply(action)
                        except InvalidAction:
                            engine.deferred += 1
                            break
                        continue
                    if isinstance(action, Preempt):
                        if action.job in preempted:
                            engine.deferred += 1
                            break
                        preempted.add(action.job)
                engine.apply(action)
            else:
                raise RuntimeError(
                    f"policy {type(policy).__name__} took {max_actions_per_instant} actions "
                    f"at t={engine.now} without waiting"
                )
            preempted.clear()
            engine.advance()
