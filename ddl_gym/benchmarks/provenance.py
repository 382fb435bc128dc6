"""Where a benchmark record came from: suite, input data, code, settings.

Every record :func:`~ddl_gym.benchmarks.runner.run_case` writes carries a
``provenance`` dict:

* ``suite`` and ``suite_hash``: the suite's name and content hash;
* ``inputs``: the SHA-256 of each data file the case read (relative path ->
  digest, from the file actually read under the data dir);
* ``ddl_gym``: the installed version (``importlib.metadata``);
* ``commit``: the git HEAD of the source tree when it is a git checkout,
  with ``+dirty`` when tracked files differ from it, else ``"unknown"``;
* ``engine``: the engine settings the simulation ran with (the engine's
  defaults, overridden by the policy's ``engine_kwargs()``, overridden by the
  case's congestion and the runner's own settings: what ``simulate()`` used).

:func:`foreign_field` tells whether a finished record may stand in for a
run about to be made (``evaluate(..., resume=True)``), and which field says
no. :func:`check_inputs` refuses input files whose checksum differs from
the data manifest for suites that pin their inputs (``Suite.hash_inputs``).
"""

from __future__ import annotations

import importlib.metadata
import inspect
import os
import subprocess
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from ddl_gym.benchmarks.workload import SYNTHETIC, data_path

UNKNOWN = "unknown"

# the provenance fields a resumed record must share with the run it stands for,
# in the order a refusal names them
RESUME_FIELDS = ("suite", "suite_hash", "inputs", "ddl_gym", "commit", "policy", "engine")


class InputChecksumError(RuntimeError):
    """A suite input file is not the file the suite was defined on."""


# -- code --------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def package_version() -> str:
    """The installed ddl-gym version (``"unknown"`` when not installed)."""
    try:
        return importlib.metadata.version("ddl-gym")
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN


def _source_root() -> Path:
    """The folder holding the ``ddl_gym`` package (a checkout's top level)."""
    return Path(__file__).resolve().parents[2]


@lru_cache(maxsize=1)
def code_commit() -> str:
    """Git HEAD of the source tree (``+dirty`` when tracked files differ from
    it), or ``"unknown"`` (not a git checkout, no git). Computed once per
    process: a record names the code the process imported."""
    return _git_commit(_source_root())


def _git_commit(root: Path) -> str:
    if not (root / ".git").exists():
        return UNKNOWN  # an installed wheel, or a source tree without history
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}  # never take the index lock
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=10, env=env, check=True,
        ).stdout.strip()  # fmt: skip
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=30, env=env, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    if not head:
        return UNKNOWN
    return head + ("+dirty" if status.strip() else "")


# -- input data --------------------------------------------------------------------------
def case_inputs(case: Any) -> tuple[str, ...]:
    """The data files (paths relative to the data dir) ``case`` reads: its
    workload's ``input_files()`` when it has one, else its trace file (none
    for the synthetic generator)."""
    workload = case.workload
    listed: Callable[[], Iterable[str]] | None = getattr(workload, "input_files", None)
    if callable(listed):
        return tuple(listed())
    return () if workload.source == SYNTHETIC else (workload.source,)


@lru_cache(maxsize=256)
def _sha_cached(path: str, mtime_ns: int, size: int) -> str:
    from ddl_gym.data import sha256_of

    return sha256_of(path)


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file, cached per (path, modification time, size)."""
    st = os.stat(path)
    return _sha_cached(str(Path(path).resolve()), st.st_mtime_ns, st.st_size)


def actual_inputs(case: Any, data_dir: str | Path | None = None) -> dict[str, str]:
    """Relative path -> SHA-256 of each input file of ``case`` as found under
    ``data_dir`` (default: the data dir the workload reads from)."""
    out = {}
    for rel in case_inputs(case):
        path = Path(data_dir) / rel if data_dir is not None else data_path(rel)
        if not path.is_file():
            raise FileNotFoundError(f"input {rel!r} of case {case.name!r} not found: {path}")
        out[rel] = file_sha256(path)
    return out


def pinned_inputs(case: Any) -> dict[str, str]:
    """Relative path -> SHA-256 the data manifest pins for each input of
    ``case`` (a file the manifest does not list is an error: a suite that
    pins its inputs may read only manifest files)."""
    from ddl_gym.data import expected_sha256

    out = {}
    for rel in case_inputs(case):
        sha = expected_sha256(rel)
        if sha is None:
            raise ValueError(
                f"input {rel!r} of case {case.name!r} is not in the data manifest "
                "(ddl_gym/data/manifest.json)"
            )
        out[rel] = sha
    return out


def check_inputs(case: Any, actual: Mapping[str, str], suite: str = "") -> None:
    """Raise :class:`InputChecksumError` when an input's ``actual`` checksum
    is not the one the manifest pins (the benchmark would measure other data)."""
    for rel, sha in pinned_inputs(case).items():
        got = actual.get(rel)
        if got != sha:
            from ddl_gym.data import fetch_command

            raise InputChecksumError(
                f"{rel}: input of {suite + ' ' if suite else ''}case {case.name!r} has "
                f"SHA-256 {got}, the data manifest expects {sha}; the file is not the one "
                f"the suite was defined on: restore it with `{fetch_command(suite or None)}`"
            )


# -- engine settings ---------------------------------------------------------------------
@lru_cache(maxsize=1)
def _engine_defaults() -> dict[str, Any]:
    from ddl_gym.engine.engine import Engine

    sig = inspect.signature(Engine.__init__)
    return {
        name: p.default
        for name, p in sig.parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is not inspect.Parameter.empty
    }


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data; an object without a JSON form becomes its
    type's name (never its repr, which may hold a memory address)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    name = getattr(value, "name", None)
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    return f"<{kind} {name}>" if isinstance(name, str) else f"<{kind}>"


# Settings that act only on LLM jobs (a trace's layout column): at their
# defaults they change nothing a record of data-parallel jobs holds, so they
# are recorded only when set (records made before they existed stay equal).
RECORDED_WHEN_SET = ("llm_gpu", "llm_split_tp")


def engine_settings(policy: Any, explicit: Mapping[str, Any]) -> dict[str, Any]:
    """The settings ``simulate(trace, cluster, policy, **explicit)`` runs the
    engine with, as JSON data."""
    from ddl_gym.engine.simulate import policy_engine_kwargs

    defaults = _engine_defaults()
    merged = {**defaults, **policy_engine_kwargs(policy), **explicit}
    for key in RECORDED_WHEN_SET:
        if key in merged and merged[key] == defaults.get(key):
            del merged[key]
    return jsonable(merged)


# -- suites ------------------------------------------------------------------------------
@lru_cache(maxsize=16)
def suite_fingerprint(name: str) -> str | None:
    """The content hash of the registered suite ``name`` (None: no such suite),
    computed once per process."""
    from ddl_gym.benchmarks.suite import get_suite, suite_hash

    try:
        return suite_hash(get_suite(name))
    except ValueError:
        return None


@lru_cache(maxsize=16)
def suite_pins_inputs(name: str) -> bool:
    """Whether the registered suite ``name`` pins its inputs (``hash_inputs``)."""
    from ddl_gym.benchmarks.suite import get_suite

    try:
        return bool(get_suite(name).hash_inputs)
    except ValueError:
        return False


def provenance(
    suite: str,
    case: Any,
    policy: str,
    engine: Mapping[str, Any],
    inputs: Mapping[str, str],
) -> dict[str, Any]:
    """The ``provenance`` dict of one record (see the module docstring)."""
    return {
        "suite": suite,
        "suite_hash": suite_fingerprint(suite) if suite else None,
        "inputs": dict(sorted(inputs.items())),
        "ddl_gym": package_version(),
        "commit": code_commit(),
        "policy": policy,
        "engine": dict(engine),
    }


def foreign_field(record: Mapping[str, Any], expected: Mapping[str, Any]) -> str | None:
    """The first provenance field (``RESUME_FIELDS``) in which ``record``
    differs from ``expected`` (a run's provenance), or None when it may stand
    for that run. A record without provenance (written before records had
    one) differs in ``provenance``."""
    got = record.get("provenance")
    if not isinstance(got, Mapping):
        return "provenance"
    for key in RESUME_FIELDS:
        if got.get(key) != expected.get(key):
            return key
    return None
