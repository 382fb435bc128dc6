"""Run a whole trace under one policy.

The driver loop lives here, not in ``engine.py``: it needs the view, and the
view reads the engine, so the imports run one way (engine <- view <- simulate).
"""

from __future__ import annotations

from ddl_gym.engine.actions import WAIT, Wait
from ddl_gym.engine.engine import Engine
from ddl_gym.engine.metrics import Result
from ddl_gym.engine.view import EngineView


def simulate(trace, cluster, policy, seed: int | None = 0, **engine_kwargs) -> Result:
    """Simulate ``trace`` on ``cluster`` with ``policy`` and return the ``Result``.

    ``engine_kwargs`` go to ``Engine`` (congestion, lease_s, tick_s,
    restore_s_per_gpu, clairvoyant, record_series). ``seed`` seeds the policy;
    the engine itself is deterministic.
    """
    engine = Engine(trace, cluster, **engine_kwargs)
    policy.reset(EngineView(engine), seed=seed)
    run_policy(engine, policy)
    return engine.result()


def run_policy(engine: Engine, policy, max_actions_per_instant: int = 100_000) -> None:
    """Drive ``engine`` to the end with ``policy`` (see ``simulate``)."""
    view = EngineView(engine)
    act = policy.act
    while not engine.done:
        for _ in range(max_actions_per_instant):
            action = act(view)
            if action is WAIT or isinstance(action, Wait):
                break
            engine.apply(action)
        else:
            raise RuntimeError(
                f"policy {type(policy).__name__} took {max_actions_per_instant} actions "
                f"at t={engine.now} without waiting"
            )
        engine.advance()
