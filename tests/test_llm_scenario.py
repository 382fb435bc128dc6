"""The 1,024-GPU LLM-cluster scenario (issue 54) through the env and every heuristic."""

from __future__ import annotations

import numpy as np
import pytest
from ddl_gym.baselines import HEURISTICS, make_policy
from gymnasium.utils.env_checker import check_env

from ddl_gym.engine import simulate
from ddl_gym.env import ClusterEnv
from ddl_gym.scenarios import get_scenario
from ddl_gym.traces import head


@pytest.fixture(scope="module")
def case():
    scenario, _ = get_scenario("llm-cluster")
    trace = head(scenario.build_trace(0), 60)
    assert (trace.jobs["layout"] != "").all()  # every job carries a TP x PP x DP layout
    return scenario, trace


def test_env_checks_and_a_masked_rollout_finishes(case) -> None:
    scenario, trace = case
    env = ClusterEnv(trace=trace, cluster=scenario.build_cluster(), congestion="moderate")
    check_env(env, skip_render_check=True)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(20_000):
        mask = env.action_masks()
        _, _, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        assert "invalid" not in info
        if terminated or truncated:
            break
    result = env.unwrapped.engine.result()
    assert result.summary["completed"] == len(trace)


@pytest.mark.parametrize("policy", HEURISTICS)
def test_every_heuristic_runs_it(case, policy: str) -> None:
    """Type-blind heuristics decide from free GPU counts; where LLM jobs keep
    TP groups whole per server they are forgiven (Engine.forgives), never
    stuck: every job ends and no server holds a split TP group."""
    scenario, trace = case
    p = make_policy(policy)
    result = simulate(
        trace, scenario.build_cluster(), p, **scenario.engine_kwargs(p.engine_kwargs())
    )
    assert result.summary["completed"] == len(trace)
    tp = {row.job_id: int(row.layout.split("-")[0][2:]) for row in trace.jobs.itertuples()}
    for row in result.placements.itertuples():
        assert row.gpus % tp[row.job_id] == 0, (row.job_id, row.gpus)
