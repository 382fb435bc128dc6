"""Your own model end to end (issue 33): a model saved by the README recipe
(``ddl_gym.agents.save_model``) carries its env beside it, so ``ddl-gym
compare --policies dally,agent:PATH`` needs no more; ``--agent-env`` for a
bare SB3 zip; a warning when a command evaluates a model on jobs it was
trained on."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("sb3_contrib")

from ddl_gym.cli.main import main  # noqa: E402
from ddl_gym.model_env import env_file, read_model_env  # noqa: E402

ENV_ID, ENV_KWARGS = "ddl_gym/Small-v0", {"congestion": "heavy"}


@pytest.fixture(scope="module")
def tiny_model():
    """A MaskablePPO trained for a few steps on Small-v0, as the README's
    recipe makes it (fewer steps, one in-process env)."""
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    env = make_vec_env(ENV_ID, n_envs=1, env_kwargs=ENV_KWARGS)
    model = MaskablePPO("MultiInputPolicy", env, seed=0, n_steps=64, batch_size=32, n_epochs=1)
    model.learn(64)
    env.close()
    return model


def _compare(tmp_path, policies, *extra):
    argv = ["compare", "-s", "small", "--policies", policies, "--seeds", "0"]
    argv += ["--congestions", "none", "--no-progress", "--out", str(tmp_path / "runs"), *extra]
    return main(argv)


def test_readme_recipe_model_runs_in_compare_with_no_extra_argument(tiny_model, tmp_path, capsys):
    from ddl_gym.agents import save_model

    path = save_model(tiny_model, tmp_path / "my_model.zip", ENV_ID, ENV_KWARGS)
    saved = json.loads(env_file(path).read_text())
    assert saved["env_id"] == ENV_ID and saved["env_kwargs"] == ENV_KWARGS
    assert saved["trained_on"] == []  # fresh synthetic draws: no trace to overlap
    assert saved["ddl_gym_version"]

    assert _compare(tmp_path, f"dally,agent:{path}") == 0
    out = capsys.readouterr().out
    # table rows: workload, congestion, policy, ...
    rows = {tuple(line.split()[:3]) for line in out.splitlines() if line.startswith("small ")}
    assert ("small", "none", f"agent:{path}") in rows
    assert ("small", "none", "dally") in rows


def test_load_policy_reads_the_env_beside_the_model(tiny_model, tmp_path):
    from ddl_gym.agents import load_policy, save_model
    from ddl_gym.baselines import make_policy

    from ddl_gym import ENV_VARIANTS
    from ddl_gym.engine import simulate
    from ddl_gym.topology import get_cluster
    from ddl_gym.traces import synthetic_trace

    path = save_model(tiny_model, tmp_path / "m", ENV_ID, ENV_KWARGS)  # ".zip" added
    assert path.name == "m.zip"
    agent = load_policy(path)
    assert agent.name == "agent:m"
    small = ENV_VARIANTS[ENV_ID]
    trace = synthetic_trace(seed=5, **small["trace"])
    cluster = get_cluster(small["cluster"], small["fabric"])
    for policy in (agent, make_policy("dally")):
        assert simulate(trace, cluster, policy, congestion="heavy").summary["completed"] == 16


def test_save_model_refuses_what_it_cannot_write(tiny_model, tmp_path):
    from ddl_gym.agents import save_model

    with pytest.raises(ValueError, match="unknown env id"):
        save_model(tiny_model, tmp_path / "a.zip", "ddl_gym/Nope-v0")
    with pytest.raises(ValueError, match="plain data"):
        save_model(tiny_model, tmp_path / "b.zip", ENV_ID, {"trace": object()})
    assert not list(tmp_path.iterdir())  # checked before anything is written


def test_agent_env_for_a_bare_zip(tiny_model, tmp_path, capsys):
    bare = tmp_path / "bare.zip"
    tiny_model.save(str(bare))
    assert _compare(tmp_path, f"agent:{bare}") == 2
    err = capsys.readouterr().err
    assert "--agent-env" in err and "save_model" in err and len(err.strip().splitlines()) == 1

    env = json.dumps({"env_id": ENV_ID, "env_kwargs": ENV_KWARGS})
    assert _compare(tmp_path, f"dally,agent:{bare}", "--agent-env", env) == 0
    assert f"agent:{bare}" in capsys.readouterr().out
    assert read_model_env(env_file(bare)).env_id == ENV_ID  # kept beside the model

    assert _compare(tmp_path, f"agent:{bare}") == 0  # later runs need no --agent-env
    other = json.dumps({"env_id": "ddl_gym/Cluster-v0"})
    assert _compare(tmp_path, f"agent:{bare}", "--agent-env", other) == 2
    assert "drop --agent-env or remove" in capsys.readouterr().err
    assert _compare(tmp_path, "dally", "--agent-env", env) == 2  # no agent:PATH to apply it to


def test_agent_env_errors_name_the_problem(tmp_path, capsys):
    bare = tmp_path / "bare.zip"
    bare.write_bytes(b"")
    for text, words in (
        ("{not json", "not valid JSON"),
        ('{"env_id": "x/Y-v0"}', "unknown env id"),
        ('{"env": 1}', "unknown keys"),
        (str(tmp_path / "missing.json"), "no such env file"),
    ):
        assert _compare(tmp_path, f"agent:{bare}", "--agent-env", text) == 2
        assert words in capsys.readouterr().err


def test_warns_when_evaluating_on_the_training_jobs(tiny_model, tmp_path, capsys):
    """A model trained on the small scenario's seed-0 draw (as `ddl-gym train
    -s small` trains on its drawn trace files) is warned about on seed 0, not
    on seed 1."""
    from ddl_gym.agents import save_model

    from ddl_gym.cli.own_model import job_keys
    from ddl_gym.scenarios import get_scenario
    from ddl_gym.traces import load_trace
    from ddl_gym.traces.loader import save_trace

    drawn = tmp_path / "small-0.csv"
    save_trace(get_scenario("small")[0].build_trace(0), drawn)
    path = save_model(tiny_model, tmp_path / "seen.zip", ENV_ID, ENV_KWARGS, [str(drawn)])

    assert _compare(tmp_path, f"agent:{path}") == 0
    err = capsys.readouterr().err
    n = len(job_keys(load_trace(drawn)))  # 16 jobs; fewer keys if two draw the same work
    assert (
        f"warning: agent:{path} was trained on {n} of the {n} distinct jobs of small (seed 0)"
        in (err)
    )

    argv = ["simulate", "-s", "small", "-p", f"agent:{path}", "--no-save", "--no-progress"]
    assert main([*argv, "--seed", "0"]) == 0
    assert "small (seed 0): its numbers there are not held-out results" in capsys.readouterr().err
    assert main([*argv, "--seed", "1"]) == 0
    assert "was trained on" not in capsys.readouterr().err


def test_overlap_counts_jobs_not_names():
    from ddl_gym.agents.envs import time_part

    from ddl_gym.cli.own_model import job_keys
    from ddl_gym.traces import default_trace

    a, b = default_trace(seed=0), default_trace(seed=1)
    assert job_keys(time_part(a, 0.0, 0.7)) <= job_keys(a)  # a window of a trace is in it
    assert len(job_keys(a) & job_keys(b)) < 0.1 * len(job_keys(b))  # another draw is not


def test_evaluate_model_says_where_a_saved_model_runs(tiny_model, tmp_path, capsys):
    from ddl_gym.agents import save_model

    path = save_model(tiny_model, tmp_path / "mine.zip", ENV_ID, ENV_KWARGS)
    assert main(["evaluate", "-s", "small", "--model", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--policies dally,agent:{path}" in err


def test_agent_env_is_refused_for_a_model_with_its_training_config(tiny_model, tmp_path, capsys):
    """A `ddl-gym train` model loads with the config.json beside it;
    --agent-env would write an env file that load_policy prefers: refused."""
    run = tmp_path / "run"
    (run / "best").mkdir(parents=True)
    model = run / "best" / "best_model.zip"
    tiny_model.save(str(model))
    (run / "best" / "config.json").write_text("{}")
    env = json.dumps({"env_id": ENV_ID})
    assert _compare(tmp_path, f"agent:{model}", "--agent-env", env) == 2
    assert "carries its training config" in capsys.readouterr().err
    assert not env_file(model).exists()


def test_training_jobs_of_a_train_run_are_found_from_another_directory(tmp_path, monkeypatch):
    """`ddl-gym train -s small --out runs/a` writes runs/a/traces/small-*.csv and
    a config naming them relative to where it ran; the overlap check finds
    them from anywhere, cut to the part the model trained on."""
    from ddl_gym.agents import TrainConfig
    from ddl_gym.agents.policy import training_jobs

    from ddl_gym.cli.own_model import overlap_warnings
    from ddl_gym.scenarios import get_scenario
    from ddl_gym.traces.loader import save_trace

    out = tmp_path / "project" / "runs" / "a"
    (out / "traces").mkdir(parents=True)
    (out / "best").mkdir()
    trace = get_scenario("small")[0].build_trace(0)
    save_trace(trace, out / "traces" / "small-0.csv")
    cfg = TrainConfig()
    cfg.split.traces = ["runs/a/traces/small-0.csv"]
    cfg.save_json(out / "config.json")
    cfg.save_json(out / "best" / "config.json")  # beside the model, as train() writes it
    model = out / "best" / "best_model.zip"
    model.write_bytes(b"")  # never loaded here
    monkeypatch.chdir(tmp_path)  # not where training ran
    (part,) = training_jobs(model)
    assert 0 < len(part.jobs) < len(trace.jobs)  # the train part (0-70%) only
    (line,) = overlap_warnings([f"agent:{model}"], [("small (seed 0)", trace)])
    assert "small (seed 0)" in line
