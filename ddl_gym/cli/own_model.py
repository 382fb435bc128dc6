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
    """``--agent-env FILE|JSON``: write the env beside each ``agent:PATH``
    model (``PATH.env.json``) that has none, so every process of the run
    (and every later run) loads the model with it."""
    if text is None:
        return
    from ddl_gym.model_env import env_file, find_model_env, read_model_env, write_model_env

    paths = agent_paths(policies)
    if not paths:
        raise CliError("--agent-env is for agent:PATH policies: give one in --policies")
    try:
        env = read_model_env(text)
    except (ValueError, FileNotFoundError) as err:
        raise CliError(f"--agent-env: {err}") from None
    for path in paths:
        if not Path(path).is_file():
            raise CliError(f"agent:{path}: no such model file")
        if _training_config(path) is not None:
            raise CliError(
                f"agent:{path} carries its training config ({_training_config(path)}), which "
                "says how to run it: drop --agent-env"
            )
        saved = find_model_env(path)
        if saved is None:
            written = write_model_env(path, env)
            print(f"agent:{path}: its env settings are now in {written} (from --agent-env)")
        elif (saved.env_id, dict(saved.env_kwargs)) != (env.env_id, dict(env.env_kwargs)):
            raise CliError(
                f"agent:{path}: {env_file(path)} says env {saved.env_id} "
                f"{dict(saved.env_kwargs)}, --agent-env says {env.env_id} "
                f"{dict(env.env_kwargs)}: drop --agent-env or remove that file"
            )


def _training_config(path: str) -> Path | None:
    """The ``ddl_gym.agents.train`` config a model loads with, if any."""
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
