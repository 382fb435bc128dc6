"""The env on typed clusters (issue 53): typed place actions, masks that follow
the jobs' accepted types, the typed observation fields (by hand on a tiny
cluster), Gymnasium's checker, and the untyped env unchanged."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest
from gymnasium.utils.env_checker import check_env

from ddl_gym.engine import Place, Status
from ddl_gym.env import ClusterEnv, SetClusterEnv
from ddl_gym.env.set_observation import split_set_obs, split_typed_set_obs
from ddl_gym.env.typed_obs import (
    MAX_TYPES,
    TYPE_GLOBAL_FIELDS,
    TYPE_PENDING_FIELDS,
    TYPE_RUNNING_FIELDS,
)
from ddl_gym.perf import Level
from ddl_gym.topology import Cluster, GpuKind, get_fabric
from ddl_gym.traces import synthetic_trace
from ddl_gym.traces.schema import make_trace

K80, V100 = 0, 1  # type indices of TINY


def tiny_cluster(**kwargs) -> Cluster:
    """2 racks x 2 servers x 4 GPUs: rack 0 K80, rack 1 V100."""
    return Cluster(
        2,
        2,
        4,
        get_fabric("seed"),
        gpu_kinds=(GpuKind("K80"), GpuKind("V100-16GB")),
        server_kind=(0, 0, 1, 1),
        **kwargs,
    )


def job(job_id, arrival, gpus, model="resnet50", iters=1000.0, t=0.1, types="", mem=np.nan):
    return {
        "job_id": job_id,
        "arrival_s": arrival,
        "gpus": gpus,
        "model": model,
        "iterations": iters,
        "iter_time_s": t,
        "gpu_types": types,
        "gpu_mem_gib": mem,
    }


def run_row(speed: float, kind: int) -> list[float]:
    """Expected ``TYPE_RUNNING_FIELDS`` of a job on one type."""
    onehot = [0.0] * MAX_TYPES
    onehot[kind] = 1.0
    return [speed, 0.0, *onehot]


def trace_of(rows):
    return make_trace("typed", pd.DataFrame(rows), None)


def random_typed_trace(n: int, seed: int):
    """Jobs accepting K80 only, V100 only, either, or needing 16 GiB (not K80's 12)."""
    rng = np.random.default_rng(seed)
    specs = ["", "K80", "V100-16GB", "K80|V100-16GB"]
    models = ["resnet50", "vgg16", "transformer", "resnet18"]
    rows = []
    t = 0.0
    for i in range(n):
        t += float(rng.exponential(120.0))
        spec = specs[int(rng.integers(len(specs)))]
        mem = 16.0 if spec == "" and rng.random() < 0.3 else np.nan
        rows.append(
            job(
                f"j{i}",
                t,
                int(rng.choice([1, 2, 4, 8])),
                model=models[int(rng.integers(len(models)))],
                iters=float(rng.integers(200, 3000)),
                types=spec,
                mem=mem,
            )
        )
    return trace_of(rows)


# -- the checkers ------------------------------------------------------------
@pytest.mark.parametrize("cls", [ClusterEnv, SetClusterEnv])
def test_check_env_on_a_typed_cluster(cls):
    env = cls(trace=random_typed_trace(12, 0), cluster=tiny_cluster(), K=4, M=4)
    assert env.typed
    check_env(env, skip_render_check=True)
    n = 1 + 3 * 4 + 4 + 3 * MAX_TYPES * 4
    assert env.action_space.n == n  # pyright: ignore[reportAttributeAccessIssue]


def test_check_env_typed_layout_on_untyped_and_blind_layout_on_typed():
    untyped = SetClusterEnv(
        trace=synthetic_trace(n_jobs=10, seed=1, max_gpus=8), cluster="2x2x4", K=4, M=4, typed=True
    )
    check_env(untyped, skip_render_check=True)
    obs, _ = untyped.reset(seed=0)
    _, _, types = split_typed_set_obs(obs, 4, 4)
    assert types[0].tolist() == [1.0, 1.0, 1.0, 1.0]  # one type: the whole cluster, all free
    assert not types[1:].any()
    blind = SetClusterEnv(
        trace=random_typed_trace(10, 1), cluster=tiny_cluster(), K=4, M=4, typed=False
    )
    check_env(blind, skip_render_check=True)
    assert blind.action_space.n == 1 + 3 * 4 + 4  # pyright: ignore[reportAttributeAccessIssue]
    assert blind.observation_space.shape == (4 * 23 + 4 * 21 + 13,)


def test_more_types_than_slots_is_an_error_naming_the_limit():
    names = ("K80", "P100", "V100-16GB", "V100-32GB", "T4", "A10", "A100-40GB", "A100-80GB", "H100")
    assert len(names) == MAX_TYPES + 1
    kinds = tuple(GpuKind(n) for n in names)
    n = len(kinds)
    cluster = Cluster(1, n, 4, get_fabric("seed"), gpu_kinds=kinds, server_kind=tuple(range(n)))
    trace = trace_of([job("a", 0.0, 1)])
    with pytest.raises(ValueError, match=f"{n} GPU types.*{MAX_TYPES} type slots.*MAX_TYPES"):
        SetClusterEnv(trace=trace, cluster=cluster)
    # the type-blind layout has no type slots: any number of types
    env = SetClusterEnv(trace=trace, cluster=cluster, typed=False, K=2, M=2)
    env.reset(seed=0)


# -- masks never allow an unaccepted type ------------------------------------
def _check_step(env, mask) -> None:
    """Every running job is on a type it accepts; the mask equals the engine's check."""
    e = env.unwrapped.engine
    sk = e.cluster.server_kind
    for j in e.running.values():
        kinds = {sk[s] for s, _ in j.placement}
        assert kinds <= set(j.accepts), f"job {j.job_id} on {kinds}, accepts {j.accepts}"
        if not e.cluster.mix_types:
            assert len(kinds) == 1 and j.kind in j.accepts
    if e.done:
        return
    codec, obs = env.unwrapped._codec, env.unwrapped._obs
    for a in range(1, len(mask)):
        if a > 3 * env.unwrapped.K and a < 1 + 3 * env.unwrapped.K + env.unwrapped.M:
            continue  # preemptions: the env's own rules (test_env)
        try:
            action = codec.engine_action(a, obs)
        except ValueError:
            assert not mask[a]
            continue
        assert bool(mask[a]) == (e.check(action) is None), (a, action, e.check(action))
        if isinstance(action, Place) and action.gpu_type is not None and mask[a]:
            assert action.gpu_type in e.jobs[action.job].accepts


def uneven_cluster() -> Cluster:
    """2 racks x 2 servers of up to 8 GPUs, servers of 2, 8 (K80), 8, 3 (V100) GPUs."""
    return Cluster(
        2,
        2,
        8,
        get_fabric("seed"),
        gpu_kinds=(GpuKind("K80"), GpuKind("V100-16GB")),
        server_kind=(0, 0, 1, 1),
        server_gpus=(2, 8, 8, 3),
    )


@pytest.mark.parametrize("cls", [ClusterEnv, SetClusterEnv])
@pytest.mark.parametrize("shape", ["tiny", "mixable", "uneven"])
def test_random_masked_rollouts_respect_types_and_finish(cls, shape):
    cluster = {
        "tiny": tiny_cluster(),
        "mixable": tiny_cluster(mix_types=True),
        "uneven": uneven_cluster(),
    }[shape]
    for seed in range(3):
        trace = random_typed_trace(25, seed)
        env = cls(trace=trace, cluster=cluster, K=4, M=4)
        obs, info = env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        steps = 0
        while True:
            _check_step(env, info["action_mask"])
            valid = np.flatnonzero(info["action_mask"])
            obs, _, terminated, truncated, info = env.step(int(valid[rng.integers(len(valid))]))
            assert "invalid" not in info, info.get("invalid")
            steps += 1
            if terminated or truncated:
                break
        assert terminated and not truncated
        e = env.unwrapped.engine  # pyright: ignore[reportAttributeAccessIssue]
        assert all(j.status == Status.DONE for j in e.jobs)
        assert e.n_done == len(trace.jobs)
        gpu_h = sum(v for k, v in info["summary"].items() if k.startswith("gpu_h_"))
        used = sum(float(x) for x in e.result().jobs["gpu_time_s"]) / 3600.0
        assert gpu_h == pytest.approx(used, rel=1e-9)


# -- observation values by hand ----------------------------------------------
def test_set_observation_typed_values_by_hand():
    rows = [
        job("a", 0.0, 4),  # resnet50, any type: V100 1.0, K80 0.1588 (Gavel)
        job("b", 0.0, 2, types="K80"),
        job("c", 0.0, 8, types="V100-16GB"),
        job("d", 0.0, 4, types="K80"),  # keeps a choice open (no time skipped below)
    ]
    env = SetClusterEnv(trace=trace_of(rows), cluster=tiny_cluster(), K=4, M=4)
    obs, info = env.reset(seed=0)
    ptype, rtype, gtype = split_typed_set_obs(obs, 4, 4)
    assert TYPE_PENDING_FIELDS == ("speed", "feasible_machine", "feasible_rack", "feasible_network")
    assert TYPE_GLOBAL_FIELDS == ("present", "free", "share", "max_server_free")
    # per type: present, free fraction, share of the cluster, largest free server block
    np.testing.assert_allclose(gtype[:2], [[1, 1, 0.5, 1], [1, 1, 0.5, 1]])
    assert not gtype[2:].any()
    # job a: its speed on K80 / on V100 (its best), feasible everywhere
    np.testing.assert_allclose(ptype[0, :2], [[0.1588, 1, 1, 1], [1.0, 1, 1, 1]], rtol=1e-6)
    # job b accepts K80 only: its best type is K80 (1.0), V100 refused
    np.testing.assert_allclose(ptype[1, :2], [[1.0, 1, 1, 1], [0, 0, 0, 0]])
    # job c: 8 V100s = both V100 servers: not on one machine, in one rack
    np.testing.assert_allclose(ptype[2, :2], [[0, 0, 0, 0], [1.0, 0, 1, 1]])
    np.testing.assert_allclose(ptype[3, :2], [[1.0, 1, 1, 1], [0, 0, 0, 0]])
    assert not ptype[:, 2:].any() and not rtype.any()
    # the typed mask is the feasible columns; the base one is their "or"
    K, M = 4, 4
    base = 1 + 3 * K + M
    mask = info["action_mask"]
    for k in range(4):
        for t in range(MAX_TYPES):
            got = mask[base + 3 * (k * MAX_TYPES + t) : base + 3 * (k * MAX_TYPES + t) + 3]
            want = ptype[k, t, 1:] if t < 2 else np.zeros(3)
            assert got.tolist() == [bool(x) for x in want], (k, t)
        assert mask[1 + 3 * k : 4 + 3 * k].tolist() == [
            bool(x) for x in ptype[k, :2, 1:].max(axis=0)
        ]
    pend, _, _ = split_set_obs(obs, K, M)
    assert pend[2, 12:15].tolist() == [0.0, 1.0, 1.0]  # base feasible_* of c

    # place a on V100 (typed action), b on K80
    a = env.action_index(Place(0, Level.MACHINE, V100))
    assert a == base + 3 * (0 * MAX_TYPES + V100) + 0
    obs, *_ = env.step(a)
    obs, _, _, _, info = env.step(env.action_index(Place(1, Level.MACHINE, K80)))
    ptype, rtype, gtype = split_typed_set_obs(obs, 4, 4)
    np.testing.assert_allclose(gtype[:2], [[1, 0.75, 0.5, 1], [1, 0.5, 0.5, 1]])
    assert env.engine is not None and env.engine.now == 0.0
    # c (now row 0) no longer fits the V100s: every action of it masked; d
    # (row 1) fits the K80 server left whole
    np.testing.assert_allclose(ptype[0, :2], [[0, 0, 0, 0], [1.0, 0, 0, 0]])
    np.testing.assert_allclose(ptype[1, :2], [[1.0, 1, 1, 1], [0, 0, 0, 0]])
    mask = info["action_mask"]
    assert not mask[1:4].any() and not mask[base : base + 3 * MAX_TYPES].any()
    assert mask[4:7].all()
    assert TYPE_RUNNING_FIELDS[:2] == ("speed", "mixed")
    # running rows, start order: a on V100 (its best: 1.0), b on K80 (its only type: 1.0)
    np.testing.assert_allclose(rtype[0], run_row(1.0, V100))
    np.testing.assert_allclose(rtype[1], run_row(1.0, K80))


def test_dict_observation_typed_values_and_slower_type():
    rows = [job("a", 0.0, 4), job("b", 0.0, 4)]
    env = ClusterEnv(trace=trace_of(rows), cluster=tiny_cluster(), K=2, M=2)
    obs, _ = env.reset(seed=0)
    assert obs["pending_types"].shape == (2, MAX_TYPES, 4)
    np.testing.assert_allclose(obs["pending_types"][0, :2, 0], [0.1588, 1.0], rtol=1e-6)
    obs, *_ = env.step(env.action_index(Place(0, Level.MACHINE, K80)))
    np.testing.assert_allclose(obs["types"][:2], [[1, 0.5, 0.5, 1], [1, 1, 0.5, 1]])
    # a runs on K80 at 0.1588 of its best type; its slowdown stays communication only
    np.testing.assert_allclose(obs["running_types"][0], run_row(0.1588, K80), rtol=1e-6)
    assert obs["running"][0, 9] == 0.0  # one server: no communication
    obs, *_ = env.step(env.action_index(Place(1, Level.MACHINE, V100)))
    e = env.engine
    assert e is not None
    # no choice left until b ends at 25 s (skipped inside the step): V100s free again
    assert e.now == pytest.approx(25.0)
    np.testing.assert_allclose(obs["types"][:2], [[1, 0.5, 0.5, 1], [1, 1, 0.5, 1]])
    assert not obs["running_types"][1].any()
    while not e.done:
        _, _, terminated, _, info = env.step(0)
        if terminated:
            break
    ends = dict(zip(e.result().jobs["job_id"], e.result().jobs["end_s"], strict=True))
    # the engine API's hand-checked case: 4 V100s 25 s, 4 K80s 1000*0.1/0.1588/4 s
    assert ends["b"] == pytest.approx(25.0)
    assert ends["a"] == pytest.approx(1000 * 0.1 / 0.1588 / 4)


def test_typed_action_round_trip_and_reasons():
    rows = [job("a", 0.0, 2, types="V100-16GB"), job("b", 0.0, 2)]
    env = SetClusterEnv(trace=trace_of(rows), cluster=tiny_cluster(), K=4, M=4)
    _, info = env.reset(seed=0)
    base = 1 + 3 * 4 + 4
    for t in range(MAX_TYPES):
        for level in Level:
            a = base + 3 * t + int(level)
            if t < 2:
                assert env.engine_action(a) == Place(0, level, t)
                assert env.action_index(Place(0, level, t)) == a
            else:
                with pytest.raises(ValueError, match="type slot"):
                    env.engine_action(a)
    assert not info["action_mask"][base + 3 * K80 : base + 3 * K80 + 3].any()
    _, _, _, _, info = env.step(base + 3 * K80)
    assert "does not accept GPU type K80" in info["invalid"]
    _, _, _, _, info = env.step(base + 3 * 3)
    assert "type slot 3 is empty" in info["invalid"]
    blind = SetClusterEnv(trace=trace_of(rows), cluster=tiny_cluster(), K=4, M=4, typed=False)
    blind.reset(seed=0)
    with pytest.raises(ValueError, match="typed=True"):
        blind.action_index(Place(0, Level.MACHINE, V100))


# -- the untyped env unchanged -----------------------------------------------
def _rollout_digest(env, seed: int) -> tuple[str, int]:
    """Hash of every observation, mask, reward and the summary of a masked
    random rollout."""
    h = hashlib.sha256()

    def feed(o, m):
        if isinstance(o, dict):
            for k in sorted(o):
                h.update(k.encode())
                h.update(np.ascontiguousarray(o[k]).tobytes())
        else:
            h.update(o.tobytes())
        h.update(m.tobytes())

    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    feed(obs, info["action_mask"])
    steps = 0
    while True:
        valid = np.flatnonzero(info["action_mask"])
        obs, r, term, trunc, info = env.step(int(valid[rng.integers(len(valid))]))
        steps += 1
        feed(obs, info["action_mask"])
        h.update(np.float64(r).tobytes())
        if term or trunc:
            break
    h.update(repr(sorted(info["summary"].items())).encode())
    return h.hexdigest()[:16], steps


# digests of the env as committed before typed clusters reached it (c543c4d)
UNTYPED_DIGESTS = [
    (ClusterEnv, {}, ("01fbb5e23443a89a", 339)),
    (SetClusterEnv, {}, ("1dc79ecc26e66df8", 128)),
    (ClusterEnv, {"clairvoyant": True, "congestion": "moderate"}, ("2c8dfdfd03521e11", 339)),
    (SetClusterEnv, {"clairvoyant": True, "congestion": "heavy"}, ("120554fdb9190159", 128)),
]


@pytest.mark.parametrize(("cls", "kwargs", "digest"), UNTYPED_DIGESTS)
def test_untyped_env_unchanged(cls, kwargs, digest):
    trace = synthetic_trace(n_jobs=25, seed=3, max_gpus=8, duration_median_s=600.0)
    env = cls(trace=trace, cluster="2x2x4", K=4, M=4, **kwargs)
    assert not env.typed
    assert env.action_space.n == 17  # pyright: ignore[reportAttributeAccessIssue]
    if cls is SetClusterEnv:
        assert env.observation_space.shape == (189,)
    else:
        assert set(env.observation_space.spaces) == {  # pyright: ignore[reportAttributeAccessIssue]
            "servers",
            "racks",
            "pending",
            "running",
            "global",
        }
    assert _rollout_digest(env, 7) == digest


# -- the agents' architecture on typed observations --------------------------
def test_typed_set_extractor_acts_on_a_typed_env():
    th = pytest.importorskip("torch")
    from ddl_gym.agents.typed_set_policy import TypedSetExtractor

    env = SetClusterEnv(trace=random_typed_trace(12, 0), cluster=tiny_cluster(), K=4, M=4)
    obs, info = env.reset(seed=0)
    th.manual_seed(0)
    fx = TypedSetExtractor(env.observation_space, K=4, M=4, hidden=16)  # pyright: ignore[reportArgumentType]
    out = fx(th.as_tensor(obs).unsqueeze(0))
    n = env.action_space.n  # pyright: ignore[reportAttributeAccessIssue]
    assert fx.n_actions == n and out.shape == (1, n + 16)
    assert th.isfinite(out).all()
    with pytest.raises(ValueError, match="typed=True"):
        TypedSetExtractor(
            SetClusterEnv(
                trace=random_typed_trace(3, 0), cluster=tiny_cluster(), K=4, M=4, typed=False
            ).observation_space,  # type: ignore[arg-type]
            K=4,
            M=4,
        )


def test_shipped_model_acts_on_typed_clusters():
    """The shipped checkpoint acts type-blind on a typed cluster (typed=False),
    and its weights loaded into the typed extractor give the same untyped
    logits and value on the typed observation's prefix."""
    th = pytest.importorskip("torch")
    from pathlib import Path

    from ddl_gym.agents.policy import load_model
    from ddl_gym.agents.typed_set_policy import TypedSetExtractor

    from ddl_gym.env.set_observation import untyped_set_obs_size

    path = Path(__file__).resolve().parents[1] / "agents" / "models" / "default.zip"
    model = load_model(path, "maskable_ppo", "set")
    fx = model.policy.features_extractor
    K, M, hidden = fx.K, fx.M, fx.hidden
    trace = random_typed_trace(20, 2)
    blind = SetClusterEnv(trace=trace, cluster=tiny_cluster(), K=K, M=M, typed=False)
    obs, info = blind.reset(seed=0)
    for _ in range(30):  # the shipped model picks masked-in actions only
        a, _ = model.predict(obs, action_masks=info["action_mask"], deterministic=True)
        obs, _, terminated, _, info = blind.step(int(a))
        assert "invalid" not in info
        if terminated:
            break

    typed = SetClusterEnv(trace=trace, cluster=tiny_cluster(), K=K, M=M)
    obs, _ = typed.reset(seed=0)
    tx = TypedSetExtractor(typed.observation_space, K=K, M=M, hidden=hidden)  # pyright: ignore[reportArgumentType]
    tx.load_untyped(fx.state_dict())
    x = th.as_tensor(obs).unsqueeze(0)
    with th.no_grad():
        got = tx(x)
        want = fx(x[..., : untyped_set_obs_size(K, M)])
    n0 = 1 + 3 * K + M
    th.testing.assert_close(got[..., :n0], want[..., :n0])
    th.testing.assert_close(got[..., tx.n_actions :], want[..., n0:])
    assert got.shape[-1] == typed.action_space.n + hidden  # pyright: ignore[reportAttributeAccessIssue]


def test_typed_set_policy_trains_a_few_steps_in_maskable_ppo():
    pytest.importorskip("torch")
    from ddl_gym.agents.typed_set_policy import TypedSetPolicy
    from sb3_contrib import MaskablePPO

    env = SetClusterEnv(trace=random_typed_trace(15, 4), cluster=tiny_cluster(), K=4, M=4)
    kwargs = {"features_extractor_kwargs": {"K": 4, "M": 4, "hidden": 16}}
    model = MaskablePPO(
        TypedSetPolicy, env, n_steps=32, batch_size=16, n_epochs=1, policy_kwargs=kwargs, seed=0
    )
    model.learn(32)
    obs, info = env.reset(seed=1)
    a, _ = model.predict(obs, action_masks=info["action_mask"])
    assert info["action_mask"][int(a)]


@pytest.mark.parametrize("name", ["fifo", "gandiva", "tiresias-typed", "gandiva-typed", "gavel"])
def test_heuristics_through_the_typed_env_equal_simulate(name):
    """Type-aware policies' typed places go through the typed actions; a
    type-blind policy's impossible placement ends its turn as in simulate().
    (Not type-blind Tiresias: on this trace it preempts a job at the instant
    it started, which simulate() allows once and the env never does.)"""
    from ddl_gym.baselines import make_policy

    from ddl_gym.engine import simulate
    from ddl_gym.env import heuristic_rollout

    trace = random_typed_trace(30, 5)
    ref = simulate(trace, tiny_cluster(), make_policy(name), seed=0)
    policy = make_policy(name)
    env = ClusterEnv(trace=trace, cluster=tiny_cluster(), K=64, M=64, **policy.engine_kwargs())
    heuristic_rollout(env, policy, seed=0)
    assert env.engine is not None
    got = env.engine.result()
    pd.testing.assert_frame_equal(got.jobs, ref.jobs)
    assert got.summary == ref.summary
    if name == "fifo":  # its head-of-line placements often fit no accepted type
        assert got.summary["deferred_places"] > 0
