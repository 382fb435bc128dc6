"""Learned agents: short training, loading, valid actions in simulate() and the
env, the shipped model, and the train/val/test split."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

from ddl_gym.agents import load_policy  # noqa: E402
from ddl_gym.agents.config import EnvConfig, PPOConfig, SplitConfig, TrainConfig  # noqa: E402
from ddl_gym.agents.envs import (  # noqa: E402
    AgentEnv,
    cluster_env,
    fixed_windows,
    flatten_obs,
    split_traces,
)
from ddl_gym.agents.evaluate import heldout_windows  # noqa: E402
from ddl_gym.agents.policy import DEFAULT_MODEL  # noqa: E402
from ddl_gym.agents.train import latest_checkpoint, train  # noqa: E402

from ddl_gym.engine import (  # noqa: E402
    Engine,
    EngineView,
    Wait,
    run_policy,  # noqa: E402
)
from ddl_gym.env.wrappers import FlattenClusterObs  # noqa: E402
from ddl_gym.traces import default_trace, window  # noqa: E402
from tests.helpers import InvariantChecker, flat_config  # noqa: E402


def tiny_config() -> TrainConfig:
    return TrainConfig(
        env=EnvConfig(congestion="heavy", window_s=6 * 3600.0),
        split=SplitConfig(traces=["default:0"], n_val_windows=2),
        ppo=PPOConfig(net_arch=[16], n_steps=128, batch_size=64, n_epochs=2),
        total_timesteps=512,
        n_envs=2,
        vec_env="dummy",  # in-process: seconds, not a worker start-up
        eval_freq=256,
        checkpoint_freq=256,
    )


class CheckedPolicy:
    """Runs the engine invariants before every decision of ``policy``."""

    def __init__(self, policy, engine: Engine) -> None:
        self.policy = policy
        self.engine = engine
        self.checker = InvariantChecker()

    def reset(self, view, seed=None) -> None:
        self.policy.reset(view, seed)

    def act(self, view):
        self.checker.check(self.engine)
        action = self.policy.act(view)
        if not isinstance(action, Wait):
            assert self.engine.check(action) is None, f"invalid action {action}"
        return action


def run_checked(policy, trace, **engine_kwargs) -> Engine:
    engine = Engine(trace, "seed64", congestion="heavy", **engine_kwargs)
    checked = CheckedPolicy(policy, engine)
    checked.reset(EngineView(engine), seed=0)
    run_policy(engine, checked)
    checked.checker.finish(engine)
    return engine


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    cfg = tiny_config()
    best = train(cfg, out, progress=False)
    return cfg, out, best


def test_short_training_saves_a_loadable_model(trained):
    cfg, out, best = trained
    assert best.is_file() and (out / "config.json").is_file()
    assert (out / "final.zip").is_file() and latest_checkpoint(out) is not None
    policy = load_policy(best)
    assert policy.config == cfg


def test_resume_continues_from_the_last_checkpoint(trained, tmp_path):
    cfg, out, _ = trained
    cfg2 = TrainConfig.from_dict(cfg.to_dict())
    cfg2.total_timesteps = 768
    best = train(cfg2, out, resume=True, progress=False)
    from sb3_contrib import MaskablePPO

    assert MaskablePPO.load(out / "final.zip").num_timesteps >= 768
    assert best.is_file()


def test_trained_model_acts_validly_in_simulate(trained):
    _, _, best = trained
    policy = load_policy(best)
    trace = window(default_trace(seed=5), 0.0, 8 * 3600.0)
    engine = run_checked(policy, trace, **policy.engine_kwargs())
    assert engine.done


def test_policy_matches_the_env_step_for_step(trained):
    """Inside simulate() the policy must see what the env shows at the same
    decision point; stepping the env with it never hits an invalid action."""
    cfg, _, best = trained
    policy = load_policy(best)
    trace = window(default_trace(seed=6), 0.0, 6 * 3600.0)
    env = AgentEnv(
        cluster_env(cfg.env, [trace], None), cfg.env.K, preempt=False, invalid_to_wait=False
    )
    obs, _ = env.reset(seed=0)
    base = env.unwrapped
    policy.reset(base.view, seed=0)
    for _ in range(5000):
        action = policy.act(base.view)
        assert np.array_equal(flatten_obs(policy._builder.obs), obs)
        a = base.action_index(action)
        assert env.action_masks()[a]
        obs, _, terminated, truncated, info = env.step(a)
        assert "invalid" not in info
        if terminated or truncated:
            break
    assert terminated


def test_flatten_matches_the_flatten_wrapper():
    env = FlattenClusterObs(cluster_env(EnvConfig(), [default_trace(seed=1)], None))
    obs, _ = env.reset(seed=0)
    inner = env.unwrapped._obs.observation()
    assert np.array_equal(flatten_obs(inner), obs)


def test_plain_ppo_wrapper_maps_invalid_to_wait():
    cfg = EnvConfig(window_s=None)
    env = AgentEnv(
        cluster_env(cfg, [default_trace(seed=2)], None), cfg.K, preempt=False, invalid_to_wait=True
    )
    env.reset(seed=0)
    for _ in range(50):
        mask = env.action_masks()
        invalid = np.flatnonzero(~mask)
        _, _, terminated, truncated, info = env.step(int(invalid[0]))
        assert "invalid" not in info
        if terminated or truncated:
            break


@pytest.mark.skipif(not DEFAULT_MODEL.is_file(), reason="no shipped model yet")
def test_shipped_model_completes_the_default_workload():
    policy = load_policy()
    engine = run_checked(policy, default_trace(seed=0), **policy.engine_kwargs())
    assert engine.n_done == len(engine.jobs) == 300


def _ids(traces) -> set[tuple[int, str]]:
    """(trace of the pool, job id): ids repeat across synthetic seeds."""
    return {(i, str(x)) for i, t in enumerate(traces) for x in t.jobs["job_id"]}


def test_split_parts_never_overlap():
    split = SplitConfig(traces=["default:0-2"])
    parts = split_traces(split)
    train_ids, val_ids, test_ids = (_ids(parts[k]) for k in ("train", "val", "test"))
    assert train_ids and val_ids and test_ids
    assert not train_ids & val_ids and not train_ids & test_ids and not val_ids & test_ids
    all_ids = _ids(default_trace(seed=s) for s in range(3))
    assert train_ids | val_ids | test_ids == all_ids  # nothing lost at the cuts
    for i in range(3):  # per trace: windows and episodes stay inside their part
        val_i = {x for k, x in val_ids if k == i}
        train_i = {x for k, x in train_ids if k == i}
        test_i = {x for k, x in test_ids if k == i}
        windows = fixed_windows(parts["val"][i : i + 1], 4, 6 * 3600.0, seed=0)
        assert {x for _, x in _ids(windows)} <= val_i
        env = cluster_env(EnvConfig(), parts["train"][i : i + 1], 6 * 3600.0)
        for seed in range(5):
            env.reset(seed=seed)
            assert {j.job_id for j in env.engine.jobs} <= train_i
        held = heldout_windows([f"default:{i}"], split.test, [0, 1, 2], 6 * 3600.0)
        assert {x for _, x in _ids(w.trace for w in held)} <= test_i


def test_config_round_trips_through_toml_and_json(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(
        'total_timesteps = 1000\n[env]\ncongestion = "moderate"\n'
        '[split]\ntraces = ["default:3-4"]\nval = [0.7, 0.8]\n[ppo]\nnet_arch = [32]\n'
    )
    cfg = TrainConfig.load(path)
    assert cfg.total_timesteps == 1000 and cfg.env.congestion == "moderate"
    assert cfg.split.val == (0.7, 0.8) and cfg.ppo.net_arch == [32]
    cfg.save_json(tmp_path / "c.json")
    assert TrainConfig.load(tmp_path / "c.json") == cfg
    path.write_text("[env]\ncongestoin = 1\n")
    with pytest.raises(ValueError, match="unknown keys"):
        TrainConfig.load(path)


@pytest.mark.parametrize(
    ("name", "changed"),
    [
        ("ablation_reward_slowdown", {"env.reward": "slowdown"}),
        ("ablation_no_curriculum", {"env.windows_h": [24.0]}),
        (
            "ablation_no_levers",
            {"env.preempt": False, "env.preempt_budget": 0, "env.tick_s": None},
        ),
    ],
)
def test_ablation_configs_change_only_their_lever(name, changed):
    """Each ablation in docs/agents.md is the shipped config with one thing
    changed; any other drift would make its row incomparable."""
    models = DEFAULT_MODEL.parent
    base = flat_config(TrainConfig.load(models / "default.toml"))
    abl = flat_config(TrainConfig.load(models / f"{name}.toml"))
    diff = {k: abl[k] for k in base if abl[k] != base[k]}
    assert diff == changed
