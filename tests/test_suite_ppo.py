"""PPO fine-tuning on the benchmark's train split (ddl_gym.agents.suite_ppo)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

from ddl_gym.agents.suite_ppo import (  # noqa: E402
    SuiteCaseEnv,
    SuitePPOConfig,
    case_time_scales,
    run_suite_ppo,
)

from ddl_gym.benchmarks.suite import get_suite  # noqa: E402
from ddl_gym.topology import Cluster  # noqa: E402


@pytest.mark.needs_data
def test_episodes_come_from_the_train_split_only_with_the_cases_time_unit():
    suite = get_suite()
    train = {c.name for c in suite.select("train")}
    held_out = {c.name for c in suite.select("validation") + suite.select("test")}
    scales = case_time_scales(SuitePPOConfig().teachers_file)
    assert set(scales) == train  # the records cover the train split, nothing else
    env = SuiteCaseEnv(SuitePPOConfig(max_episode_steps=5))
    env.reset(seed=0)
    seen = set()
    for i in range(40):
        env.reset(seed=i)
        seen.add(env.case_name)
        inner = env._env
        assert inner.time_scale_s == scales[env.case_name]
        assert inner.window_s in (24 * 3600.0, 72 * 3600.0)
    assert seen <= train and not seen & held_out
    assert len(seen) >= 6  # draws spread over the cases


@pytest.mark.needs_data
def test_case_weights_set_how_often_each_case_is_drawn():
    cases = ["pollux-3@seed64", "pollux-2@pcie64"]
    env = SuiteCaseEnv(SuitePPOConfig(cases=cases, case_weights={cases[0]: 3.0}))
    # 3 seeds per case: each run of pollux-3 has weight 3, each of pollux-2 weight 1
    names = [case.name for case, _ in env.runs]
    p = {c: sum(q for n, q in zip(names, env.run_p, strict=True) if n == c) for c in cases}
    assert p[cases[0]] == pytest.approx(0.75) and p[cases[1]] == pytest.approx(0.25)
    only = SuiteCaseEnv(
        SuitePPOConfig(cases=cases, case_weights={cases[1]: 0.0}, max_episode_steps=2)
    )
    for i in range(6):
        only.reset(seed=i)
        assert only.case_name == cases[0]
    with pytest.raises(ValueError, match="not train cases"):
        SuiteCaseEnv(SuitePPOConfig(case_weights={"pollux-5@pcie128": 2.0}))  # validation


def test_the_time_unit_is_the_best_heuristics_mean_jct(tmp_path):
    path = tmp_path / "t.json"
    rows = [{"case": "a", "teacher": "x", "mean_jct_s": {"x": 50.0, "y": 20.0, "z": 90.0}}]
    path.write_text(json.dumps(rows))
    assert case_time_scales(path) == {"a": 20.0}


@pytest.mark.needs_data
def test_episodes_are_cut_at_max_episode_steps():
    env = SuiteCaseEnv(SuitePPOConfig(cases=["philly-train@xrack512"], max_episode_steps=7))
    env.reset(seed=0)
    for i in range(7):
        mask = env.action_masks()
        _, _, term, trunc, _ = env.step(int(np.flatnonzero(mask)[-1]))
        assert not term
        assert trunc == (i == 6)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sppo")
    scores = iter([1.0, 0.7, 0.9])  # a stand-in validation: iteration 1 is the best

    def scorer(path, suite, heuristics_dir):
        iqm = next(scores)
        return {"iqm": iqm, "mean": iqm, "per_case": {"c": iqm}}

    cfg = SuitePPOConfig(
        cases=["pollux-3@seed64", "synthetic-train@v100x128"],
        total_timesteps=256,
        eval_freq=128,
        n_envs=1,
        max_episode_steps=100,
    )
    cfg.ppo.n_steps = 64
    cfg.ppo.batch_size = 32
    cfg.ppo.n_epochs = 1
    return run_suite_ppo(cfg, out, progress=False, scorer=scorer)


@pytest.mark.needs_data
def test_the_run_keeps_its_best_validation_iteration(tiny_run):
    out = tiny_run.parent
    curve = json.loads((out / "curve.json").read_text())
    assert [row["iteration"] for row in curve] == [0, 1, 2]
    assert curve[0]["timesteps"] == 0  # iteration 0: the starting model itself
    assert curve[1]["timesteps"] >= 128
    assert json.loads((out / "stats.json").read_text())["best_iteration"] == 1
    assert tiny_run.read_bytes() == (out / "iter1.zip").read_bytes()


@pytest.mark.needs_data
def test_the_fine_tuned_checkpoint_acts_on_three_cluster_shapes(tiny_run):
    from ddl_gym.agents import load_policy

    from ddl_gym.engine import simulate

    agent = load_policy(tiny_run)
    trace = get_suite().case("quick-synthetic@pcie16").workload.build(0)
    for cluster in ("2x2x4", Cluster(2, 4, 8, "seed"), "nvswitch512"):
        result = simulate(trace, cluster, agent, congestion="heavy", **agent.engine_kwargs())
        assert result.summary["completed"] == len(trace)


@pytest.mark.needs_data
def test_shape_randomisation_keeps_the_fabric_and_fits_the_widest_job():
    cfg = SuitePPOConfig(shape_p=1.0, max_episode_steps=5)
    env = SuiteCaseEnv(cfg)
    cases = {c.name: c for c in get_suite().select("train")}
    shapes = set()
    for i in range(30):
        env.reset(seed=i)
        case = cases[env.case_name]
        widest = case.workload.build(env.case_seed).max_gpus
        assert env.cluster.fabric == case.cluster().fabric
        assert env.cluster.gpus_per_server == case.cluster().gpus_per_server
        assert env.cluster.num_gpus >= widest
        shapes.add((env.cluster.racks, env.cluster.servers_per_rack))
    assert len(shapes) >= 4


@pytest.mark.needs_data
def test_decision_histogram_counts_every_placement_once_for_fifo():
    from research.decisions import count_decisions, shares

    counts = count_decisions({"fifo": "fifo"}, split="validation")
    jobs = {c.name: len(c.workload.build(c.seeds[0])) for c in get_suite().select("validation")}
    assert set(counts["case"]) == set(jobs)
    for _, row in counts.iterrows():  # FIFO never preempts: each job is placed once
        assert row["preemptions"] == 0
        placed = row["alloc_machine"] + row["alloc_rack"] + row["alloc_network"]
        assert placed == jobs[row["case"]]
    table = shares(counts)
    share_cols = ["delays", "alloc_machine", "alloc_rack", "alloc_network", "preemptions"]
    assert abs(float(table[share_cols].sum(axis=1).iloc[0]) - 1.0) < 1e-9


def test_seed_ranges_one_syntax_for_every_command():
    """suite_report, benchmark evaluate, compare and evaluate read --seeds
    with the one parser."""
    from ddl_gym.cli.common import CliError, parse_seeds

    assert parse_seeds("0-2,5") == [0, 1, 2, 5]
    assert parse_seeds("7") == [7]
    for bad in ("3-1", "a", "1,1"):
        with pytest.raises(CliError, match="--seeds"):
            parse_seeds(bad)
    import ddl_gym.cli.compare as compare
    import research.suite_report as suite_report

    assert suite_report.parse_seeds is parse_seeds and compare.parse_seeds is parse_seeds
    with pytest.raises(SystemExit):
        suite_report.main(["--seeds", "1,1"])
