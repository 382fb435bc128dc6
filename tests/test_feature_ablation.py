"""Permutation importance of observation features (agents.feature_ablation)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

from ddl_gym.agents import load_policy  # noqa: E402

from ddl_gym.env.set_observation import (  # noqa: E402
    SET_PENDING_FIELDS,
    SET_RUNNING_FIELDS,
    set_obs_size,
    split_set_obs,
)
from research.feature_ablation import FEATURE_GROUPS, ShuffledAgent  # noqa: E402


def test_every_group_names_fields_of_the_observation():
    for pending, running in FEATURE_GROUPS.values():
        assert set(pending) <= set(SET_PENDING_FIELDS)
        assert set(running) <= set(SET_RUNNING_FIELDS)


def test_feature_shuffle_moves_only_the_groups_columns_among_present_rows():
    agent = ShuffledAgent(load_policy(), "waited time")
    env = agent.config.env
    obs = np.random.default_rng(1).random(set_obs_size(agent._set_cfg)).astype(np.float32)
    pending = split_set_obs(obs, env.K, env.M)[0]
    pending[:, 0] = 0.0
    pending[:5, 0] = 1.0  # five pending rows present
    out = agent.shuffle(obs)
    before, after = split_set_obs(obs, env.K, env.M)[0], split_set_obs(out, env.K, env.M)[0]
    cols = [SET_PENDING_FIELDS.index(f) for f in FEATURE_GROUPS["waited time"][0]]
    others = [c for c in range(len(SET_PENDING_FIELDS)) if c not in cols]
    assert np.array_equal(after[:, others], before[:, others])
    assert np.array_equal(after[5:], before[5:])  # absent rows untouched
    # the present rows' group values are a permutation of rows (jointly)
    got = sorted(map(tuple, after[:5][:, cols].tolist()))
    assert got == sorted(map(tuple, before[:5][:, cols].tolist()))
    assert not np.array_equal(after[:5][:, cols], before[:5][:, cols])
    n_pending = env.K * len(SET_PENDING_FIELDS)
    assert np.array_equal(out[n_pending:], obs[n_pending:])  # no running field in the group
