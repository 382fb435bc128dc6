"""Run a whole trace under one policy."""

from __future__ import annotations

from ddl_gym.engine.engine import Engine, run_policy
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
