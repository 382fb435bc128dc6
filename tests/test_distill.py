"""Distilling the planner (agents/distill.py): the teacher's labels on its own
trajectory are its actions; the command refuses bad settings."""

from __future__ import annotations

import json

import numpy as np
import pytest
from ddl_gym.agents.dagger import rollout
from ddl_gym.baselines.planner import PlannerPolicy

from ddl_gym.env.set_env import SetClusterEnv
from tests.test_planner import CLUSTER, PLAN, small_trace


def _env() -> SetClusterEnv:
    # the shipped agent's env settings (agents.dagger._agent_env), on a small trace
    return SetClusterEnv(
        trace=small_trace(seed=11, n=30), cluster=CLUSTER, K=64, M=64, tick_s=1800.0, max_steps=None
    )


def _first_valid(obs: np.ndarray, mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def test_relabelling_a_planner_trajectory_gives_its_actions():
    rng = np.random.default_rng(0)
    # the planner drives (beta 1: its label is executed wherever it has one)
    driver = PlannerPolicy(**PLAN)
    drove = rollout(_env(), driver, _first_valid, 1.0, rng, 5000, seed=0)
    assert drove.labels and driver.stats.planned >= 3, "the candidates must disagree"
    assert drove.labels == drove.taken

    # the same actions replayed (beta 0: the replay always acts), a fresh
    # planner relabelling every state on the way
    replay = iter(drove.actions)
    teacher = PlannerPolicy(**PLAN)
    again = rollout(_env(), teacher, lambda obs, mask: next(replay), 0.0, rng, 5000, seed=0)
    assert again.actions == drove.actions
    assert again.labels == again.taken == drove.labels
    assert teacher.stats.planned == driver.stats.planned


def test_relabelling_differs_on_states_another_policy_drove():
    # the test above can fail: on a trajectory the first valid action drove,
    # the planner's labels are not simply the actions taken
    rng = np.random.default_rng(0)
    ep = rollout(_env(), PlannerPolicy(**PLAN), _first_valid, 0.0, rng, 5000, seed=0)
    assert ep.labels and ep.labels != ep.taken


def test_distill_command_refuses_bad_settings(tmp_path, capsys):
    from ddl_gym.agents.distill import main

    out = tmp_path / "run"
    bad = tmp_path / "bad.json"
    cases = {
        "unknown": ({"episodes": 3}, "unknown distill setting(s) ['episodes']"),
        "test case": ({"cases": ["sia-6@t4x64"]}, "cases: ['sia-6@t4x64'] are not train cases"),
        "planner": ({"planner": {"futures": 0}}, "planner: futures must be >= 1, got 0"),
        "validation": ({"validation_cases": ["philly-1023@v100x1024"]}, "validation_cases"),
    }
    for what, (config, message) in cases.items():
        bad.write_text(json.dumps(config))
        assert main(["--config", str(bad), "--out", str(out)]) == 2, what
        printed = capsys.readouterr().out.strip().splitlines()
        assert len(printed) == 1 and message in printed[0], (what, printed)
        assert not out.exists()
    bad.write_text("{not json")
    assert main(["--config", str(bad), "--out", str(out)]) == 2
    assert len(capsys.readouterr().out.strip().splitlines()) == 1 and not out.exists()


@pytest.mark.needs_data
def test_validation_scores_against_the_shipped_reference():
    # the best heuristic of a case, run again, scores exactly 1 on average
    # over the case's seeds (its runs are the reference records' own)
    from ddl_gym.agents.distill import validation_scores
    from ddl_gym.baselines import make_policy

    case = "tiresias-60@gv100x16"
    got = validation_scores(lambda: make_policy("gandiva"), cases=[case])
    assert got["best_heuristic"] == {case: "gandiva"}
    assert got["per_case"][case] == pytest.approx(1.0, rel=1e-12)
    assert got["mean"] == pytest.approx(1.0, rel=1e-12)
