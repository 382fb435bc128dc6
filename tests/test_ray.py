"""Ray: the grid as Ray tasks gives the local results; RLlib PPO trains on
the env with action masking for one iteration. Skipped where Ray is absent
(install it with ``pip install 'ddl-gym[ray]'``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ray = pytest.importorskip("ray", reason="Ray not installed: pip install 'ddl-gym[ray]'")

from ddl_gym.experiments.cells import simulate_cell  # noqa: E402
from ddl_gym.experiments.ray_backend import run_cells  # noqa: E402
from ddl_gym.scenarios import SCENARIOS  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ray_local():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def small_cells() -> list[dict]:
    scenario = SCENARIOS["small"].to_dict()
    return [
        {"scenario": scenario, "policy": p, "congestion": c, "seed": s}
        for p in ("fifo", "dally")
        for c in ("none", "heavy")
        for s in (0, 1)
    ]


def test_ray_backend_equals_local(ray_local):
    cells = small_cells()
    local = pd.DataFrame([simulate_cell(**c) for c in cells])
    seen: list[int] = []
    remote = pd.DataFrame(run_cells(simulate_cell, cells, on_result=lambda i, _: seen.append(i)))
    assert sorted(seen) == list(range(len(cells)))
    pd.testing.assert_frame_equal(local, remote)


def _example():
    path = REPO / "examples" / "ray_rllib_ppo.py"
    spec = importlib.util.spec_from_file_location("ray_rllib_ppo", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_masked_env_follows_rllib_convention():
    ex = _example()
    env = ex.MaskedClusterEnv()
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"action_mask", "observations"}
    assert env.observation_space.contains(obs)
    for _ in range(50):
        valid = np.flatnonzero(obs["action_mask"])
        obs, _, terminated, truncated, _ = env.step(int(valid[-1]))
        assert env.observation_space.contains(obs)
        if terminated or truncated:
            break


def test_rllib_ppo_one_iteration_with_masking(ray_local):
    import torch
    from ray.rllib.core.columns import Columns

    ex = _example()
    config = ex.build_config(train_batch_size=128, minibatch_size=64, num_epochs=1)
    algo = config.build_algo()
    try:
        result = algo.train()
        assert result["env_runners"]["num_env_steps_sampled_lifetime"] >= 128
        # the module masks: invalid actions get (practically) no probability
        env = ex.MaskedClusterEnv()
        obs, _ = env.reset(seed=1)
        module = algo.get_module()
        batch = {Columns.OBS: {k: torch.as_tensor(v)[None] for k, v in obs.items()}}
        with torch.no_grad():
            logits = module.forward_inference(batch)[Columns.ACTION_DIST_INPUTS][0]
        probs = torch.softmax(logits, -1).numpy()
        invalid = obs["action_mask"] == 0
        assert invalid.any()
        assert probs[invalid].sum() < 1e-6
    finally:
        algo.stop()


def test_rllib_multi_env_model_judged_in_simulate_beside_dally(ray_local):
    """What an RLlib user does: PPO on two vectorised env copies per runner
    (num_envs_per_env_runner), then the trained module in simulate() against
    Dally on the same unseen trace."""
    pytest.importorskip("sb3_contrib")  # the EnvModelPolicy lives in ddl_gym.agents
    from ddl_gym.baselines.dally import DallyPolicy

    from ddl_gym import ENV_VARIANTS
    from ddl_gym.engine import simulate
    from ddl_gym.traces import synthetic_trace

    ex = _example()
    config = ex.build_config(
        train_batch_size=128, minibatch_size=64, num_epochs=1, envs_per_runner=2
    )
    algo = config.build_algo()
    try:
        result = algo.train()
        assert result["env_runners"]["num_env_steps_sampled_lifetime"] >= 128
        policy = ex.module_policy(algo.get_module())
    finally:
        algo.stop()
    trace = synthetic_trace(seed=77, **ENV_VARIANTS["ddl_gym/Small-v0"]["trace"])
    agent = simulate(trace, policy.cluster, policy, congestion="heavy").summary
    dally = simulate(trace, policy.cluster, DallyPolicy(), congestion="heavy").summary
    assert agent["completed"] == dally["completed"] == len(trace)


@pytest.mark.parametrize("scenario", [["small"], ["default", "--jobs", "40"]])
def test_cli_compare_ray_equals_local(tmp_path, scenario):
    """Through the real entry point: the summary tables are identical (but
    for wall time). ``small`` runs the CLI's scenario cells, ``default`` the
    named-workload cells (ddl_gym.experiments.grid)."""
    import os
    import subprocess
    import sys

    def compare(backend: str) -> pd.DataFrame:
        args = ["compare", "-s", *scenario, "--policies", "fifo", "--seeds", "0,1"]
        args += ["--backend", backend, "--out", str(tmp_path), "--name", backend, "--no-progress"]
        if backend == "ray":
            args += ["--num-cpus", "2"]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.run(
            [sys.executable, "-m", "ddl_gym.cli", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        df = pd.read_csv(tmp_path / backend / "summary.csv")
        return df.drop(columns=["wall_s"], errors="ignore")

    local, remote = compare("local"), compare("ray")
    assert len(local) == 2 * local["congestion"].nunique()  # fifo x levels x 2 seeds
    pd.testing.assert_frame_equal(local, remote)
