"""Checkpoint ensembles: the soft vote, its members, its settings."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from ddl_gym.agents.policy import DEFAULT_MODEL

pytestmark = pytest.mark.skipif(not DEFAULT_MODEL.is_file(), reason="no shipped model")


def _config():
    from ddl_gym.agents.config import TrainConfig

    return TrainConfig.load(DEFAULT_MODEL.with_suffix(".json"))


def _copy(tmp_path, name: str, **env) -> str:
    """The shipped model under another name, its config with ``env`` changed."""
    shutil.copy(DEFAULT_MODEL, tmp_path / f"{name}.zip")
    config = json.loads(DEFAULT_MODEL.with_suffix(".json").read_text())
    config["env"].update(env)
    (tmp_path / f"{name}.json").write_text(json.dumps(config))
    return str(tmp_path / f"{name}.zip")


def test_the_vote_averages_the_members_probabilities_after_the_mask(monkeypatch):
    from research import ensemble

    # a member is its logits here; masked as masked_logits does
    monkeypatch.setattr(
        ensemble, "masked_logits", lambda model, obs, mask: np.where(mask, model, -np.inf)
    )
    a = np.log([0.7, 0.2, 0.1])
    b = np.log([0.1, 0.45, 0.45])
    vote = ensemble.CheckpointEnsemble([a, b], _config())
    obs = np.zeros(1)
    # probabilities: mean (0.40, 0.325, 0.275) -> 0; summed logits would pick 1
    # (0.7 x 0.1 = 0.07 < 0.2 x 0.45 = 0.09)
    assert vote.choose(obs, np.array([True, True, True])) == 0
    # without 0: (2/3, 1/3) and (1/2, 1/2) -> (0.583, 0.417) -> 1
    assert vote.choose(obs, np.array([False, True, True])) == 1
    # without 1: (0.875, 0.125) and (0.182, 0.818) -> (0.528, 0.472) -> 0
    assert vote.choose(obs, np.array([True, False, True])) == 0


def test_an_ensemble_of_copies_of_one_checkpoint_acts_as_that_checkpoint():
    from ddl_gym.agents import load_policy

    from ddl_gym.engine import simulate
    from ddl_gym.traces import synthetic_trace
    from research.ensemble import load_ensemble

    trace = synthetic_trace(n_jobs=40, seed=5, arrival_rate_per_h=8.0, max_gpus=16)
    runs = []
    for policy in (load_policy(), load_ensemble([DEFAULT_MODEL, DEFAULT_MODEL])):
        result = simulate(trace, "seed64", policy, congestion="heavy", **policy.engine_kwargs())
        runs.append(result.jobs)
    assert runs[0].equals(runs[1])
    assert len(runs[0]) == len(trace)


def test_members_must_share_the_settings_but_the_run_time_rules_come_from_the_config(tmp_path):
    from ddl_gym.agents.shield import RepackWhenIdle

    from research.ensemble import load_ensemble

    plain = _copy(tmp_path, "plain", repack_idle=False, min_run_s=None)
    ruled = _copy(tmp_path, "ruled", repack_idle=True, min_run_s=600.0)
    torch = pytest.importorskip("torch")
    torch.set_num_threads(2)
    vote = load_ensemble([plain, plain], config=tmp_path / "ruled.json")
    # as load_policy: one torch thread per process (or the count the user set)
    assert torch.get_num_threads() == int(os.environ.get("DDL_GYM_TORCH_THREADS", "1"))
    assert isinstance(vote._repack, RepackWhenIdle)
    assert vote.config.env.min_run_s == 600.0
    assert load_ensemble([plain, ruled])._repack is None  # the first one's config
    other = _copy(tmp_path, "other", K=32)
    with pytest.raises(ValueError, match="other.zip"):
        load_ensemble([plain, other])
    with pytest.raises(ValueError, match="no checkpoint"):
        load_ensemble([])


def test_the_portfolio_takes_an_ensemble_as_its_agent():
    from ddl_gym.agents.portfolio import make

    from research.ensemble import CheckpointEnsemble, load_ensemble

    vote = load_ensemble([DEFAULT_MODEL, DEFAULT_MODEL])
    portfolio = make(model=vote)
    fresh = portfolio.candidates["agent"]()
    assert isinstance(fresh, CheckpointEnsemble) and fresh is not vote
    assert fresh.models == vote.models
    assert portfolio.engine_kwargs() == vote.engine_kwargs()
