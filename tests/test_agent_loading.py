"""Loading a model explains itself (issue 50): a bad env argument (wrong
type, unknown name) from ``<model>.env.json``, ``--agent-env`` or
``--env-kwargs`` is one line naming that source and the field; a missing
model file says so; only the model's own folder is searched for its
settings, and the command line prints the file it read. Every such failure
is exit 2 with nothing written: no run folder, no file beside the model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("sb3_contrib")

from ddl_gym.cli.main import main  # noqa: E402
from ddl_gym.model_env import env_file  # noqa: E402

ENV_ID, ENV_KWARGS = "ddl_gym/Small-v0", {"congestion": "heavy"}


@pytest.fixture(scope="module")
def bare_zip(tmp_path_factory) -> Path:
    """An untrained MaskablePPO on Small-v0 (K = M = 4), saved without its env."""
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    env = make_vec_env(ENV_ID, n_envs=1, env_kwargs=ENV_KWARGS)
    model = MaskablePPO("MultiInputPolicy", env, seed=0, n_steps=64, batch_size=32)
    env.close()
    path = tmp_path_factory.mktemp("models") / "bare.zip"
    model.save(str(path))
    return path


def _model(tmp_path: Path, bare_zip: Path, name: str = "m", env: dict | None = None) -> Path:
    """A copy of the model in its own folder, with ``env`` as its env file."""
    folder = tmp_path / "models"
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.zip"
    shutil.copyfile(bare_zip, path)
    if env is not None:
        env_file(path).write_text(json.dumps(env))
    return path


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    return err


def _compare(tmp_path: Path, policy: str, *extra: str) -> int:
    argv = ["compare", "-s", "small", "--policies", policy, "--seeds", "0"]
    argv += ["--congestions", "none", "--no-progress", "--out", str(tmp_path / "runs"), *extra]
    return main(argv)


def _bench(tmp_path: Path, policy: str, *extra: str) -> int:
    argv = ["benchmark", "evaluate", "--suite", "ddl-gym-v1", "--quick", "--policy", policy]
    return main([*argv, "--out", str(tmp_path / "records"), "--no-progress", *extra])


@pytest.mark.parametrize(
    ("env_kwargs", "words"),
    [
        ({"K": "four"}, "env_kwargs field 'K' must be int, got str \"four\""),
        ({"congestoin": "heavy"}, "env_kwargs field 'congestoin' is not an argument of"),
        ({"window_s": [1]}, "env_kwargs field 'window_s' must be float or null"),
        ({"lazy_leases": 1}, "env_kwargs field 'lazy_leases' must be bool"),
    ],
)
def test_a_bad_env_file_is_one_line_naming_the_file_and_field(
    tmp_path, bare_zip, capsys, env_kwargs, words
):
    model = _model(tmp_path, bare_zip, env={"env_id": ENV_ID, "env_kwargs": env_kwargs})
    before = _files(tmp_path)
    assert _compare(tmp_path, f"agent:{model}") == 2
    err = _one_line_error(capsys)
    assert f"{env_file(model)}: {words}" in err
    if "congestoin" in env_kwargs:
        assert "did you mean 'congestion'?" in err
    assert _files(tmp_path) == before  # no run folder, nothing beside the model


def test_a_bad_agent_env_writes_nothing_and_the_corrected_command_runs(tmp_path, bare_zip, capsys):
    """The issue's sequence: a wrong --agent-env used to leave its env file
    beside the model, and the corrected command was then refused."""
    model = _model(tmp_path, bare_zip)
    before = _files(tmp_path)
    wrong_type = json.dumps({"env_id": ENV_ID, "env_kwargs": {"K": "x"}})
    assert _compare(tmp_path, f"agent:{model}", "--agent-env", wrong_type) == 2
    assert "--agent-env: env_kwargs field 'K' must be int" in _one_line_error(capsys)
    # the right types, the wrong shape: the model's 4 pending rows are not 8
    wrong_shape = json.dumps({"env_id": ENV_ID, "env_kwargs": {"K": 8}})
    assert _compare(tmp_path, f"agent:{model}", "--agent-env", wrong_shape) == 2
    err = _one_line_error(capsys)
    assert f"agent:{model} (--agent-env)" in err and "shape (4, 21)" in err
    env_path = tmp_path / "env.json"
    env_path.write_text(json.dumps({"env_id": ENV_ID, "env_kwargs": {"bogus": 1}}))
    assert _compare(tmp_path, f"agent:{model}", "--agent-env", str(env_path)) == 2
    assert f"--agent-env {env_path}: env_kwargs field 'bogus'" in _one_line_error(capsys)
    assert _files(tmp_path) == before | {"env.json"}

    right = json.dumps({"env_id": ENV_ID, "env_kwargs": ENV_KWARGS})
    assert _compare(tmp_path, f"agent:{model}", "--agent-env", right) == 0
    out = capsys.readouterr().out
    assert f"agent:{model}: settings from --agent-env" in out
    assert json.loads(env_file(model).read_text())["env_kwargs"] == ENV_KWARGS


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--env-kwargs", '{"M": "x"}'], "--env-kwargs: env_kwargs field 'M' must be int"),
        (["--env-kwargs", '{"Kk": 4}'], "--env-kwargs: env_kwargs field 'Kk' is not an argument"),
        (["--env-kwargs", '{"M": '], "--env-kwargs: not valid JSON"),
        (["--env-kwargs", "[4]"], "--env-kwargs: want a JSON object, got list"),
        (["--env-id", "ddl_gym/Nope-v0"], "--env-id: unknown env id 'ddl_gym/Nope-v0'"),
    ],
)
def test_bad_env_kwargs_of_the_benchmark_are_one_line(tmp_path, bare_zip, capsys, extra, words):
    model = _model(tmp_path, bare_zip)
    env_id = [] if "--env-id" in extra else ["--env-id", ENV_ID]
    before = _files(tmp_path)
    assert _bench(tmp_path, f"agent:{model}", *env_id, *extra) == 2
    assert words in _one_line_error(capsys)
    assert _files(tmp_path) == before


def test_a_missing_model_file_says_so(tmp_path, capsys):
    missing = tmp_path / "nope.zip"
    for run in (
        lambda: _compare(tmp_path, f"agent:{missing}"),
        lambda: _bench(tmp_path, f"agent:{missing}"),
        lambda: main(["simulate", "-s", "small", "-p", f"agent:{missing}", "--no-save"]),
        lambda: main(["evaluate", "-s", "small", "--model", str(missing), "--no-progress"]),
    ):
        assert run() == 2
        err = _one_line_error(capsys)
        assert f"no model file {missing}" in err and "settings" not in err
    assert list(tmp_path.iterdir()) == []  # no run folder, no records

    from ddl_gym.agents import load_policy

    with pytest.raises(FileNotFoundError, match="no model file"):
        load_policy(missing)


def test_only_the_models_own_folder_is_searched(tmp_path, bare_zip, capsys):
    """A ``config.json`` one folder up (e.g. an older ``ddl-gym train`` run,
    or an unrelated project file) is not read, and the message says where it
    is; the one beside the model is read and its path printed."""
    from ddl_gym.agents import load_policy

    run = tmp_path / "run"
    (run / "best").mkdir(parents=True)
    model = run / "best" / "best_model.zip"
    shutil.copyfile(bare_zip, model)
    (run / "config.json").write_text('{"unrelated": true}')
    with pytest.raises(FileNotFoundError) as err:
        load_policy(model)
    message = str(err.value)
    assert f"{run / 'config.json'} (one folder up) is not read" in message
    assert "best_model.env.json" in message and "save_model" in message
    assert _compare(tmp_path, f"agent:{model}") == 2
    assert "(one folder up) is not read" in _one_line_error(capsys)
    assert not (tmp_path / "runs").exists()

    # a training config beside the model is read: its error names it
    config = run / "best" / "config.json"
    config.write_text(json.dumps({"env": {"K": "x"}}))
    assert _compare(tmp_path, f"agent:{model}") == 2
    assert f"{config}: config.env.K must be int, got str 'x'" in _one_line_error(capsys)


def test_the_command_line_prints_the_settings_file_it_read(tmp_path, bare_zip, capsys):
    model = _model(tmp_path, bare_zip, env={"env_id": ENV_ID, "env_kwargs": ENV_KWARGS})
    assert _compare(tmp_path, f"agent:{model}") == 0
    assert f"agent:{model}: settings from {env_file(model)}" in capsys.readouterr().out
    stem = model.with_suffix("")  # as SB3 names it: "m" for m.zip
    assert _compare(tmp_path, f"agent:{stem}") == 0
    assert f"agent:{stem}: settings from {env_file(model)}" in capsys.readouterr().out


def test_library_loading_names_the_field(tmp_path, bare_zip):
    from ddl_gym.agents import TrainConfig, load_policy, save_model

    with pytest.raises(ValueError, match="env_kwargs field 'M' must be int, got str"):
        load_policy(bare_zip, env_id=ENV_ID, env_kwargs={"M": "4"})
    typo = r"field 'k' is not an argument of ddl_gym/Bench-v3 \(did you mean 'K'\?\)"
    with pytest.raises(ValueError, match=typo):
        load_policy(bare_zip, env_id="ddl_gym/Bench-v3", env_kwargs={"k": 4})
    with pytest.raises(ValueError, match="'cluster' comes from each case"):
        load_policy(bare_zip, env_id="ddl_gym/Bench-v3", env_kwargs={"cluster": "seed64"})
    with pytest.raises(ValueError, match="env_kwargs field 'tick_s'"):
        save_model(object(), tmp_path / "x.zip", ENV_ID, {"tick_s": "30min"})
    assert not list(tmp_path.iterdir())  # checked before anything is written

    bad = tmp_path / "bad.toml"
    bad.write_text("seed = 0\n[ppo]\nn_steps = 512.5\n")
    with pytest.raises(ValueError, match=r"bad.toml: config.ppo.n_steps must be int, got float"):
        TrainConfig.load(bad)
