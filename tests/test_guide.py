"""Guided PPO (ddl_gym.agents.guide): the labels, the loss, the run."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")
import torch as th  # noqa: E402
from ddl_gym.agents.guide import LABEL_KEY, MASK_KEY, guide_loss  # noqa: E402
from ddl_gym.agents.suite_ppo import SuiteCaseEnv, SuitePPOConfig, run_suite_ppo  # noqa: E402
from ddl_gym.baselines import make_policy  # noqa: E402


def test_guide_loss_is_cross_entropy_on_taught_rows_and_kl_on_the_others():
    logits = th.tensor([[0.0, 0.0, 0.0], [0.0, math.log(3.0), 5.0]])
    masks = th.tensor([[True, True, False], [True, True, False]])
    labels = th.tensor([1, -1])
    anchor = th.tensor([[9.0, 9.0, 9.0], [0.0, 0.0, -7.0]])
    # row 0: the label's probability among the two valid actions is 1/2;
    # row 1: policy (1/4, 3/4), anchor (1/2, 1/2) on the valid actions
    ce = math.log(2.0)
    kl = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    got = guide_loss(logits, masks, labels, anchor, coef=2.0)
    assert float(got) == pytest.approx(2.0 * (ce + kl) / 2, rel=1e-6)
    # without an anchor the untaught row counts zero
    assert float(guide_loss(logits, masks, labels, None, 1.0)) == pytest.approx(ce / 2, rel=1e-6)


@pytest.mark.needs_data
def test_the_teacher_labels_its_own_trajectory_and_untaught_cases_get_none():
    case = "pollux-3@seed64"
    cfg = SuitePPOConfig(
        cases=[case, "philly-train@xrack512"],
        guide_teachers={case: "tiresias"},
        max_episode_steps=60,
    )
    env = SuiteCaseEnv(cfg)
    seen = set()
    for seed in range(6):
        _, info = env.reset(seed=seed)
        seen.add(env.case_name)
        labelled = 0
        for _ in range(60):
            mask, a = info[MASK_KEY], info[LABEL_KEY]
            assert np.array_equal(mask, env.action_masks())
            if env.case_name != case:
                assert a == -1
                a = int(np.flatnonzero(mask)[0])
            elif a >= 0:
                assert mask[a]
                labelled += 1
            else:
                a = 0 if mask[0] else int(np.flatnonzero(mask)[0])
            _, _, term, trunc, info = env.step(a)
            if term or trunc:
                assert LABEL_KEY not in info  # no label for a state nobody acts on
                break
        if env.case_name == case:
            assert labelled > 0
    assert seen == {case, "philly-train@xrack512"}


@pytest.mark.needs_data
def test_the_teacher_followed_through_the_env_acts_as_the_teacher_alone():
    """Executing the labels reproduces Tiresias' own first decisions."""
    from ddl_gym.agents.teachers import label

    case = "pollux-3@seed64"
    cfg = SuitePPOConfig(cases=[case], guide_teachers={case: "tiresias"}, max_episode_steps=40)
    env = SuiteCaseEnv(cfg)
    _, info = env.reset(seed=3)
    twin = make_policy("tiresias")
    inner = env._env
    twin.reset(inner.view, seed=None)
    for _ in range(40):
        expected = label(twin, inner)
        assert info[LABEL_KEY] == (-1 if expected is None else expected)
        a = info[LABEL_KEY] if info[LABEL_KEY] >= 0 else 0
        _, _, term, trunc, info = env.step(a)
        if term or trunc:
            break


def test_bad_guide_teachers_name_the_case():
    with pytest.raises(ValueError, match="not train cases"):
        SuiteCaseEnv(SuitePPOConfig(guide_teachers={"pollux-5@pcie128": "tiresias"}))
    with pytest.raises(ValueError, match=r"guide_teachers\['pollux-3@seed64'\].*unknown policy"):
        SuiteCaseEnv(SuitePPOConfig(guide_teachers={"pollux-3@seed64": "tiresia"}))


@pytest.mark.needs_data
def test_a_guided_run_anchors_at_zero_and_teaches(tmp_path):
    scores = iter([1.0, 0.9, 0.8])

    def scorer(path, suite, heuristics_dir):
        v = next(scores)
        return {"iqm": v, "mean": v, "per_case": {"c": v}}

    cfg = SuitePPOConfig(
        cases=["pollux-3@seed64"],
        guide_teachers={"pollux-3@seed64": "tiresias"},
        guide_self=True,
        total_timesteps=128,
        eval_freq=64,
        n_envs=1,
        max_episode_steps=200,
    )
    cfg.ppo.n_steps = 64
    cfg.ppo.batch_size = 32
    cfg.ppo.n_epochs = 1
    run_suite_ppo(cfg, tmp_path, progress=False, scorer=scorer)
    history = json.loads((tmp_path / "guide.json").read_text())
    assert len(history) == 2  # one imitation pass per rollout
    assert all(h["taught"] > 0 and h["loss"] > 0 for h in history)
    only_anchor = dataclasses.replace(cfg, guide_teachers={}, seed=1)
    run_suite_ppo(
        only_anchor,
        tmp_path / "anchor",
        progress=False,
        scorer=lambda *a: {"iqm": 1.0, "mean": 1.0, "per_case": {"c": 1.0}},
    )
    first = json.loads((tmp_path / "anchor" / "guide.json").read_text())[0]
    # before any update the policy is its anchor: KL 0 (up to float noise,
    # which Adam's normalised steps move by about the learning rate)
    assert first["taught"] == 0 and first["loss"] == pytest.approx(0.0, abs=1e-4)
