"""ddl-gym as a library, the way a researcher first uses it: the README's
train-and-score example run as written (SB3's make_vec_env with
SubprocVecEnv, MaskablePPO on the bench env's train split, the saved model
scored on the suite's quick cases), render modes, and policies' engine
settings travelling with them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from ddl_gym.baselines.dally import DallyPolicy
from ddl_gym.baselines.fifo import FifoPolicy

import ddl_gym  # noqa: F401
from ddl_gym.benchmarks import get_suite
from ddl_gym.engine import PolicyEngineWarning, simulate
from ddl_gym.env.render import PALETTE, occupancy
from ddl_gym.traces import default_trace, head

REPO = Path(__file__).resolve().parents[1]
MARKER = "<!-- library-example -->"


def readme_example() -> str:
    """The python block right after the marker in README.md."""
    text = (REPO / "README.md").read_text()
    assert MARKER in text, "README lost its library example"
    m = re.search(r"```python\n(.*?)```", text[text.index(MARKER) :], re.S)
    assert m is not None
    return m.group(1)


def test_readme_train_and_score_example_runs_as_written(data_dir, tmp_path):
    pytest.importorskip("sb3_contrib")
    pytest.importorskip("rich", reason="SB3's progress_bar=True needs rich (agents extra)")
    from ddl_gym.benchmarks.reference import ReferenceError, load_reference

    suite = re.search(r'suite = "([^"]+)"', readme_example())
    assert suite, "the README's example names no suite"
    try:  # card() scores against the heuristics' records shipped for the suite
        load_reference(suite.group(1)).split("quick")
    except ReferenceError as err:
        pytest.skip(f"no shipped quick reference for {suite.group(1)} yet: {err}")
    script = tmp_path / "example.py"
    script.write_text(readme_example())
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "my_model.zip").is_file()
    saved = json.loads((tmp_path / "my_model.env.json").read_text())
    assert saved["env_id"] == "ddl_gym/Bench-v3"
    # the card: every quick case of the suite scored (none unsupported: any shape)
    m = re.search(r"agent:my_model on (\S+) quick: (\d+) cases x (\d+) seeds", proc.stdout)
    assert m, proc.stdout
    quick = get_suite(m.group(1)).quick
    assert int(m.group(2)) == len(quick) and int(m.group(3)) == len(quick[0].seeds)
    for case in quick:
        assert case.name in proc.stdout
    assert "IQM" in proc.stdout and "not scored" not in proc.stdout


# -- render ---------------------------------------------------------------------------
def test_render_modes_follow_gymnasium():
    from ddl_gym.env import ClusterEnv

    assert set(ClusterEnv.metadata["render_modes"]) == {"ansi", "rgb_array"}
    assert ClusterEnv.metadata["render_fps"] > 0
    with pytest.raises(ValueError, match="supported: ansi, rgb_array"):
        ClusterEnv(render_mode="video")

    env = gym.make("ddl_gym/Small-v0", render_mode="rgb_array")
    _, info = env.reset(seed=0)
    empty = env.render()
    assert empty.dtype == np.uint8 and empty.ndim == 3 and empty.shape[2] == 3
    base = env.unwrapped
    # place jobs until two run, then every busy GPU shows its job's colour
    for _ in range(50):
        if len(base.engine.running) >= 2:
            break
        mask = info["action_mask"]
        _, _, _, _, info = env.step(int(np.flatnonzero(mask)[1]) if mask[1:].any() else 0)
    frame = env.render()
    assert frame.shape == empty.shape and not np.array_equal(frame, empty)
    grid = occupancy(base.engine)
    busy = {int(j) for j in grid[grid >= 0]}
    assert busy == set(base.engine.running)
    assert sum(base.engine.running[j].gpus for j in busy) == int((grid >= 0).sum())
    colours = {tuple(c) for c in frame.reshape(-1, 3)}
    for j in busy:
        assert tuple(PALETTE[j % len(PALETTE)]) in colours

    text = gym.make("ddl_gym/Small-v0", render_mode="ansi")
    text.reset(seed=0)
    out = text.render()
    assert out.startswith("t=") and len(out.splitlines()) == 1 + base.cluster.num_servers


# -- engine settings travel with the policy ----------------------------------------
def test_simulate_applies_the_policys_engine_settings():
    trace = head(default_trace(seed=0), 120)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PolicyEngineWarning)
        implicit = simulate(trace, "seed64", DallyPolicy(), congestion="heavy")
        explicit = simulate(
            trace, "seed64", DallyPolicy(), congestion="heavy", **DallyPolicy().engine_kwargs()
        )
        plain = simulate(trace, "seed64", FifoPolicy(), congestion="heavy", lease_s=None)
    assert implicit.summary == explicit.summary
    assert implicit.summary["preemptions"] > 0  # the lease-driven layer ran
    assert plain.summary["completed"] == len(trace)
    with pytest.warns(PolicyEngineWarning, match="lease_s=None overrides dally's lease_s=20"):
        ablation = simulate(trace, "seed64", DallyPolicy(), congestion="heavy", lease_s=None)
    assert ablation.summary["preemptions"] == 0
    assert ablation.summary != implicit.summary


# -- loading a user's model -------------------------------------------------------------
def test_load_policy_without_config_says_how(tmp_path):
    pytest.importorskip("sb3_contrib")
    from ddl_gym.agents import load_policy

    (tmp_path / "mine.zip").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="env_kwargs"):
        load_policy(tmp_path / "mine.zip")


def test_env_model_policy_runs_in_simulate_and_checks_the_cluster():
    pytest.importorskip("sb3_contrib")
    from ddl_gym.agents.external import EnvModelPolicy

    seen = []

    def last_valid(obs, mask):  # a "model": the last valid action
        seen.append(set(obs))
        return int(np.flatnonzero(mask)[-1])

    policy = EnvModelPolicy(last_valid, {"lease_s": 30.0}, env_id="ddl_gym/Small-v0")
    assert policy.engine_kwargs()["lease_s"] == 30.0
    trace = ddl_gym_small_trace()
    r = simulate(trace, policy.cluster, policy, congestion="heavy")
    assert r.summary["completed"] == len(trace)
    assert seen and seen[0] == {"servers", "racks", "pending", "running", "global"}
    with pytest.raises(ValueError, match="trained on"):
        simulate(trace, "seed64", policy)


def ddl_gym_small_trace():
    from ddl_gym import ENV_VARIANTS
    from ddl_gym.traces import synthetic_trace

    return synthetic_trace(seed=5, **ENV_VARIANTS["ddl_gym/Small-v0"]["trace"])


def test_heuristic_rollout_warns_when_the_env_lacks_the_policys_settings():
    from ddl_gym.env import heuristic_rollout

    with pytest.warns(PolicyEngineWarning, match="lease_s"):
        heuristic_rollout(gym.make("ddl_gym/Small-v0"), DallyPolicy(), seed=0)
    env = gym.make("ddl_gym/Small-v0", **DallyPolicy().engine_kwargs())
    with warnings.catch_warnings():
        warnings.simplefilter("error", PolicyEngineWarning)
        _, info = heuristic_rollout(env, DallyPolicy(), seed=0)
    assert info["summary"]["completed"] == info["summary"]["jobs"]
