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


def test_policies_see_an_llm_jobs_predicted_slowdown(case) -> None:
    from ddl_gym.engine import Engine, EngineView
    from ddl_gym.perf import Level

    scenario, trace = case
    engine = Engine(trace, scenario.build_cluster(), congestion="moderate")
    view = EngineView(engine)
    job = max(engine.jobs, key=lambda j: j.gpus)
    layout = view.layout(job)
    assert layout is not None and layout.tp * layout.pp * layout.dp == job.gpus
    assert engine.llm is not None
    for level in Level:
        assert view.predicted_slowdown(job, level) == engine.llm.slowdown(
            job.model, layout, level, engine.background
        )


def test_a_scenario_may_let_tp_groups_span_servers(case) -> None:
    scenario, _ = case
    assert "llm_split_tp" not in scenario.engine_kwargs()
    assert scenario.replace(llm_split_tp=True).engine_kwargs()["llm_split_tp"] is True
