"""The size-free set observation, its env and the shared-scorer policy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ddl_gym.engine import Engine, Preempt
from ddl_gym.env.set_env import SetClusterEnv
from ddl_gym.env.set_observation import (
    SET_PENDING_FIELDS,
    SET_RUNNING_FIELDS,
    SetObsBuilder,
    SetObsConfig,
    set_obs_size,
    split_set_obs,
)
from ddl_gym.topology import Cluster
from ddl_gym.traces import Trace, synthetic_trace, validate

SHAPES = ("seed64", Cluster(2, 4, 8, "seed"), "nvswitch512", Cluster(1, 4, 8, "seed"))


def long_trace(n: int = 60, seed: int = 0, max_gpus: int = 32) -> Trace:
    return synthetic_trace(
        n_jobs=n,
        seed=seed,
        arrival_rate_per_h=6.0,
        gpu_mix={1: 0.3, 2: 0.2, 4: 0.2, 8: 0.2, 16: 0.1},
        duration_median_s=6 * 3600.0,
        duration_sigma=1.0,
        max_gpus=max_gpus,
    )


def first_valid(mask: np.ndarray) -> int:
    """A deterministic policy: the first valid non-WAIT action, else WAIT."""
    valid = np.flatnonzero(mask[1:])
    return int(valid[0]) + 1 if len(valid) else 0


@pytest.mark.parametrize("cluster", SHAPES, ids=str)
def test_set_obs_shape_does_not_depend_on_the_cluster(cluster):
    env = SetClusterEnv(long_trace(), cluster, congestion="heavy", K=8, M=8)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (set_obs_size(SetObsConfig(K=8, M=8)),)
    assert env.observation_space.contains(obs)
    for _ in range(200):
        obs, _, term, trunc, info = env.step(first_valid(env.action_masks()))
        assert "invalid" not in info
        assert env.observation_space.contains(obs)
        if term or trunc:
            break


def test_queue_beyond_the_rows_is_summarised_and_rows_mix_oldest_and_smallest():
    trace = long_trace(n=80)
    engine = Engine(trace, "seed64", congestion="heavy")
    while len(engine.pending) < 30:  # nothing placed: the queue only grows
        engine.advance()
    b = SetObsBuilder(engine, SetObsConfig(K=8, M=4))
    b.update()
    pend, _, glob = split_set_obs(b.obs, 8, 4)
    assert pend[:, 0].sum() == 8
    oldest = sorted(engine.pending, key=lambda j: (j.queued_since, j.arrival))[:4]
    assert {j.index for j in oldest} <= {j.index for j in b.win_pending}
    rest = [j for j in engine.pending if j.index not in {o.index for o in oldest}]
    smallest = min(j.gpus for j in rest)
    assert sum(j.gpus == smallest for j in b.win_pending) >= min(
        4, sum(j.gpus == smallest for j in rest)
    )
    hidden = glob[list(_global_fields()).index("hidden_share")]
    n = len(engine.pending)
    assert hidden == pytest.approx((n - 8) / n, abs=1e-6)


def _global_fields():
    from ddl_gym.env.set_observation import SET_GLOBAL_FIELDS

    return SET_GLOBAL_FIELDS


def test_no_observation_field_changes_when_only_future_arrivals_change():
    base = long_trace(n=60, seed=1).jobs
    cut = float(base["arrival_s"].iloc[30])
    past = base[base["arrival_s"] < cut]
    future_a = base[base["arrival_s"] >= cut]
    # a different future: other sizes, models and arrival times after the cut
    future_b = long_trace(n=40, seed=7).jobs
    future_b = future_b.assign(
        arrival_s=future_b["arrival_s"] + cut + 1.0, job_id="b" + future_b["job_id"].astype(str)
    )
    traces = [
        Trace(name, validate(pd.concat([past, fut], ignore_index=True), name))
        for name, fut in (("a", future_a), ("b", future_b))
    ]
    envs = [SetClusterEnv(t, "seed64", congestion="heavy", K=8, M=8) for t in traces]
    obs = [e.reset(seed=0)[0] for e in envs]
    steps = 0
    while envs[0].engine.now < cut and envs[1].engine.now < cut:
        np.testing.assert_array_equal(obs[0], obs[1])
        np.testing.assert_array_equal(envs[0].action_masks(), envs[1].action_masks())
        a = first_valid(envs[0].action_masks())
        obs = [e.step(a)[0] for e in envs]
        steps += 1
    assert steps > 20  # the comparison covered many decisions


def test_preemption_budget_blocks_a_second_preemption_at_one_instant():
    env = SetClusterEnv(long_trace(), "seed64", congestion="heavy", K=8, M=8, preempt_budget=1)
    env.reset(seed=0)
    K = env.K
    for _ in range(500):  # place until two jobs run that started before now
        m = env.action_masks()
        if m[1 + 3 * K :].sum() >= 2:
            break
        env.step(first_valid(m) if m[1 : 1 + 3 * K].any() else 0)
    m = env.action_masks()
    assert m[1 + 3 * K :].sum() >= 2
    a, b = np.flatnonzero(m[1 + 3 * K :])[:2] + 1 + 3 * K
    victim = env.engine_action(b)
    assert isinstance(victim, Preempt)
    _, _, _, _, info = env.step(a)
    assert "invalid" not in info
    assert not env.action_masks()[1 + 3 * K :].any()  # budget used up at this instant
    rows = [j.index for j in env._obs.win_running]
    _, _, _, _, info = env.step(1 + 3 * K + rows.index(victim.job))
    assert "budget" in info["invalid"]


def test_no_preemption_with_a_zero_budget():
    env = SetClusterEnv(long_trace(), "seed64", congestion="heavy", K=8, M=8, preempt_budget=0)
    env.reset(seed=0)
    for _ in range(300):
        m = env.action_masks()
        assert not m[1 + 3 * env.K :].any()
        _, _, term, trunc, _ = env.step(first_valid(m))
        if term or trunc:
            break


# -- the policy ----------------------------------------------------------------
th = pytest.importorskip("torch")
pytest.importorskip("sb3_contrib")

from ddl_gym.agents.policy import DEFAULT_MODEL  # noqa: E402

from ddl_gym.topology import CLUSTERS  # noqa: E402


def _extractor(K: int, M: int):
    from ddl_gym.agents.set_policy import SetExtractor
    from gymnasium import spaces

    th.manual_seed(0)
    space = spaces.Box(0.0, 1.0, shape=(set_obs_size(SetObsConfig(K=K, M=M)),))
    return SetExtractor(space, K=K, M=M, hidden=16)


def _busy_obs(K: int, M: int) -> np.ndarray:
    env = SetClusterEnv(long_trace(n=80), "seed64", congestion="heavy", K=K, M=M)
    obs, _ = env.reset(seed=0)
    for _ in range(400):
        p, r, _ = split_set_obs(obs, K, M)
        if p[:, 0].sum() >= 5 and r[:, 0].sum() >= 3:
            return obs
        obs, *_ = env.step(first_valid(env.action_masks()) if np.random.rand() < 0.3 else 0)
    raise AssertionError("never saw a queue of 5 and 3 running jobs")


def test_policy_output_is_invariant_to_the_order_of_jobs_in_the_queue():
    K, M = 8, 8
    fx = _extractor(K, M)
    np.random.seed(0)
    obs = _busy_obs(K, M)
    p, r, g = split_set_obs(obs, K, M)
    perm_p = np.random.default_rng(1).permutation(K)
    perm_r = np.random.default_rng(2).permutation(M)
    shuffled = np.concatenate([p[perm_p].ravel(), r[perm_r].ravel(), g])
    with th.no_grad():
        out = fx(th.as_tensor(obs)[None])[0].numpy()
        out_s = fx(th.as_tensor(shuffled)[None])[0].numpy()
    n = 1 + 3 * K + M
    logits, logits_s = out[:n], out_s[:n]
    np.testing.assert_allclose(logits_s[0], logits[0], rtol=1e-5, atol=1e-6)  # WAIT
    place, place_s = logits[1 : 1 + 3 * K].reshape(K, 3), logits_s[1 : 1 + 3 * K].reshape(K, 3)
    np.testing.assert_allclose(place_s, place[perm_p], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        logits_s[1 + 3 * K :], logits[1 + 3 * K :][perm_r], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(out_s[n:], out[n:], rtol=1e-5, atol=1e-6)  # value latent
    # and the scores of real jobs do not depend on the padding rows
    assert len(SET_PENDING_FIELDS) == p.shape[1] and len(SET_RUNNING_FIELDS) == r.shape[1]


@pytest.fixture(scope="module")
def tiny_set_model(tmp_path_factory):
    from ddl_gym.agents.config import EnvConfig, PPOConfig, SplitConfig, TrainConfig
    from ddl_gym.agents.train import train

    cfg = TrainConfig(
        env=EnvConfig(
            obs="set",
            K=8,
            M=8,
            tick_s=1800.0,
            preempt=True,
            windows_h=[24.0, 0.0],
            window_s=24 * 3600.0,
        ),
        split=SplitConfig(traces=["long:0"], n_val_windows=1),
        ppo=PPOConfig(policy="set", hidden=16, n_steps=64, batch_size=32, n_epochs=1),
        total_timesteps=256,
        n_envs=2,
        vec_env="dummy",
        eval_freq=128,
        checkpoint_freq=10_000,
    )
    out = tmp_path_factory.mktemp("set_run")
    return train(cfg, out, progress=False)


def test_set_checkpoint_loads_in_sb3_and_acts_on_two_cluster_shapes(tiny_set_model):
    from ddl_gym.agents import load_policy
    from ddl_gym.agents.set_policy import SetPolicy
    from sb3_contrib import MaskablePPO

    from ddl_gym.engine import simulate

    assert isinstance(MaskablePPO.load(str(tiny_set_model), device="cpu").policy, SetPolicy)
    agent = load_policy(tiny_set_model)
    trace = long_trace(n=25, seed=3)
    for cluster in ("seed64", Cluster(2, 4, 8, "seed"), Cluster(1, 4, 8, "seed")):
        result = simulate(trace, cluster, agent, congestion="heavy", **agent.engine_kwargs())
        assert result.summary["jobs"] == len(trace)


@pytest.mark.skipif(not DEFAULT_MODEL.is_file(), reason="no shipped model")
@pytest.mark.parametrize(
    "cluster",
    [*CLUSTERS, "2x4x8", Cluster(1, 4, 8, "seed")],
    ids=str,
)
def test_shipped_model_runs_on_every_cluster_preset(cluster):
    from ddl_gym.agents import load_policy

    from ddl_gym.engine import simulate

    agent = load_policy()
    assert agent.config.env.obs == "set"
    trace = long_trace(n=20, seed=4)
    result = simulate(trace, cluster, agent, congestion="heavy", **agent.engine_kwargs())
    assert result.summary["completed"] == len(trace)


def test_behaviour_cloning_imitates_the_teacher_and_ppo_must_beat_it(tmp_path):
    """BC warm start: the teacher's actions are labels the env can express,
    the fitted policy agrees with them far more than chance, and the warm
    start is the best model until PPO beats it on validation."""
    import json

    from ddl_gym.agents.bc import collect
    from ddl_gym.agents.config import BCConfig, EnvConfig, PPOConfig, SplitConfig, TrainConfig
    from ddl_gym.agents.envs import split_traces
    from ddl_gym.agents.train import train

    env = EnvConfig(obs="set", K=8, M=8, tick_s=1800.0, preempt=True, window_s=24 * 3600.0)
    split = SplitConfig(traces=["long:0"], n_val_windows=1)
    bc = BCConfig(teacher="gandiva", samples=300, epochs=6, batch_size=32, learning_rate=3e-3)
    demos = collect(env, split_traces(split)["train"], bc, gamma=0.99, seed=0)
    assert demos.stats["samples"] == 300 == len(demos.actions)
    assert demos.masks[np.arange(300), demos.actions].all()  # every label is a valid action
    assert demos.obs.shape == (300, set_obs_size(SetObsConfig(K=8, M=8)))
    cfg = TrainConfig(
        env=env,
        split=split,
        ppo=PPOConfig(policy="set", hidden=16, n_steps=64, batch_size=32, n_epochs=1),
        bc=bc,
        total_timesteps=0,  # BC only
        n_envs=1,
        vec_env="dummy",
    )
    best = train(cfg, tmp_path, progress=False)
    report = json.loads((tmp_path / "bc_stats.json").read_text())
    n_valid = demos.masks.sum(axis=1).mean()
    assert report["accuracy"] > max(report["wait_share"], 2.0 / n_valid)  # beats "always WAIT"
    assert best == tmp_path / "best" / "best_model.zip" and best.is_file()
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["bc_validation"] == report["validation"]


def test_levers_off_ablation_never_preempts_and_has_no_ticks():
    from ddl_gym.agents import load_policy

    from ddl_gym.engine import simulate
    from research.heldout import levers_off

    agent = levers_off(load_policy())
    assert agent.engine_kwargs()["tick_s"] is None
    result = simulate(long_trace(n=40), "seed64", agent, congestion="heavy")
    assert result.summary["preemptions"] == 0
    assert result.summary["completed"] == 40
