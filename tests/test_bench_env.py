"""``ddl_gym/Bench-v3`` (``ddl_gym.env.bench_env.BenchEnv``): a suite split's
(case, seed) episodes with the size-free observation; the episode is the
benchmark's run of the case; a model trained in it runs on every shape."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

import ddl_gym  # noqa: F401  (registers the ids)
from ddl_gym.benchmarks import get_suite
from ddl_gym.benchmarks.policies import resolve_policy
from ddl_gym.benchmarks.runner import run_case
from ddl_gym.env.bench_env import DEFAULT_SUITE, BenchEnv, probe_env, trace_files

BENCH = "ddl_gym/Bench-v3"


def smallest(split: str = "train", n: int = 1) -> list[str]:
    """The ``n`` train cases of the default suite with the fewest GPUs."""
    cases = sorted(get_suite(DEFAULT_SUITE).select(split), key=lambda c: c.cluster().num_gpus)
    return [c.name for c in cases[:n]]


def test_arguments_are_checked_in_the_constructor(data_dir):
    with pytest.raises(ValueError, match="unknown split 'tarin'"):
        BenchEnv(split="tarin")
    with pytest.raises(ValueError, match="no such case .*'nope@x'"):
        BenchEnv(cases=["nope@x"])
    with pytest.raises(ValueError, match="cluster come.* from each case"):
        BenchEnv(cluster="seed64")
    with pytest.raises(ValueError, match="unknown suite"):
        BenchEnv(suite="ddl-gym-v0")
    with pytest.raises(ValueError, match="max_jobs or window_s"):
        BenchEnv(max_jobs=10, window_s=3600.0)
    env = BenchEnv(cases=smallest())
    env.reset(seed=0)
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(seed=0, options={"cse": "x"})


def test_episodes_are_the_benchmarks_cases_drawn_from_the_seed(data_dir):
    env = gym.make(BENCH, suite=DEFAULT_SUITE, split="train")
    base: BenchEnv = env.unwrapped  # type: ignore[assignment]
    train = {c.name: c for c in get_suite(DEFAULT_SUITE).select("train")}
    seen = set()
    shape = env.observation_space.shape
    for seed in range(12):
        obs, info = env.reset(seed=seed)
        case = train[info["case"]]
        assert info["case_seed"] in case.seeds
        seen.add(case.name)
        # the case's trace, cluster and congestion
        engine = base.engine
        assert engine is not None
        assert len(engine.jobs) == len(case.workload.build(info["case_seed"]))
        assert engine.cluster == case.cluster() and base.cluster == case.cluster()
        assert engine.congestion.name == case.congestion
        assert obs.shape == shape  # whatever the cluster
        again, info2 = env.reset(seed=seed)  # same seed, same episode
        assert (info2["case"], info2["case_seed"]) == (info["case"], info["case_seed"])
        assert np.array_equal(obs, again)
    assert len(seen) >= 4
    assert len({train[n].cluster().num_gpus for n in seen}) >= 2


def test_whole_episode_equals_the_benchmark_run(data_dir):
    """FIFO through the env, on a whole case with the engine settings the
    benchmark gives FIFO (no ticks): the return is minus the total JCT of
    the benchmark's record of that (case, seed)."""
    from ddl_gym.baselines import make_policy

    from ddl_gym.env import heuristic_rollout

    (name,) = smallest()
    env = gym.make(BENCH, cases=[name], tick_s=None, K=256, M=64)
    total, info = heuristic_rollout(env, make_policy("fifo"), seed=3)
    base: BenchEnv = env.unwrapped  # type: ignore[assignment]
    case = get_suite(DEFAULT_SUITE).case(name)
    record = run_case(resolve_policy("fifo"), case, base.case_seed)
    assert info["summary"]["completed"] == info["summary"]["jobs"] == record["jobs"]
    assert -total * 3600 / record["jobs"] == pytest.approx(record["mean_jct_s"], rel=1e-9)


def test_options_pick_the_episode_and_max_jobs_cuts_it(data_dir):
    names = smallest(n=2)
    env = BenchEnv(cases=names, max_jobs=15)
    case = get_suite(DEFAULT_SUITE).case(names[1])
    _, info = env.reset(seed=0, options={"case": names[1], "seed": case.seeds[-1]})
    assert (info["case"], info["case_seed"]) == (names[1], case.seeds[-1])
    assert env.engine is not None and len(env.engine.jobs) == 15
    starts = set()
    for seed in range(6):
        env.reset(seed=seed, options={"case": names[1]})
        assert env.engine is not None
        starts.add(tuple(j.job_id for j in env.engine.jobs))
    assert len(starts) > 1  # the run of jobs is drawn, too
    with pytest.raises(ValueError, match="not a case of this env"):
        env.reset(seed=0, options={"case": "nope"})
    windowed = BenchEnv(cases=names, window_s=6 * 3600.0)
    windowed.reset(seed=1)
    assert windowed.engine is not None
    arrivals = [j.arrival for j in windowed.engine.jobs]
    assert 0 < len(arrivals) and max(arrivals) - min(arrivals) < 6 * 3600.0


def test_validation_and_test_splits_and_seeds(data_dir):
    env = BenchEnv(split="test", seeds=[7], max_jobs=5)
    _, info = env.reset(seed=1)
    assert info["case"] in {c.name for c in get_suite(DEFAULT_SUITE).select("test")}
    assert info["case_seed"] == 7


def test_probe_and_trace_files_need_no_data():
    probe = probe_env(split="train", cases=None, K=8, M=4, tick_s=600.0)
    assert probe.observation_space.shape == BenchEnv.__mro__[1](K=8, M=4).observation_space.shape
    assert probe._engine_kwargs["tick_s"] == 600.0
    files = trace_files(split="test")
    assert files == sorted(files) and "synthetic" not in files


def test_a_model_trained_in_it_runs_on_every_shape(data_dir, tmp_path):
    """A MaskablePPO model saved with ``save_model`` on the bench env loads
    with ``load_policy`` and completes every job of one case of each cluster
    shape of the suite, quick cases included (the first 40 jobs of seed 0)."""
    pytest.importorskip("sb3_contrib")
    from ddl_gym.agents import load_policy, save_model
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env

    from ddl_gym.benchmarks.policies import supports
    from ddl_gym.engine import simulate
    from ddl_gym.traces import head

    kwargs = {"cases": smallest(), "max_jobs": 20, "K": 8, "M": 8}
    env = make_vec_env(BENCH, n_envs=1, env_kwargs=kwargs)
    model = MaskablePPO("MlpPolicy", env, seed=0, n_steps=64, batch_size=64)
    model.learn(64)
    path = save_model(model, tmp_path / "bench.zip", BENCH, kwargs)
    agent = load_policy(path)
    assert agent.engine_kwargs()["tick_s"] == 1800.0
    by_shape = {}
    suite = get_suite(DEFAULT_SUITE)
    for case in suite.cases + suite.quick:
        by_shape.setdefault((case.shape, case.fabric), case)
    assert len(by_shape) >= 3
    for case in by_shape.values():
        cluster = case.cluster()
        assert supports(agent, cluster) is None
        trace = head(case.workload.build(case.seeds[0]), 40)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the trace-overlap warning, if any
            s = simulate(trace, cluster, agent, congestion=case.congestion).summary
        assert s["completed"] == s["jobs"] == len(trace), case.name


def test_missing_data_fails_at_make_naming_the_fetch_command(tmp_path, monkeypatch):
    from ddl_gym.benchmarks.workload import DataMissingError

    monkeypatch.setenv("DDL_GYM_DATA", str(tmp_path / "empty"))
    with pytest.raises(DataMissingError, match="ddl-gym data fetch"):
        gym.make(BENCH)


def test_foreign_input_data_is_refused_for_a_suite_that_pins_it(data_dir, tmp_path, monkeypatch):
    """A suite that pins its inputs' SHA-256 (ddl-gym-v3): an input file that
    is not the manifest's fails gym.make, naming the file, as the benchmark's
    runs refuse it."""
    from ddl_gym.benchmarks.provenance import InputChecksumError, case_inputs

    try:
        suite = get_suite("ddl-gym-v3")
    except ValueError:
        pytest.skip("no ddl-gym-v3 in this tree")
    case = min(
        (c for c in suite.select("train") if case_inputs(c)), key=lambda c: c.cluster().num_gpus
    )
    for rel in case_inputs(case):
        copy = tmp_path / rel
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes((data_dir / rel).read_bytes() + b"\n")
    monkeypatch.setenv("DDL_GYM_DATA", str(tmp_path))
    with pytest.raises(InputChecksumError, match=case_inputs(case)[0]):
        gym.make(BENCH, suite="ddl-gym-v3", cases=[case.name])
