"""Your own model on the command line (``--policies agent:PATH``): its env
settings (``--agent-env`` for a bare SB3 zip) and a warning when a command
evaluates it on jobs it was trained on."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ddl_gym.cli.common import CliError

AGENT = "agent"
# an evaluation workload counts as seen in training when at least this share
# of its jobs is among the model's training jobs (chance matches of single
# jobs between unrelated traces stay far below it)
OVERLAP_SHARE = 0.1


def agent_paths(policies: Iterable[str]) -> list[str]:
    """The PATHs of the ``agent:PATH`` policies."""
    return [p.partition(":")[2] for p in policies if p.startswith(AGENT + ":")]


def apply_agent_env(text: str | None, policies: Sequence[str]) -> None:
    """Check every ``agent:PATH`` policy of a run before anything is written
    (its model file, its settings, the model loading with them; one line
    each, naming the file or option and the field), print the settings file
    each loads with, then keep ``--agent-env FILE|JSON`` beside each bare
    model (``PATH.env.json``), so every process of the run (and every later
    run) loads the model with it."""
    from ddl_gym.model_env import env_file, find_model_env, read_model_env, write_model_env

    paths = agent_paths(policies)
    env = None
    if text is not None:
        if not paths:
            raise CliError("--agent-env is for agent:PATH policies: give one in --policies")
        try:
            env = read_model_env(text, option="--agent-env")
        except (ValueError, FileNotFoundError) as err:
            raise CliError(str(err)) from None
    to_write = []
    for path in paths:
        _require_model_file(path)
        use = None
        if env is not None:
            config = _training_config(path)
            if config is not None:
                raise CliError(
                    f"agent:{path} carries its training config ({config}), which "
                    "says how to run it: drop --agent-env"
                )
            try:
                saved = find_model_env(path)
            except ValueError as err:
                raise CliError(f"agent:{path}: {err}") from None
            if saved is None:
                use = env
                to_write.append(path)
            elif (saved.env_id, dict(saved.env_kwargs)) != (env.env_id, dict(env.env_kwargs)):
                raise CliError(
                    f"agent:{path}: {env_file(path)} says env {saved.env_id} "
                    f"{dict(saved.env_kwargs)}, --agent-env says {env.env_id} "
                    f"{dict(env.env_kwargs)}: drop --agent-env or remove that file"
                )
        check_agent(path, use, "--agent-env")
    for path in to_write:
        assert env is not None
        written = write_model_env(path, env)
        print(f"agent:{path}: its env settings are now in {written} (from --agent-env)")


def check_agent(path: str, env: Any = None, source: str = "") -> None:
    """Load the model at ``path`` as the run will (with ``env``, a
    ``ModelEnv`` from ``source``, when given; else with the settings beside
    it), printing the settings file read; any failure is a one-line
    :class:`CliError` naming the model, and the file or option at fault."""
    try:
        from ddl_gym.agents.policy import load_policy, settings_path
    except ImportError as err:  # no agents extra
        raise CliError(
            f"agent:{path} needs the agents extra (pip install 'ddl-gym[agents]'): {err}"
        ) from None
    _require_model_file(path)
    origin = source if env is not None else ""
    try:
        if env is None:
            origin = str(settings_path(path))
            load_policy(path)
        else:
            load_policy(path, env_kwargs=env.env_kwargs, env_id=env.env_id)
    except Exception as err:  # noqa: BLE001 - every failure to load is the model's input
        what = str(err) if isinstance(err, ValueError | OSError) else f"{type(err).__name__}: {err}"
        at = f" ({origin})" if origin and origin not in what else ""
        raise CliError(" ".join(f"agent:{path}{at}: {what}".split())) from None
    print(f"agent:{path}: settings from {origin}", flush=True)


def _require_model_file(path: str) -> None:
    """``path`` (or ``path.zip``, as SB3 saves it) must be a file."""
    if not (Path(path).is_file() or Path(path + ".zip").is_file()):
        raise CliError(f"agent:{path}: no model file {path}")


def checked_env_kwargs(env_id: str | None, text: str | None) -> dict[str, Any] | None:
    """``--env-kwargs`` JSON, checked against ``--env-id``'s env: one line
    naming the option and the field when it is not valid JSON, not an object,
    an argument the env does not take or a value of the wrong type."""
    import json

    from ddl_gym.model_env import model_env

    kwargs = None
    if text is not None:
        try:
            kwargs = json.loads(text)
        except json.JSONDecodeError as err:
            raise CliError(f"--env-kwargs: not valid JSON: {err}") from None
        if not isinstance(kwargs, dict):
            raise CliError(f"--env-kwargs: want a JSON object, got {type(kwargs).__name__}")
    if env_id is not None or kwargs is not None:
        try:
            model_env(env_id, None, trained_on=())
        except ValueError as err:
            raise CliError(f"--env-id: {err}") from None
        try:
            model_env(env_id, kwargs, trained_on=())
        except ValueError as err:
            raise CliError(f"--env-kwargs: {err}") from None
    return kwargs


def check_agent_spec(policy: str, env_id: str | None, env_kwargs: dict[str, Any] | None) -> None:
    """``check_agent`` for a benchmark policy spec when it is ``agent:PATH``
    (with ``--env-id`` / ``--env-kwargs`` when given)."""
    if not policy.startswith(AGENT + ":"):
        return
    from ddl_gym.model_env import model_env

    env = None
    if env_id is not None or env_kwargs is not None:
        env = model_env(env_id, env_kwargs, trained_on=())
    check_agent(policy.partition(":")[2], env, "--env-id/--env-kwargs")


def _training_config(path: str) -> Path | None:
    """The training config a model loads with (in its own folder), if any."""
    try:
        from ddl_gym.agents.policy import config_path
    except ImportError:  # no agents extra: the model cannot run anyway
        return None
    try:
        return config_path(path)
    except FileNotFoundError:
        return None


def job_keys(trace: Any) -> set[tuple[Any, ...]]:
    """One key per job that survives windowing and re-basing of arrival
    times: model, GPUs and amount of work."""
    jobs = trace.jobs
    return {
        (str(m), int(g), round(float(i), 6))
        for m, g, i in zip(jobs["model"], jobs["gpus"], jobs["iterations"], strict=True)
    }


def overlap_warnings(
    agents: Sequence[str], workloads: Iterable[tuple[str, Any]], share: float = OVERLAP_SHARE
) -> list[str]:
    """A line per (agent policy, evaluation workload) where the workload's
    jobs are among the agent's training jobs. ``agents``: ``agent`` or
    ``agent:PATH`` names; ``workloads``: ``(label, trace)`` pairs."""
    try:
        from ddl_gym.agents.policy import DEFAULT_MODEL, training_jobs
    except ImportError:  # no agents extra: no agent runs either
        return []
    seen: dict[str, tuple[str, set[tuple[Any, ...]]]] = {}
    for name in agents:
        path = name.partition(":")[2] or str(DEFAULT_MODEL)
        try:
            trained = training_jobs(path)
        except (FileNotFoundError, ValueError):  # load_policy reports what is wrong
            continue
        keys: set[tuple[Any, ...]] = set()
        for trace in trained:
            keys |= job_keys(trace)
        seen[name] = (path, keys)
    lines = []
    for label, trace in workloads:
        mine = job_keys(trace)
        for name, (_, keys) in seen.items():
            common = len(mine & keys)
            if mine and common >= share * len(mine):
                lines.append(
                    f"{name} was trained on {common} of the {len(mine)} distinct jobs of "
                    f"{label}: its numbers there are not held-out results"
                )
    return lines
