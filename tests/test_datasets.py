"""Minari datasets of the heuristics' episodes (``ddl_gym.benchmarks.datasets``):
the env recovers from the dataset and replays an episode's start, episodes
are complete (or their truncation is stated), the metadata carries the
reference scores, the code permalink and the seeds' story, and the
behaviour-cloning warm start reads them."""

from __future__ import annotations

import numpy as np
import pytest

from ddl_gym.benchmarks import evaluate, get_suite

minari = pytest.importorskip("minari", reason="the datasets extra (minari) is not installed")
pytest.importorskip("pyarrow", reason="the datasets extra (pyarrow) is not installed")

SUITE = "ddl-gym-v1"


@pytest.fixture
def minari_root(tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    return tmp_path


def quick_case():
    return get_suite(SUITE).quick[0]  # quick-tiresias-60@pcie16: 60 jobs, 16 GPUs


def build(root, policies, **kwargs):
    from ddl_gym.benchmarks.datasets import build_datasets

    case = kwargs.pop("case", quick_case())
    return build_datasets(
        suite=SUITE, quick=True, cases=[case.name], policies=policies, root=root,
        progress=False, **kwargs,
    )  # fmt: skip


def episode_metadata(data, i: int) -> dict:
    return next(iter(data.storage.get_episode_metadata([i])))


def test_complete_episodes_whose_return_is_the_benchmark_run(data_dir, minari_root):
    case = quick_case()
    (summary,) = build(minari_root, ["fifo"])
    assert (summary.episodes, summary.cut, summary.dropped) == (len(case.seeds), 0, 0)
    data = minari.load_dataset(summary.dataset_id)
    assert data.total_episodes == len(case.seeds)
    run = evaluate("fifo", quick=True, cases=[case.name], progress=False).records
    for i, episode in enumerate(data.iterate_episodes()):
        n = len(episode.actions)
        assert n == len(episode.rewards) > 0
        assert episode.terminations[-1] and not episode.truncations.any()
        assert len(episode.infos["action_mask"]) == len(episode.observations) == n + 1
        # masks are the env's: every recorded action was valid where it was taken
        assert episode.infos["action_mask"][np.arange(n), episode.actions].all()
        # the rewards sum to minus the total JCT (hours) of the benchmark's run
        seed = episode_metadata(data, i)["seed"]
        row = run[run["seed"] == seed].iloc[0]
        assert -episode.rewards.sum() * 3600 / row["jobs"] == pytest.approx(row["mean_jct_s"])


def test_recovered_env_replays_an_episode(data_dir, minari_root):
    """``recover_environment()`` makes the bench env of the case; reset with
    the episode's stored seed and options, the recorded actions give the
    recorded observations and rewards, step by step (Gandiva: a policy that
    asks for no decision points of its own)."""
    (summary,) = build(minari_root, ["gandiva"])
    data = minari.load_dataset(summary.dataset_id)
    assert data.storage.metadata["ddl_gym"]["replayable"]
    env = data.recover_environment()
    assert env.spec is not None and env.spec.id == "ddl_gym/Bench-v3"
    assert env.spec.kwargs["cases"] == [quick_case().name]
    meta = episode_metadata(data, 1)
    assert meta["options"] == {"case": quick_case().name, "seed": quick_case().seeds[1]}
    episode = data[1]
    obs, info = env.reset(seed=meta["seed"], options=meta["options"])
    assert np.array_equal(obs, episode.observations[0])
    for t, action in enumerate(episode.actions):
        obs, reward, terminated, truncated, info = env.step(int(action))
        assert "invalid" not in info
        assert reward == pytest.approx(episode.rewards[t])
        assert np.array_equal(obs, episode.observations[t + 1])
    assert terminated


def test_metadata_states_scores_permalink_and_seeds(data_dir, minari_root):
    (summary,) = build(minari_root, ["gandiva"])
    data = minari.load_dataset(summary.dataset_id)
    meta = data.storage.metadata
    ours = meta["ddl_gym"]
    heuristics = get_suite(SUITE).heuristics
    assert set(ours["ref_scores"]) == set(heuristics)
    assert meta["ref_min_score"] == min(ours["ref_scores"].values())
    assert meta["ref_max_score"] == max(ours["ref_scores"].values())
    assert meta["ref_min_score"] < meta["ref_max_score"] < 0
    # a heuristic's reference score is its episodes' mean return (the same runs)
    returns = [float(e.rewards.sum()) for e in data.iterate_episodes()]
    assert ours["ref_scores"]["gandiva"] == pytest.approx(np.mean(returns), rel=1e-9)
    assert "worst / best" in ours["ref_score_definition"]
    # the best heuristic scores 1, the worst 0
    best = max(ours["ref_scores"].values())
    assert minari.get_normalized_score(data, np.array([best]))[0] == pytest.approx(1.0)
    assert "@" in meta["code_permalink"] or "/tree/" in meta["code_permalink"]
    for key in ("suite", "suite_hash", "case", "seeds", "policy", "engine_settings"):
        assert key in ours, key
    assert ours["complete_episodes"] == data.total_episodes and ours["truncations"] == {}
    # gandiva's own engine settings (free migration) ran the episodes
    assert ours["engine_settings"]["restore_s_per_gpu"] == 0.0
    # the Tiresias file is one fixed trace: the metadata says so
    assert ours["distinct_traces"] == 1 and "no resampling" in ours["seeds_note"]


def test_resampled_seeds_give_distinct_episodes(data_dir, minari_root):
    """A ddl-gym-v3 case built from one trace file: every seed a distinct
    draw of its jobs, so distinct episodes (v1's same case gives one trace)."""
    from ddl_gym.benchmarks.datasets import build_datasets

    v3 = get_suite("ddl-gym-v3")
    case = next(c for c in v3.quick if c.family == "tiresias")
    assert case.workload.source != "synthetic"
    (summary,) = build_datasets(
        suite="ddl-gym-v3", quick=True, cases=[case.name], policies=["fifo"],
        root=minari_root, progress=False,
    )  # fmt: skip
    data = minari.load_dataset(summary.dataset_id)
    returns = [float(e.rewards.sum()) for e in data.iterate_episodes()]
    assert len(set(returns)) == len(case.seeds)
    ours = data.storage.metadata["ddl_gym"]
    assert ours["distinct_traces"] == len(case.seeds)
    assert "distinct draw" in ours["seeds_note"]


def test_an_episode_leaving_the_windows_is_cut_and_says_why(data_dir, minari_root):
    """With windows of one pending and one running job, Tiresias soon picks a
    job the env cannot express: the episode is kept up to there, truncated,
    one observation and mask more than actions; the metadata counts it with
    the reason, and Minari loads it."""
    case = quick_case()
    (summary,) = build(minari_root, ["tiresias"], K=1, M=1)
    assert summary.cut > 0 and summary.episodes + summary.dropped == len(case.seeds)
    data = minari.load_dataset(summary.dataset_id)
    ours = data.storage.metadata["ddl_gym"]
    assert ours["truncated_episodes"] == summary.cut
    assert ours["complete_episodes"] == summary.episodes - summary.cut
    assert sum(ours["truncations"].values()) == summary.cut + summary.dropped
    assert "outside the env's windows" in ours["truncation_reasons"]["outside_windows"]
    for episode in data.iterate_episodes():
        n = len(episode.actions)
        assert episode.truncations[-1] or episode.terminations[-1]
        assert len(episode.infos["action_mask"]) == n + 1
        assert len(episode.observations) == n + 1


def test_behaviour_cloning_reads_a_minari_dataset(data_dir, minari_root):
    """A heuristic's Minari dataset (masks in infos) feeds the agents' warm
    start: ``agents.bc.from_minari`` gives demonstrations in the bench env's
    space, every action valid under its mask, and ``pretrain`` fits a
    MaskablePPO policy on them better than chance."""
    pytest.importorskip("sb3_contrib")
    from ddl_gym.agents.bc import from_minari, pretrain
    from ddl_gym.agents.config import BCConfig
    from sb3_contrib import MaskablePPO

    (summary,) = build(minari_root, ["fifo"], K=8, M=8)
    demos = from_minari([summary.dataset_id], gamma=0.99)
    assert len(demos.actions) == summary.steps
    assert demos.masks[np.arange(len(demos.actions)), demos.actions].all()
    env = minari.load_dataset(summary.dataset_id).recover_environment()
    assert demos.obs.shape[1:] == env.observation_space.shape
    model = MaskablePPO("MlpPolicy", env, seed=0, device="cpu")
    fit = pretrain(model.policy, demos, BCConfig(epochs=3, batch_size=64), seed=0)
    chance = float(np.mean(1.0 / demos.masks.sum(axis=1)))
    assert fit["accuracy"] > chance


def test_a_policy_with_its_own_decision_points_is_marked_not_replayable(data_dir, minari_root):
    """Tiresias asks for wake-ups at its promotion times: the episodes are
    the benchmark's run, and the metadata says the env alone cannot replay
    them, and why."""
    (summary,) = build(minari_root, ["tiresias"])
    ours = minari.load_dataset(summary.dataset_id).storage.metadata["ddl_gym"]
    assert ours["replayable"] is False and "wake-ups" in ours["replay_note"]
