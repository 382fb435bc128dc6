"""Format detection, the ``load_trace`` dispatcher and data-dir discovery."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ._io import (
    check_readable,
    parquet_columns,
    read_csv_header,
    read_csv_raw,
    read_json,
    read_parquet_raw,
)
from .alibaba import REQUIRED as _ALIBABA
from .alibaba import load_alibaba
from .dally import REQUIRED as _DALLY
from .dally import load_dally
from .philly import REQUIRED as _PHILLY
from .philly import load_philly
from .pollux import REQUIRED as _POLLUX
from .pollux import load_pollux
from .schema import SCHEMA_COLUMNS, Trace, TraceError, make_trace
from .tiresias import REQUIRED as _TIRESIAS
from .tiresias import load_tiresias

__all__ = [
    "FAMILIES",
    "detect_family",
    "discover_traces",
    "find_data_dir",
    "load_normalised",
    "load_trace",
    "save_trace",
]

DATA_ENV_VAR = "DDL_GYM_DATA"


def load_normalised(path: str | Path) -> Trace:
    """Load a CSV or Parquet file already in the normalised schema (as written
    by :func:`save_trace` or ``ddl-gym traces convert``). Both go through the
    same schema validation; Parquet rows are numbered 1..n in file order."""
    src = str(path)
    if Path(path).suffix.lower() == ".parquet":
        raw, rows = read_parquet_raw(path)
    else:
        raw, rows = read_csv_raw(path)
    return make_trace(Path(path).stem, raw, src, rows)


def save_trace(trace: Trace, path: str | Path) -> None:
    """Write ``trace.jobs`` as a CSV that :func:`load_trace` reads back."""
    trace.jobs.to_csv(path, index=False, float_format="%.17g")


# Family -> (loader, takes a seed). CSV families are told apart by header.
FAMILIES: dict[str, tuple[Callable[..., Trace], bool]] = {
    "dally": (load_dally, False),
    "philly": (load_philly, True),
    "pollux": (load_pollux, True),
    "tiresias": (load_tiresias, False),
    "alibaba": (load_alibaba, True),
    "normalised": (load_normalised, False),
}

_CSV_SIGNATURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("normalised", SCHEMA_COLUMNS),
    ("alibaba", _ALIBABA),
    ("tiresias", _TIRESIAS),
    ("pollux", _POLLUX),
    ("philly", _PHILLY),
)


_SUFFIXES = (".csv", ".json", ".parquet")


def detect_family(path: str | Path) -> str | None:
    """The trace family of ``path`` from its extension and columns, or None."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".json":
        try:
            data = read_json(p)
        except (OSError, TraceError):
            return None
        if isinstance(data, list) and not data:
            return "dally"  # the only JSON family; its loader says "workload is empty"
        if isinstance(data, list) and isinstance(data[0], dict):
            if set(_DALLY) <= set(data[0]):
                return "dally"
        return None
    if suffix == ".csv":
        header = set(read_csv_header(p))
        for family, cols in _CSV_SIGNATURES:
            if set(cols) <= header:
                return family
    if suffix == ".parquet" and set(SCHEMA_COLUMNS) <= set(parquet_columns(p)):
        return "normalised"
    return None


def _closest(header: list[str]) -> str:
    """``; closest: <family>, missing column(s) ...`` for a near-miss header."""
    have = set(header)
    best = max(_CSV_SIGNATURES, key=lambda fc: len(have & set(fc[1])) / len(fc[1]))
    family, cols = best
    missing = [c for c in cols if c not in have]
    if len(missing) == len(cols):
        return ""
    names = ", ".join(repr(c) for c in missing)
    return f"; closest family {family!r}: missing required column(s) {names}"


def load_trace(path: str | Path, family: str | None = None, seed: int = 0, **kwargs) -> Trace:
    """Load any supported trace file into the normalised schema.

    ``family`` overrides detection. ``seed`` goes to the families that make
    seeded choices (model assignment, Pollux work draws) and is ignored by the
    others; other keyword arguments go to the family's loader.
    """
    p = check_readable(path)
    fam = family or detect_family(p)
    if fam is None:
        suffix = p.suffix.lower()
        if suffix == ".json":
            read_json(p)  # malformed JSON: say where, not just "not recognised"
            what = "expected a JSON array of objects with fields " + ", ".join(_DALLY)
        elif suffix == ".parquet":
            what = f"Parquet columns {parquet_columns(p)}"
        else:
            header = read_csv_header(p)
            what = f"header columns {header}{_closest(header)}"
        raise TraceError(
            f"{p}: not a recognised trace file (extension {p.suffix!r}, {what}); known "
            f"families: {sorted(FAMILIES)} (.csv, .json, or .parquet in the normalised schema)"
        )
    if fam not in FAMILIES:
        raise ValueError(f"unknown trace family {fam!r}; known: {sorted(FAMILIES)}")
    loader, seeded = FAMILIES[fam]
    if seeded:
        kwargs["seed"] = seed
    return loader(p, **kwargs)


def discover_traces(data_dir: str | Path) -> dict[str, Path]:
    """Every loadable job-trace file under ``data_dir``, keyed by relative name.

    Keys are paths relative to ``data_dir`` without the suffix (e.g.
    ``"traces/philly/philly_2017-11-13_to_2017-11-19"``). Files are kept only
    if their format is recognised, so cluster specs, node lists, YARN samples
    and the Philly VC table are left out.
    """
    root = Path(data_dir)
    found: dict[str, Path] = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix.lower() in _SUFFIXES and detect_family(p):
            found[p.relative_to(root).with_suffix("").as_posix()] = p
    return found


def _repo_root() -> Path:
    """The folder holding pyproject.toml above this file, else the package's parent."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").is_file():
            return parent
    return here.parents[2]


def find_data_dir() -> Path | None:
    """The data dir, looked up in this order:

    1. ``$DDL_GYM_DATA`` when set: that folder, or None if it is not a
       directory (an explicit setting is never silently replaced);
    2. ``<repo>/../shared/data`` (the developers' mirror), if it exists;
    3. ``<user data dir>/data`` (where ``ddl-gym data fetch`` stores the
       files, see :mod:`ddl_gym.userdata`), if it exists;
    4. None.
    """
    env = os.environ.get(DATA_ENV_VAR)
    if env:
        p = Path(env).expanduser()
        return p if p.is_dir() else None
    cand = _repo_root().parent / "shared" / "data"
    if cand.is_dir():
        return cand
    from ddl_gym.userdata import data_home

    fetched = data_home() / "data"
    return fetched if fetched.is_dir() else None
