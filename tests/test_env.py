"""ClusterEnv: API checkers, vector envs, MaskablePPO, determinism, invariants
under random policies, FIFO replay against simulate(), rewards."""

from __future__ import annotations

import math
import warnings

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from ddl_gym.baselines.fifo import FifoPolicy

import ddl_gym
from ddl_gym.engine import WAIT, Place, Preempt, Status, simulate
from ddl_gym.env import ClusterEnv, heuristic_rollout
from ddl_gym.env.observation import GLOBAL_FIELDS, PENDING_FIELDS, RACK_FIELDS, RUNNING_FIELDS
from ddl_gym.env.wrappers import FlattenClusterObs
from ddl_gym.perf import Level
from ddl_gym.topology import Cluster
from ddl_gym.traces import default_trace, find_data_dir, head, load_trace, synthetic_trace
from tests.helpers import make_trace

SMALL = "ddl_gym/Small-v0"
TINY_SPEC = {"n_jobs": 12, "arrival_rate_per_h": 60.0, "duration_median_s": 300.0}


def small_trace(n: int = 20, seed: int = 0):
    return head(default_trace(seed=seed), n)


def make_small(**kwargs) -> gym.Env:
    return gym.make(SMALL, **kwargs)


def random_valid(rng: np.random.Generator, mask: np.ndarray) -> int:
    valid = np.flatnonzero(mask)
    return int(valid[rng.integers(len(valid))])


# -- API checkers -----------------------------------------------------------
def variant_kwargs(env_id: str) -> dict:
    """Keep the checkers fast: small traces for the big variants."""
    if env_id in ("ddl_gym/Cluster-v0", "ddl_gym/SeedWeek-v0"):
        return {"trace": small_trace(20)}
    if env_id == "ddl_gym/PhillyWeek-v0":
        return {"trace": synthetic_trace(n_jobs=40, seed=1, max_gpus=32)}
    if env_id.startswith("ddl_gym/Bench-"):  # the suite's traces; short episodes
        if find_data_dir() is None:
            pytest.skip("../shared/data not found (set DDL_GYM_DATA): the bench env needs it")
        return {"max_jobs": 20}
    return {}


@pytest.mark.parametrize("env_id", sorted(ddl_gym.ENV_VARIANTS))
def test_checkers_pass_on_every_variant(env_id):
    from gymnasium.utils.env_checker import check_env as gym_check
    from stable_baselines3.common.env_checker import check_env as sb3_check

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. the synthetic stand-in without data
        env = gym.make(env_id, **variant_kwargs(env_id))
        gym_check(env.unwrapped)
        sb3_check(env.unwrapped, warn=False)
        env.close()


def test_variants_use_real_traces_when_data_present():
    if find_data_dir() is None:
        pytest.skip("../shared/data not found (set DDL_GYM_DATA): variants use stand-ins")
    env = gym.make("ddl_gym/SeedWeek-v0").unwrapped
    assert env.cluster.num_gpus == 64
    assert len(env._source.pool[0]) == 411
    day = gym.make("ddl_gym/PhillyDay-v0").unwrapped
    day.reset(seed=3)
    first = len(day.engine.jobs)
    day.reset(seed=3)
    assert len(day.engine.jobs) == first > 0
    assert day.cluster.num_gpus == 512


def test_spaces_and_documented_fields():
    env = ClusterEnv(trace=small_trace(10), K=3, M=2)
    obs, info = env.reset(seed=0)
    assert env.action_space.n == 1 + 3 * 3 + 2
    assert obs["pending"].shape == (3, 21) and obs["running"].shape == (2, 18)
    assert obs["servers"].shape == (8,) and obs["racks"].shape == (4, 2)
    assert all(a.dtype == np.float32 for a in obs.values())
    assert env.observation_space.contains(obs)
    assert info["action_mask"].dtype == bool and info["action_mask"].shape == (12,)
    doc = " ".join(env.__doc__.split())
    for name in PENDING_FIELDS + RUNNING_FIELDS + GLOBAL_FIELDS + RACK_FIELDS:
        stem = name.rsplit("_", 1)[0]
        assert f"``{name}``" in doc or f"``{stem}_machine|rack|network``" in doc, name
    flat = FlattenClusterObs(env)
    o, _ = flat.reset(seed=0)
    assert o.shape == flat.observation_space.shape and o.dtype == np.float32
    assert flat.action_masks().shape == (12,)
    assert np.array_equal(flat.get_wrapper_attr("action_masks")(), flat.action_masks())


# -- vector envs and training ---------------------------------------------
def test_gymnasium_vector_envs_with_masks():
    for cls in (gym.vector.SyncVectorEnv, gym.vector.AsyncVectorEnv):
        envs = cls([lambda: make_small() for _ in range(2)])
        obs, info = envs.reset(seed=[1, 2])
        rng = np.random.default_rng(0)
        for _ in range(60):
            masks = np.stack(envs.call("action_masks"))
            assert masks.shape == (2, envs.single_action_space.n)
            actions = np.array([random_valid(rng, m) for m in masks])
            obs, rew, term, trunc, info = envs.step(actions)
            assert obs["pending"].shape[0] == 2
        envs.close()


def test_sb3_subproc_vec_env_env_method():
    from stable_baselines3.common.vec_env import SubprocVecEnv

    venv = SubprocVecEnv([lambda: FlattenClusterObs(make_small()) for _ in range(2)])
    venv.seed(0)
    venv.reset()
    rng = np.random.default_rng(0)
    for _ in range(40):
        masks = np.stack(venv.env_method("action_masks"))
        venv.step(np.array([random_valid(rng, m) for m in masks]))
    venv.close()


def test_maskable_ppo_trains_through_vec_env():
    import torch
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks
    from stable_baselines3.common.vec_env import DummyVecEnv

    torch.set_num_threads(1)
    venv = DummyVecEnv([lambda: FlattenClusterObs(make_small()) for _ in range(2)])
    model = MaskablePPO(
        "MlpPolicy",
        venv,
        n_steps=256,
        batch_size=128,
        n_epochs=2,
        policy_kwargs={"net_arch": [32]},
        seed=0,
        verbose=0,
    )
    model.learn(total_timesteps=2048)
    assert model.num_timesteps >= 2048
    obs = venv.reset()
    masks = get_action_masks(venv)
    action, _ = model.predict(obs, action_masks=masks, deterministic=True)
    assert all(masks[i, a] for i, a in enumerate(action))


# -- determinism --------------------------------------------------------------
def rollout(env: gym.Env, seed: int, steps: int = 400):
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    out = [obs]
    rewards = []
    for _ in range(steps):
        obs, r, term, trunc, info = env.step(random_valid(rng, info["action_mask"]))
        out.append(obs)
        rewards.append(r)
        if term or trunc:
            break
    return out, rewards, info


def test_same_seed_same_trajectory():
    a = rollout(make_small(), seed=7, steps=10_000)
    b = rollout(make_small(), seed=7, steps=10_000)
    assert len(a[0]) == len(b[0])
    for x, y in zip(a[0], b[0], strict=True):
        for key in x:
            assert np.array_equal(x[key], y[key])
    assert a[1] == b[1]
    assert a[2]["summary"] == b[2]["summary"]
    c = rollout(make_small(), seed=8, steps=10_000)
    assert c[2]["summary"] != a[2]["summary"]


def test_same_trajectory_in_another_process():
    steps = 150
    local, _, _ = rollout(make_small(), seed=3, steps=steps)
    envs = gym.vector.AsyncVectorEnv([make_small])
    obs, info = envs.reset(seed=3)
    rng = np.random.default_rng(3)
    remote = [obs]
    for _ in range(len(local) - 1):
        mask = envs.call("action_masks")[0]
        obs, _, term, trunc, _ = envs.step(np.array([random_valid(rng, mask)]))
        remote.append(obs)
    envs.close()
    for x, y in zip(local, remote, strict=True):
        for key in x:
            assert np.array_equal(x[key], y[key][0])


# -- invariants under random policies ----------------------------------------
def snapshot(env: ClusterEnv):
    e = env.engine
    return (
        e.now,
        tuple(e.free),
        tuple(e.rack_free),
        e.total_free,
        tuple(j.index for j in e.pending),
        tuple(e.running),
        tuple((j.status, j.progress, j.version) for j in e.jobs),
        len(e._heap),
    )


class Invariants:
    def __init__(self, env: ClusterEnv) -> None:
        self.env = env
        self.now = -math.inf
        self.progress = [0.0] * len(env.engine.jobs)
        self.status = [Status.FUTURE] * len(env.engine.jobs)

    def check(self) -> None:
        env = self.env
        e = env.engine
        c = e.cluster
        G, S = c.gpus_per_server, c.servers_per_rack
        assert e.now >= self.now, "time went back"
        self.now = e.now
        used = [0] * c.num_servers
        for job in e.running.values():
            assert job.status == Status.RUNNING
            assert sum(g for _, g in job.placement) == job.gpus
            for s, g in job.placement:
                used[s] += g
        for s in range(c.num_servers):
            assert e.free[s] >= 0
            assert e.free[s] + used[s] == G, f"server {s} double-booked"
        for r in range(c.racks):
            assert e.rack_free[r] == sum(e.free[r * S : (r + 1) * S])
        assert e.total_free == sum(e.free)
        n_done = 0
        for job in e.jobs:
            before, now = self.status[job.index], job.status
            if before == Status.DONE:
                assert now == Status.DONE, "a job completed twice or came back"
            if before != Status.FUTURE:
                assert now != Status.FUTURE, "a job arrived twice"
            if now != Status.FUTURE:
                assert job.arrival <= e.now
            self.status[job.index] = now
            done_work = job.iterations - e.remaining_iterations(job)
            assert done_work >= self.progress[job.index] - 1e-9 * max(1.0, job.iterations)
            self.progress[job.index] = max(done_work, self.progress[job.index])
            n_done += now == Status.DONE
        assert n_done == e.n_done
        assert sum(j.status == Status.PENDING for j in e.jobs) == len(e.pending)
        # the mask is exactly what the engine accepts
        mask = env.action_masks()
        for a in range(1, env.action_space.n):
            try:
                action = env.engine_action(a)
            except ValueError:
                assert not mask[a]
                continue
            valid = e.check(action) is None
            if isinstance(action, Preempt) and e.jobs[action.job].started_at == e.now:
                valid = False  # the env forbids preempting a job started at this instant
            assert mask[a] == valid, (a, action)


def random_scenario(rng: np.random.Generator) -> dict:
    gps = int(rng.choice([1, 2, 4, 8]))
    cluster = Cluster(
        int(rng.integers(1, 4)),
        int(rng.integers(1, 4)),
        gps,
        str(rng.choice(["seed", "nvswitch_ib", "pcie_25gbe"])),
    )
    trace = synthetic_trace(
        n_jobs=int(rng.integers(1, 14)),
        seed=int(rng.integers(1 << 30)),
        arrival_rate_per_h=float(rng.choice([5.0, 60.0, 600.0])),
        duration_median_s=300.0,
        max_duration_s=5000.0,
        gpu_mix={1: 4, 2: 2, 4: 2, 8: 1, 16: 1},
        max_gpus=cluster.num_gpus,
    )
    return {
        "trace": trace,
        "cluster": cluster,
        "K": int(rng.integers(1, 5)),
        "M": int(rng.integers(0, 4)),
        "congestion": str(rng.choice(["none", "heavy", "diurnal"])),
        "lease_s": [None, 600.0][int(rng.integers(2))],
        "queue_order": str(rng.choice(["arrival", "small_first", "las"])),
        "clairvoyant": bool(rng.integers(2)),
        "reward": str(rng.choice(["jct", "makespan", "comm", "slowdown"])),
        "max_steps": 3000,
    }


@pytest.mark.parametrize("policy", ["random_valid", "uniform"])
def test_invariants_under_random_policies(policy):
    rng = np.random.default_rng(42 if policy == "uniform" else 41)
    invalid = finished = 0
    for episode in range(40):
        env = ClusterEnv(**random_scenario(rng))
        obs, info = env.reset(seed=episode)
        inv = Invariants(env)
        inv.check()
        for _ in range(3000):
            if policy == "uniform":
                a = int(rng.integers(env.action_space.n))
            else:
                a = random_valid(rng, info["action_mask"])
            before = snapshot(env)
            was_valid = bool(env.action_masks()[a])
            obs, r, term, trunc, info = env.step(a)
            assert env.observation_space.contains(obs)
            assert np.array_equal(info["action_mask"], env.action_masks())
            if not was_valid:
                invalid += 1
                assert "invalid" in info and r == 0.0
                assert snapshot(env) == before, "an invalid action changed the state"
            else:
                assert "invalid" not in info
            inv.check()
            if term or trunc:
                break
        if term:
            finished += 1
            assert all(j.status == Status.DONE for j in env.engine.jobs)
            assert info["summary"]["completed"] == len(env.engine.jobs)
    assert finished >= 30
    if policy == "uniform":
        assert invalid > 100


def test_wait_is_masked_when_it_would_stall():
    trace = pd.DataFrame(
        {
            "job_id": ["a", "b"],
            "arrival_s": [0.0, 0.0],
            "gpus": [4, 8],
            "model": ["resnet50", "resnet18"],
            "iterations": [1000.0, 1000.0],
            "iter_time_s": [0.1, 0.1],
        }
    )
    env = ClusterEnv(trace=trace, cluster="1x2x4", K=2, M=1)
    obs, info = env.reset(seed=0)
    assert not info["action_mask"][0]
    before = snapshot(env)
    _, r, term, trunc, info = env.step(0)
    assert "must not idle" in info["invalid"] and r == 0.0 and not term
    assert snapshot(env) == before
    # job b (8 GPUs) only fits across both servers: rack level, not machine
    assert env.engine_action(1 + 3 * 1 + 1) == Place(1, Level.RACK)
    assert not info["action_mask"][1 + 3 * 1 + 0]
    assert "within one machine" in env.step(1 + 3 * 1 + 0)[4]["invalid"]
    _, _, _, _, info = env.step(1 + 3 * 1 + 1)
    # b cannot be preempted at the instant it started and a does not fit, so
    # WAIT was the only choice: the env moved on to b's completion
    assert "invalid" not in info and info["time_s"] == pytest.approx(12.5)
    assert env.engine.jobs[1].status == Status.DONE
    assert env.action_index(WAIT) == 0


def test_queue_orders():
    trace = pd.DataFrame(
        {
            "job_id": list("abcd"),
            "arrival_s": [0.0, 1.0, 2.0, 3.0],
            "gpus": [16, 4, 8, 1],
            "model": ["resnet50"] * 4,
            "iterations": [1e5] * 4,
            "iter_time_s": [0.1] * 4,
        }
    )
    env = ClusterEnv(trace=trace, cluster="1x2x8", K=4, M=2, queue_order="small_first")
    env.reset(seed=0)
    env.step(1 + 2)  # place job a (16 GPUs, network level: the whole cluster)
    for _ in range(3):
        env.step(0)  # b, c, d arrive and wait
    assert [j.job_id for j in env._obs.win_pending] == ["d", "b", "c"]
    env = ClusterEnv(trace=trace, cluster="1x2x8", K=2, M=2, queue_order="arrival")
    env.reset(seed=0)
    env.step(1 + 2)
    for _ in range(3):
        env.step(0)
    assert [j.job_id for j in env._obs.win_pending] == ["b", "c"]
    with pytest.raises(ValueError, match="not in the pending window"):
        env.action_index(Place(3, Level.NETWORK))


def test_fitted_comm_scale_shows_in_grad_bytes_and_slowdowns():
    from dataclasses import replace

    from ddl_gym.topology import FABRICS

    trace = make_trace([("a", 0.0, 8, "resnet50", 1e4, 0.1)])
    col = {name: i for i, name in enumerate(PENDING_FIELDS)}
    rows = []
    for factor in (1.0, 10.0):
        fabric = replace(FABRICS["pcie_25gbe"], comm_scale={"resnet50": factor})
        env = ClusterEnv(trace=trace, cluster=Cluster(2, 2, 4, fabric), K=1, M=1)
        obs, _ = env.reset(seed=0)
        rows.append(obs["pending"][0])
    # ten times the bytes: log10 bytes / 10 grows by exactly 0.1
    assert rows[1][col["log_grad_bytes"]] - rows[0][col["log_grad_bytes"]] == pytest.approx(
        0.1, abs=1e-6
    )
    assert rows[1][col["slowdown_rack"]] > rows[0][col["slowdown_rack"]]
    assert rows[1][col["log_buckets"]] == rows[0][col["log_buckets"]]


# -- heuristics through the env ---------------------------------------------
def replay_fifo(trace, cluster, **kwargs):
    env = ClusterEnv(trace=trace, cluster=cluster, queue_order="arrival", **kwargs)
    total, info = heuristic_rollout(env, FifoPolicy(), seed=0)
    return env, total, info


@pytest.mark.parametrize("congestion", ["none", "heavy"])
def test_fifo_through_env_equals_simulate(congestion):
    trace = default_trace(seed=0)
    env, total, info = replay_fifo(trace, "seed64", congestion=congestion)
    ref = simulate(trace, "seed64", FifoPolicy(), congestion=congestion)
    got = env.engine.result()
    pd.testing.assert_frame_equal(got.jobs, ref.jobs)
    assert info["summary"] == ref.summary
    # the jct reward sums to minus the total JCT (in hours)
    assert total == pytest.approx(-ref.jobs["jct_s"].sum() / 3600.0, rel=1e-9)


def test_fifo_replay_on_philly_week():
    data = find_data_dir()
    if data is None:
        pytest.skip("../shared/data not found (set DDL_GYM_DATA): Philly replay skipped")
    trace = load_trace(data / "traces/philly/philly_2017-11-13_to_2017-11-19.csv")
    env, _, info = replay_fifo(trace, "nvswitch512")
    ref = simulate(trace, "nvswitch512", FifoPolicy())
    pd.testing.assert_frame_equal(env.engine.result().jobs, ref.jobs)


def test_reward_kinds_sum_to_their_metrics():
    trace = small_trace(40)
    ref = simulate(trace, "seed64", FifoPolicy(), congestion="moderate")
    jobs = ref.jobs
    expected = {
        "makespan": -ref.summary["makespan_s"] / 3600.0,
        "comm": -ref.summary["comm_gpu_h"],
        "slowdown": -(jobs["jct_s"] / np.maximum(jobs["ideal_s"], 10.0)).sum(),
    }
    for kind, value in expected.items():
        _, total, _ = replay_fifo(trace, "seed64", congestion="moderate", reward=kind)
        assert total == pytest.approx(value, rel=1e-6), kind


def test_truncation_and_windows():
    env = ClusterEnv(trace=small_trace(30), max_steps=5)
    env.reset(seed=0)
    for _ in range(5):
        _, _, term, trunc, info = env.step(0 if env.action_masks()[0] else 3)
    assert trunc and not term and "summary" in info
    env = ClusterEnv(trace=default_trace(seed=1), window_s=6 * 3600.0, max_time_s=3600.0)
    env.reset(seed=5)
    n5 = [j.job_id for j in env.engine.jobs]
    env.reset(seed=6)
    n6 = [j.job_id for j in env.engine.jobs]
    env.reset(seed=5)
    assert [j.job_id for j in env.engine.jobs] == n5 and n5 != n6
    assert all(j.arrival < 6 * 3600.0 for j in env.engine.jobs)
    rng = np.random.default_rng(0)
    info = {"action_mask": env.action_masks()}
    while True:
        _, _, term, trunc, info = env.step(random_valid(rng, info["action_mask"]))
        if term or trunc:
            break
    assert term or env.engine.now - env._start >= 3600.0


def test_synthetic_spec_draws_a_trace_per_episode():
    env = ClusterEnv(trace=TINY_SPEC, cluster="2x2x4")
    env.reset(seed=0)
    a = [(j.arrival, j.gpus) for j in env.engine.jobs]
    env.reset(seed=1)
    b = [(j.arrival, j.gpus) for j in env.engine.jobs]
    assert a != b and len(a) == 12
    assert max(g for _, g in a + b) <= 16


def test_bad_arguments_fail_early():
    with pytest.raises(ValueError, match="unknown reward"):
        ClusterEnv(reward="speed")
    with pytest.raises(ValueError, match="queue_order"):
        ClusterEnv(queue_order="random")
    with pytest.raises(ValueError, match="GPUs"):
        ClusterEnv(trace=synthetic_trace(n_jobs=5, seed=0, gpu_mix={16: 1}), cluster="1x1x8")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"congestion": "extreme"}, "unknown congestion level 'extreme'"),
        ({"congestion": 1.5}, "background fraction 1.5"),
        ({"congestion": -0.1}, "background fraction -0.1"),
        ({"lease_s": 0}, "lease_s must be positive"),
        ({"tick_s": -5.0}, "tick_s must be positive"),
        ({"max_time_s": 0.0}, "max_time_s must be positive"),
        ({"max_steps": 0}, "max_steps must be >= 1"),
        ({"restore_s_per_gpu": -1.0}, "restore_s_per_gpu must be >= 0"),
        ({"reward_scale": float("nan")}, "reward_scale must be finite"),
        ({"trace": {"n_jobs": 10, "arrivals_per_h": 3}}, "unknown synthetic trace argument"),
        ({"trace": {"n_jobs": -3}}, "n_jobs must be >= 0"),
    ],
)
def test_bad_arguments_fail_in_the_constructor(kwargs, match):
    """Every bad argument fails in ``__init__`` (so in ``gym.make``), never first
    at ``reset()``."""
    with pytest.raises(ValueError, match=match):
        ClusterEnv(**kwargs)
    with pytest.raises(ValueError, match=match):
        gym.make("ddl_gym/Cluster-v0", **kwargs)


def test_strict_makes_invalid_actions_raise():
    trace = pd.DataFrame(
        {
            "job_id": ["a", "b"],
            "arrival_s": [0.0, 0.0],
            "gpus": [4, 8],
            "model": ["resnet50", "resnet18"],
            "iterations": [1000.0, 1000.0],
            "iter_time_s": [0.1, 0.1],
        }
    )
    lax = ClusterEnv(trace=trace, cluster="1x2x4", K=2, M=1)
    env = ClusterEnv(trace=trace, cluster="1x2x4", K=2, M=1, strict=True)
    for e in (lax, env):
        e.reset(seed=0)
    n = env.action_space.n
    # the default: a no-op that says why
    _, r, _, _, info = lax.step(n)
    assert r == 0.0 and f"outside Discrete({n})" in info["invalid"]
    before = snapshot(env)
    with pytest.raises(ValueError, match=rf"invalid action {n}: action {n} is outside Discrete"):
        env.step(n)
    with pytest.raises(ValueError, match="invalid action -1"):
        env.step(-1)
    with pytest.raises(ValueError, match="invalid action 0: WAIT refused"):
        env.step(0)
    with pytest.raises(ValueError, match="invalid action 4: .*within one machine"):
        env.step(1 + 3 * 1 + 0)
    assert snapshot(env) == before
    # valid actions still work under strict
    _, _, _, _, info = env.step(1 + 3 * 1 + 1)
    assert "invalid" not in info


def test_set_env_passes_strict_through():
    from ddl_gym.env import SetClusterEnv

    env = SetClusterEnv(trace="default", K=4, M=4, strict=True)
    env.reset(seed=0)
    assert env.strict
    with pytest.raises(ValueError, match="invalid action"):
        env.step(env.action_space.n + 3)
    with pytest.raises(ValueError, match="unknown congestion level"):
        SetClusterEnv(congestion="extreme")


def test_preempt_slots_round_trip_once_time_passed():
    trace = pd.DataFrame(
        {
            "job_id": ["a", "b"],
            "arrival_s": [0.0, 1.0],
            "gpus": [4, 8],
            "model": ["resnet50", "resnet18"],
            "iterations": [1000.0, 1000.0],
            "iter_time_s": [0.1, 0.1],
        }
    )
    env = ClusterEnv(trace=trace, cluster="1x2x4", K=2, M=1)
    env.reset(seed=0)
    preempt_a = 1 + 3 * 2
    _, _, _, _, info = env.step(env.action_index(Place(0, Level.MACHINE)))
    # a started at t=0 and cannot be preempted then; at b's arrival it can
    assert info["time_s"] == pytest.approx(1.0) and info["action_mask"][preempt_a]
    assert env.engine_action(preempt_a) == Preempt(0)
    assert env.action_index(Preempt(0)) == preempt_a
    env.step(preempt_a)
    assert env.engine.jobs[0].status == Status.PENDING


def _with_future(past: pd.DataFrame, future: pd.DataFrame | None, name: str):
    from ddl_gym.traces import Trace, validate

    jobs = past if future is None else pd.concat([past, future], ignore_index=True)
    return Trace(name, validate(jobs.reset_index(drop=True), name))


def test_flat_observation_and_mask_ignore_future_arrivals():
    """Three traces share their first 30 jobs and differ after a cut: the
    same jobs, other jobs, no jobs at all. Until the cut, under the same
    actions, every observation field and the mask must be equal (the old
    ``done`` feature divided by the episode's job count, and the WAIT mask
    looked at whether an arrival was still due: both leaked the future)."""
    spec = dict(
        arrival_rate_per_h=6.0,
        gpu_mix={1: 0.3, 2: 0.2, 4: 0.2, 8: 0.2, 16: 0.1},
        duration_median_s=6 * 3600.0,
        duration_sigma=1.0,
    )
    base = synthetic_trace(n_jobs=60, seed=1, **spec).jobs
    cut = float(base["arrival_s"].iloc[30])
    past = base[base["arrival_s"] < cut]
    other = synthetic_trace(n_jobs=40, seed=7, **spec).jobs
    other = other.assign(
        arrival_s=other["arrival_s"] + cut + 1.0, job_id="b" + other["job_id"].astype(str)
    )
    traces = [
        _with_future(past, base[base["arrival_s"] >= cut], "same"),
        _with_future(past, other, "other"),
        _with_future(past, None, "none"),
    ]
    envs = [ClusterEnv(t, "seed64", congestion="heavy", K=8, M=8) for t in traces]
    obs = [e.reset(seed=0)[0] for e in envs]
    rng = np.random.default_rng(0)
    steps = idle_queue = 0
    while all(e.engine.now < cut and not e.engine.done for e in envs):
        for o in obs[1:]:
            for key in obs[0]:
                np.testing.assert_array_equal(obs[0][key], o[key], err_msg=key)
        masks = [e.action_masks() for e in envs]
        for m in masks[1:]:
            np.testing.assert_array_equal(masks[0], m)
        e0 = envs[0].engine
        idle_queue += not e0.running and bool(e0.pending)
        # mostly WAIT, so the queue builds up and the cluster idles at times
        wait = masks[0][0] and (rng.random() < 0.7 or not masks[0][1:].any())
        a = 0 if wait else random_valid(rng, masks[0][1:]) + 1
        obs = [e.step(a)[0] for e in envs]
        steps += 1
    assert steps > 20
    assert idle_queue > 0  # the WAIT-mask case was met
