"""The env a model was trained in, kept beside the model.

A model zip alone does not say which env it observes (windows ``K`` / ``M``,
cluster shape, engine settings). :func:`save_model` saves an SB3 model and,
beside it, ``<stem>.env.json``::

    {"env_id": "ddl_gym/Small-v0", "env_kwargs": {"congestion": "heavy"},
     "trained_on": [], "ddl_gym_version": "0.1.0"}

so ``ddl_gym.agents.load_policy(path)`` and ``ddl-gym compare --policies
agent:PATH`` need nothing else. ``trained_on`` lists the trace specs the
model learned from (as ``SplitConfig.traces`` writes them: ``default:0``, a
trace file; empty for fresh synthetic draws), so a comparison can warn when it
evaluates the model on its own training jobs. Torch-free: the command line
reads these files without loading a model.
"""

from __future__ import annotations

import collections.abc
import difflib
import inspect
import json
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENV_SUFFIX = ".env.json"
DEFAULT_ENV_ID = "ddl_gym/Cluster-v0"


@dataclass(frozen=True)
class ModelEnv:
    """How a model's env was made: ``gymnasium.make(env_id, **env_kwargs)``;
    ``trained_on``: trace specs of its training jobs."""

    env_id: str = DEFAULT_ENV_ID
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    trained_on: tuple[str, ...] = ()
    ddl_gym_version: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "env_id": self.env_id,
            "env_kwargs": dict(self.env_kwargs),
            "trained_on": list(self.trained_on),
            "ddl_gym_version": self.ddl_gym_version,
        }


def env_file(model_path: str | Path) -> Path:
    """``my_model.zip`` -> ``my_model.env.json`` (beside it)."""
    p = Path(model_path)
    stem = p.name[: -len(".zip")] if p.name.endswith(".zip") else p.name
    return p.with_name(stem + ENV_SUFFIX)


def trained_on_specs(env_id: str, env_kwargs: Mapping[str, Any] | None) -> list[str]:
    """The trace specs an env of ``env_id`` / ``env_kwargs`` draws its
    episodes from; empty for a synthetic spec (a fresh trace per episode)."""
    from ddl_gym import ENTRY_POINTS, ENV_VARIANTS
    from ddl_gym.env.sources import PHILLY_WEEK_FILE, SEED_WEEK_FILE

    arguments = {**ENV_VARIANTS.get(env_id, {}), **dict(env_kwargs or {})}
    if ENTRY_POINTS.get(env_id, "").endswith(":BenchEnv"):
        from ddl_gym.env.bench_env import trace_files

        return trace_files(**arguments)
    trace = arguments.get("trace", "default")
    if not isinstance(trace, str):
        return []
    # the env's trace names as it loads them (ddl_gym.env.sources.named_trace)
    named = {"default": "default:0", "seed-week": SEED_WEEK_FILE, "philly-week": PHILLY_WEEK_FILE}
    return [named.get(trace, trace)]


def model_env(
    env_id: str | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    trained_on: Sequence[str] | None = None,
) -> ModelEnv:
    """A :class:`ModelEnv`, checked: a registered env id, JSON-able arguments."""
    from ddl_gym import ENV_VARIANTS, __version__

    env_id = env_id or DEFAULT_ENV_ID
    if not isinstance(env_id, str) or env_id not in ENV_VARIANTS:
        raise ValueError(f"unknown env id {env_id!r}; registered: {', '.join(ENV_VARIANTS)}")
    if not isinstance(env_kwargs, Mapping | None):
        raise ValueError(f"env_kwargs must be a JSON object, got {type(env_kwargs).__name__}")
    kwargs = dict(env_kwargs or {})
    try:
        json.dumps(kwargs)
    except TypeError as err:
        raise ValueError(
            f"env_kwargs must be plain data (names, numbers, lists, dicts) to be saved: {err}"
        ) from None
    check_env_kwargs(env_id, kwargs)
    specs = trained_on_specs(env_id, kwargs) if trained_on is None else list(trained_on)
    return ModelEnv(env_id, kwargs, tuple(str(s) for s in specs), __version__)


def env_parameters(env_id: str) -> dict[str, Any]:
    """The arguments ``gymnasium.make(env_id, ...)`` takes, by name, with
    their type hints (``Any`` when the code gives none)."""
    import typing

    from ddl_gym.env import ClusterEnv

    def hints(fn: Any) -> dict[str, Any]:
        found = typing.get_type_hints(fn)
        names = [p for p in inspect.signature(fn).parameters.values() if p.kind != p.VAR_KEYWORD]
        return {p.name: found.get(p.name, Any) for p in names if p.name != "self"}

    params = hints(ClusterEnv.__init__)
    if _is_bench(env_id):
        from ddl_gym.env.bench_env import CASE_ARGUMENTS, BenchEnv
        from ddl_gym.env.set_env import SetClusterEnv

        params = {**params, **hints(SetClusterEnv.__init__), **hints(BenchEnv.__init__)}
        for name in CASE_ARGUMENTS:
            params.pop(name, None)  # each case brings its own
    return params


def check_env_kwargs(env_id: str, env_kwargs: Mapping[str, Any]) -> None:
    """Refuse, naming the field, an argument ``env_id``'s env does not take
    or a value of the wrong type (JSON's: a number where a name is wanted, a
    name where a number is); the env itself checks the values' ranges."""
    params = env_parameters(env_id)
    for name, value in env_kwargs.items():
        if name not in params and _is_bench(env_id) and name in _case_arguments():
            raise ValueError(
                f"env_kwargs field {name!r} comes from each case of {env_id}: pick cases "
                "with cases=[...] instead"
            )
        if name not in params:
            lower = {p.lower(): p for p in params}  # "k" is "K" mistyped
            close = difflib.get_close_matches(str(name).lower(), list(lower), n=1)
            hint = f" (did you mean {lower[close[0]]!r}?)" if close else ""
            raise ValueError(
                f"env_kwargs field {name!r} is not an argument of {env_id}{hint}; "
                f"it takes: {', '.join(sorted(params))}"
            )
        want = params[name]
        if not json_fits(value, want):
            raise ValueError(
                f"env_kwargs field {name!r} must be {describe_type(want)}, "
                f"got {type(value).__name__} {_short(value)}"
            )


def _is_bench(env_id: str) -> bool:
    from ddl_gym import ENTRY_POINTS

    return ENTRY_POINTS.get(env_id, "").endswith(":BenchEnv")


def _case_arguments() -> tuple[str, ...]:
    from ddl_gym.env.bench_env import CASE_ARGUMENTS

    return CASE_ARGUMENTS


def json_fits(value: Any, hint: Any) -> bool:
    """Whether a JSON (or TOML) value can stand for a value of type ``hint``
    (an int for a float, a list for a sequence; a hint this does not know
    passes: the code that takes the value checks it)."""
    import typing

    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(json_fits(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    sequence = origin in (list, tuple, Sequence, collections.abc.Sequence)
    if sequence or hint in (list, tuple):
        args = typing.get_args(hint)
        if isinstance(value, str):  # one name where names are taken (BenchEnv's cases)
            return bool(args) and args[0] is str
        if not isinstance(value, list | tuple):
            return False
        return not args or all(json_fits(v, args[0]) for v in value)
    if origin in (dict, Mapping, collections.abc.Mapping) or hint is dict:
        return isinstance(value, Mapping)
    if isinstance(hint, type):  # a class (Cluster, Congestion): JSON holds none
        return isinstance(value, hint)
    return True


def describe_type(hint: Any) -> str:
    """``hint`` in words, for an error message: ``int``, ``float or null``."""
    import typing

    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(describe_type(h) for h in typing.get_args(hint))
    if hint is type(None):
        return "null"
    origin = typing.get_origin(hint)
    if origin is not None:
        return "a list" if origin in (list, tuple, collections.abc.Sequence) else "an object"
    return getattr(hint, "__name__", str(hint))


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value) if _is_json(value) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def write_model_env(model_path: str | Path, env: ModelEnv) -> Path:
    """Write ``env`` beside the model; returns the file."""
    path = env_file(model_path)
    path.write_text(json.dumps(env.to_dict(), indent=2) + "\n")
    return path


def save_model(
    model: Any,
    path: str | Path,
    env_id: str | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    trained_on: Sequence[str] | None = None,
) -> Path:
    """``model.save(path)`` (any SB3 / sb3-contrib model) plus its env beside
    it (``<stem>.env.json``): then ``load_policy(path)`` and ``ddl-gym compare
    --policies agent:PATH`` need no more. ``trained_on``: the trace specs it
    learned from (default: what the env id and arguments draw from)."""
    env = model_env(env_id, env_kwargs, trained_on)  # check before writing anything
    path = Path(path)
    if path.suffix != ".zip":
        path = path.with_name(path.name + ".zip")
    model.save(str(path))
    write_model_env(path, env)
    return path


def parse_model_env(data: Mapping[str, Any], where: str) -> ModelEnv:
    """A :class:`ModelEnv` from its JSON object (``where`` names it in errors)."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: want a JSON object with env_id and env_kwargs")
    known = {"env_id", "env_kwargs", "trained_on", "ddl_gym_version"}
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}; known: {sorted(known)}")
    kwargs = data.get("env_kwargs") or {}
    if not isinstance(kwargs, Mapping):
        raise ValueError(f"{where}: env_kwargs must be a JSON object")
    trained_on = data.get("trained_on")
    try:
        env = model_env(data.get("env_id"), kwargs, trained_on)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    version = str(data.get("ddl_gym_version", ""))  # the version that wrote it, kept
    return ModelEnv(env.env_id, env.env_kwargs, env.trained_on, version)


def read_model_env(source: str | Path, option: str | None = None) -> ModelEnv:
    """A model's env from a JSON file or JSON text (``--agent-env``); errors
    are one line naming ``option`` (the command-line option it came from)
    and the file, and the field at fault."""
    text = str(source)
    if text.lstrip().startswith("{"):
        where, raw = option or "env JSON", text
    else:
        path = Path(text).expanduser()
        named = f"{option} {path}" if option else str(path)
        if not path.is_file():
            raise FileNotFoundError(f"{named}: no such env file (or give the JSON itself)")
        where, raw = named, path.read_text()
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        raise ValueError(f"{where}: not valid JSON: {err}") from None
    return parse_model_env(data, where)


def find_model_env(model_path: str | Path) -> ModelEnv | None:
    """The env saved beside a model (``<stem>.env.json``), if there is one."""
    path = env_file(model_path)
    return read_model_env(path) if path.is_file() else None
