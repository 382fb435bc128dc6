"""Normalised job-trace schema, its validation, and the trace error types.

Every adapter turns its source file into a :class:`Trace` whose ``jobs`` frame
has exactly :data:`SCHEMA_COLUMNS` (plus any of :data:`OPTIONAL_COLUMNS`).

Row numbers in error messages are 1-based *data* rows of the source file, as a
spreadsheet would number them without the header line (for the seed's JSON
traces: the 1-based position of the object in the top-level array).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "OPTIONAL_COLUMNS",
    "SCHEMA_COLUMNS",
    "Trace",
    "TraceError",
    "TraceWarning",
    "MAX_ARRIVAL_S",
    "MAX_JOB_GPUS",
    "MAX_WORK_S",
    "canonical_model_names",
    "reference_iter_time",
    "validate",
]

SCHEMA_COLUMNS: tuple[str, ...] = (
    "job_id",
    "arrival_s",
    "gpus",
    "model",
    "iterations",
    "iter_time_s",
)
# ``gpu_types``: the GPU types a job accepts on a typed cluster, catalogue
# names (ddl_gym.gpu_types; openb and Gavel spellings too) joined by ``|``,
# empty for any; ``gpu_mem_gib``: GPU memory a job needs per GPU (empty:
# unknown). Untyped clusters ignore both. ``layout``: an LLM job's parallel
# layout, e.g. ``tp8-pp4-dp16`` (ddl_gym.llm.parse_layout; tp*pp*dp must be
# its GPUs), empty for a data-parallel job of the catalogue (docs/llm.md).
OPTIONAL_COLUMNS: tuple[str, ...] = (
    "duration_s",
    "user",
    "vc",
    "gpu_types",
    "gpu_mem_gib",
    "layout",
)

# Fallback copy of the catalogue's names, used only for validation while
# ddl_gym.profiles is not importable; the catalogue's MODEL_NAMES wins.
_CANONICAL_MODELS: tuple[str, ...] = (
    "resnet50",
    "resnet18",
    "alexnet",
    "mobilenet_v3",
    "vgg11",
    "bert_large",
    "vgg16",
    "vgg19",
    "resnet101",
    "resnet152",
    "inception_v3",
    "inception_v4",
    "googlenet",
    "mobilenet_v2",
    "bert_base",
    "deepspeech2",
    "yolov3",
    "ncf",
    "transformer",
    "lstm_lm",
    "recommendation",
    "a3c",
    "cyclegan",
)

# Sanity bounds every reader enforces, so absurd values are errors naming the
# row instead of overflowing int64 or stalling the clock deep in the engine.
# No cluster the simulator models comes near a million GPUs; 1e10 s is 317
# years (float64 still resolves microseconds there); 1e11 single-GPU seconds
# is 3,170 GPU-years, far above any real job (Philly's largest is ~14 GPU-years).
MAX_JOB_GPUS = 1_000_000
MAX_ARRIVAL_S = 1e10
MAX_WORK_S = 1e11
MAX_ITER_TIME_S = 1e6

# Spellings treated as "no value" in text files.
_EMPTY_TOKENS = frozenset({"", "nan", "na", "n/a", "null", "none"})


class TraceError(ValueError):
    """A trace file or frame is malformed; the message names file, row, field."""


class TraceWarning(UserWarning):
    """A trace was repaired (e.g. sorted) or rows were skipped on purpose."""


@dataclass(eq=False)
class Trace:
    """A job trace in the normalised schema.

    ``source_rows`` (optional) holds the 1-based source-file row of each job,
    aligned with ``jobs``, so later checks (e.g. ``check_fits``) can point
    back into the file. ``dropped`` counts rows an adapter skipped, by reason.
    The constructor does not validate; use :func:`validate` or an adapter.
    """

    name: str
    jobs: pd.DataFrame
    source: str | None = None
    source_rows: np.ndarray | None = None
    dropped: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.jobs)

    @property
    def max_gpus(self) -> int:
        return int(self.jobs["gpus"].max()) if len(self.jobs) else 0

    def row_label(self, i: int) -> str:
        """Where job ``i`` (position in ``jobs``) came from, for messages."""
        job_id = self.jobs["job_id"].iloc[i]
        if self.source_rows is not None:
            return f"row {int(self.source_rows[i])} (job_id {job_id!r})"
        return f"row {i + 1} of the trace (job_id {job_id!r})"


# ---------------------------------------------------------------------------
# Model catalogue access (lazy: ddl_gym.profiles is written separately)


def canonical_model_names() -> tuple[str, ...]:
    """Canonical model names: the catalogue's (with models added by
    ``register_model``) if importable, else the fallback."""
    try:
        from ddl_gym.profiles import model_names
    except ModuleNotFoundError as exc:
        if exc.name not in ("ddl_gym.profiles", "ddl_gym"):
            raise
        return _CANONICAL_MODELS
    return model_names()


def reference_iter_time(model: str) -> float:
    """The catalogue's reference single-GPU iteration time (s) for ``model``."""
    from ddl_gym.profiles import get_profile

    return float(get_profile(model).iter_time_s)


# ---------------------------------------------------------------------------
# Error helpers shared by the adapters


def row_note(source: str) -> str:
    """How rows are numbered in ``source``, appended to every row reference."""
    if str(source).lower().endswith(".json"):
        return "1-based position in the JSON array"
    return "1-based data row, header not counted"


def where(source: str, row: int, field_name: str) -> str:
    return f"{source}: row {row} ({row_note(source)}), field {field_name!r}"


def raise_at(
    source: str,
    rows: np.ndarray,
    bad: np.ndarray,
    field_name: str,
    problem: str | Sequence[str | None] | Callable[[int], str],
) -> None:
    """Raise a TraceError for the first True in ``bad`` (if any).

    ``problem`` is one message, one per row (None where the row is fine), or
    a function of the row's position that formats it only for the bad row
    (a list of messages for every row cost more than parsing); the count of further bad rows
    is appended so a user fixing the file knows it is not a one-off.
    """
    idx = np.flatnonzero(bad)
    if idx.size == 0:
        return
    i = int(idx[0])
    if isinstance(problem, str):
        text = problem
    elif callable(problem):
        text = problem(i)
    else:
        text = problem[i]
    more = f" (and {idx.size - 1} more row(s))" if idx.size > 1 else ""
    raise TraceError(f"{where(source, int(rows[i]), field_name)}: {text}{more}")


def require_columns(columns: Sequence[str], required: Sequence[str], source: str) -> None:
    missing = [c for c in required if c not in set(columns)]
    if missing:
        raise TraceError(
            f"{source}: header row: missing required column(s) "
            f"{', '.join(repr(c) for c in missing)} (field); "
            f"columns present: {list(columns)}"
        )


def _is_empty(values: pd.Series) -> np.ndarray:
    none = values.isna().to_numpy()
    if _all_text(values):
        text = values.str.strip().str.lower()
        return none | text.isin(_EMPTY_TOKENS).to_numpy()
    as_text = values.astype(object).map(
        lambda v: isinstance(v, str) and v.strip().lower() in _EMPTY_TOKENS
    )
    return none | as_text.to_numpy(dtype=bool)


def _all_text(values: pd.Series) -> bool:
    """Every cell a string (CSV files): the per-cell type checks can be skipped."""
    return pd.api.types.infer_dtype(values, skipna=False) == "string"


def _type_problem(v: object, expected: str) -> str | None:
    """Why a cell's Python type is wrong for a field, or None.

    Text files give strings; JSON and Parquet give typed values, and a
    boolean or a nested list/object where a number or a name belongs is an
    error, never read as 1/0 or as its ``str()``.
    """
    if isinstance(v, (bool, np.bool_)):
        return f"boolean value {str(bool(v)).lower()} (expected {expected})"
    if v is None or v is pd.NA or isinstance(v, (str, int, float, np.integer, np.floating)):
        return None
    return f"{type(v).__name__} value {v!r} (expected {expected})"[:200]


def parse_numeric(
    values: pd.Series,
    *,
    source: str,
    rows: np.ndarray,
    field_name: str,
    integer: bool = False,
    minimum: float | None = 0.0,
    positive: bool = False,
    allow_empty: bool = False,
    maximum: float | None = None,
    maximum_why: str = "",
) -> np.ndarray:
    """Parse a column to float64, raising a TraceError naming the bad row.

    Empty values become NaN if ``allow_empty``; otherwise they are errors.
    ``positive`` rejects zero (e.g. zero GPUs); ``minimum`` rejects negatives;
    ``maximum`` rejects absurdly large values (``maximum_why`` says why).
    """
    values = values.reset_index(drop=True)
    cells = values.astype(object).tolist()
    text_only = _all_text(values)
    if not text_only:
        expected = "an integer" if integer else "a number"
        typed = [_type_problem(v, expected) for v in cells]
        bad_type = np.array([t is not None for t in typed], dtype=bool)
        raise_at(source, rows, bad_type, field_name, typed)
    empty = _is_empty(values)
    if not allow_empty:
        raise_at(source, rows, empty, field_name, "empty or NaN value")
    if text_only:
        text = values.str.strip().where(~empty, np.nan)
    else:
        text = []
        for v, e in zip(cells, empty, strict=True):
            if e:
                text.append(np.nan)
            elif isinstance(v, str):
                text.append(v.strip())
            elif isinstance(v, (int, np.integer)):
                # exact ints beyond float range must not raise OverflowError
                text.append(float(v) if abs(int(v)) < 2**1000 else np.inf)
            else:
                text.append(v)
        text = pd.Series(text, dtype=object)
    num = pd.to_numeric(text, errors="coerce").astype("float64")
    arr = num.to_numpy(dtype="float64", na_value=np.nan)
    bad = np.isnan(arr) & ~empty
    raise_at(
        source,
        rows,
        bad,
        field_name,
        lambda i: f"non-numeric value {cells[i]!r}",
    )
    ok = ~np.isnan(arr)
    raise_at(
        source,
        rows,
        ok & ~np.isfinite(arr),
        field_name,
        lambda i: f"non-finite value {cells[i]!r}",
    )
    if integer:
        frac = ok & np.isfinite(arr) & (arr != np.round(arr))
        raise_at(
            source,
            rows,
            frac,
            field_name,
            lambda i: f"non-integer value {arr[i]!r}",
        )
    if minimum is not None:
        raise_at(
            source,
            rows,
            ok & (arr < minimum),
            field_name,
            lambda i: f"negative value {arr[i]!r} (must be >= {minimum:g})",
        )
    if positive:
        raise_at(
            source,
            rows,
            ok & (arr <= 0),
            field_name,
            lambda i: f"value {arr[i]!r} not allowed (must be > 0)",
        )
    if maximum is not None:
        why = f"; {maximum_why}" if maximum_why else ""
        raise_at(
            source,
            rows,
            ok & (arr > maximum),
            field_name,
            lambda i: f"value {arr[i]:.6g} too large (must be <= {maximum:,.6g}{why})",
        )
    return arr


def parse_gpus(
    values: pd.Series, *, source: str, rows: np.ndarray, field_name: str, positive: bool = True
) -> np.ndarray:
    """A GPU-count column: a positive integer no larger than :data:`MAX_JOB_GPUS`."""
    return parse_numeric(
        values,
        source=source,
        rows=rows,
        field_name=field_name,
        integer=True,
        positive=positive,
        maximum=MAX_JOB_GPUS,
        maximum_why="larger than any cluster the simulator models",
    )


def parse_text(
    values: pd.Series,
    *,
    source: str,
    rows: np.ndarray,
    field_name: str,
    allow_empty: bool = False,
) -> np.ndarray:
    """Parse a column to stripped strings; empty values are errors unless allowed.

    Numbers are accepted (JSON ids may be numbers); booleans and nested
    lists or objects are errors.
    """
    values = values.reset_index(drop=True)
    text_only = _all_text(values)
    if not text_only:
        typed = [_type_problem(v, "a name or number") for v in values.astype(object).tolist()]
        bad_type = np.array([t is not None for t in typed], dtype=bool)
        raise_at(source, rows, bad_type, field_name, typed)
    empty = _is_empty(values)
    if not allow_empty:
        raise_at(source, rows, empty, field_name, "empty or NaN value")
    if text_only:
        return values.str.strip().where(~empty, "").to_numpy(dtype=object)
    cells = values.astype(object).tolist()
    return np.array(
        ["" if e else str(v).strip() for v, e in zip(cells, empty, strict=True)], dtype=object
    )


def map_models(
    names: np.ndarray,
    table: Mapping[str, str],
    *,
    source: str,
    rows: np.ndarray,
    field_name: str,
) -> np.ndarray:
    """Map a family's model names to canonical names via an explicit table.

    Canonical names are accepted as themselves, so hand-written files in a
    family's format may use them directly.
    """
    canon = set(canonical_model_names())
    full = {**{c: c for c in canon}, **table}
    mapped = np.array([full.get(str(n)) for n in names], dtype=object)
    unknown = np.array([m is None for m in mapped])
    raise_at(
        source,
        rows,
        unknown,
        field_name,
        lambda i: f"unknown model name {str(names[i])!r} (known: {sorted(table)})",
    )
    return mapped


# ---------------------------------------------------------------------------
# Validation


def validate(df: pd.DataFrame, source: str) -> pd.DataFrame:
    """Check and normalise a frame in the trace schema.

    Returns a new frame with :data:`SCHEMA_COLUMNS` in order, then any present
    :data:`OPTIONAL_COLUMNS`, with canonical dtypes, stably sorted by
    ``arrival_s`` (a :class:`TraceWarning` if it was not) and re-indexed
    0..n-1. Other columns are dropped. Row ``i`` of ``df`` is reported as
    row ``i + 1``. Raises :class:`TraceError` naming file, row and field.
    """
    jobs, _ = validate_rows(df, source)
    return jobs


def validate_rows(
    df: pd.DataFrame,
    source: str,
    rows: Sequence[int] | np.ndarray | None = None,
    field_names: Mapping[str, str] | None = None,
) -> tuple[pd.DataFrame, np.ndarray]:
    """:func:`validate` plus row bookkeeping for adapters.

    ``rows`` gives the 1-based source row of each frame row (default 1..n);
    ``field_names`` maps schema columns to the source's column names so that
    messages name the field as it is spelled in the file. Returns the frame
    and the source rows permuted like the (sorted) frame.
    """
    source = str(source)
    names = dict(field_names or {})
    fname = {c: names.get(c, c) for c in (*SCHEMA_COLUMNS, *OPTIONAL_COLUMNS)}
    require_columns(
        list(df.columns),
        list(SCHEMA_COLUMNS),
        source,
    )
    n = len(df)
    r = np.arange(1, n + 1) if rows is None else np.asarray(rows, dtype=np.int64)
    if len(r) != n:
        raise ValueError(f"rows has {len(r)} entries for a frame of {n} rows")

    out: dict[str, object] = {}
    ids = parse_text(df["job_id"], source=source, rows=r, field_name=fname["job_id"])
    dup = pd.Series(ids).duplicated(keep="first").to_numpy()
    if dup.any():
        first_pos = {}
        for i, j in enumerate(ids):
            first_pos.setdefault(j, i)
        raise_at(
            source,
            r,
            dup,
            fname["job_id"],
            lambda i: f"duplicate job id {ids[i]!r} (first seen at row {r[first_pos[ids[i]]]})",
        )
    out["job_id"] = ids
    out["arrival_s"] = parse_numeric(
        df["arrival_s"],
        source=source,
        rows=r,
        field_name=fname["arrival_s"],
        maximum=MAX_ARRIVAL_S,
        maximum_why="arrival times are seconds from the trace start",
    )
    out["gpus"] = parse_gpus(df["gpus"], source=source, rows=r, field_name=fname["gpus"]).astype(
        np.int64
    )
    models = parse_text(df["model"], source=source, rows=r, field_name=fname["model"])
    canon = set(canonical_model_names())
    raise_at(
        source,
        r,
        np.array([m not in canon for m in models], dtype=bool),
        fname["model"],
        lambda i: f"unknown model name {models[i]!r} (not in the model catalogue)",
    )
    out["model"] = models
    out["iterations"] = parse_numeric(
        df["iterations"], source=source, rows=r, field_name=fname["iterations"], positive=True
    )
    out["iter_time_s"] = parse_numeric(
        df["iter_time_s"],
        source=source,
        rows=r,
        field_name=fname["iter_time_s"],
        positive=True,
        maximum=MAX_ITER_TIME_S,
        maximum_why="seconds per single-GPU iteration",
    )
    work = out["iterations"] * out["iter_time_s"]
    raise_at(
        source,
        r,
        ~(work <= MAX_WORK_S),
        fname["iterations"],
        [
            f"{fname['iterations']} x {fname['iter_time_s']} = single-GPU work {w:.6g} s "
            f"too large (must be <= {MAX_WORK_S:.6g} s, 3,170 GPU-years)"
            for w in work
        ],
    )
    if "duration_s" in df.columns:
        out["duration_s"] = parse_numeric(
            df["duration_s"],
            source=source,
            rows=r,
            field_name=fname["duration_s"],
            allow_empty=True,
        )
    for col in ("user", "vc"):
        if col in df.columns:
            out[col] = parse_text(
                df[col], source=source, rows=r, field_name=fname[col], allow_empty=True
            )
    if "gpu_types" in df.columns:
        out["gpu_types"] = _gpu_types(df["gpu_types"], source, r, fname["gpu_types"])
    if "gpu_mem_gib" in df.columns:
        out["gpu_mem_gib"] = parse_numeric(
            df["gpu_mem_gib"],
            source=source,
            rows=r,
            field_name=fname["gpu_mem_gib"],
            positive=True,
            allow_empty=True,
        )
    if "layout" in df.columns:
        out["layout"] = _layouts(df["layout"], out["gpus"], source, r, fname["layout"])

    jobs = pd.DataFrame(out)
    for col in ("job_id", "model", "user", "vc", "gpu_types", "layout"):
        if col in jobs.columns:
            jobs[col] = jobs[col].astype(str)
    arrival = jobs["arrival_s"].to_numpy()
    back = np.flatnonzero(arrival[1:] < arrival[:-1]) + 1
    if back.size:
        order = np.argsort(arrival, kind="stable")
        warnings.warn(
            f"{where(source, int(r[back[0]]), fname['arrival_s'])}: arrivals not "
            f"sorted ({back.size} row(s) arrive before their predecessor); "
            "sorted by arrival time (stable)",
            TraceWarning,
            stacklevel=3,
        )
        jobs = jobs.iloc[order]
        r = r[order]
    return jobs.reset_index(drop=True), r


def _gpu_types(column: pd.Series, source: str, rows: np.ndarray, field_name: str) -> list[str]:
    """The ``gpu_types`` cells, each checked against the GPU-type catalogue
    and written in catalogue names, sorted and ``|``-joined ('' for any)."""
    from ddl_gym.gpu_types import gpu_type_set  # (data only)

    out: list[str] = []
    for i, cell in enumerate(column.tolist()):
        text = "" if cell is None or (isinstance(cell, float) and cell != cell) else str(cell)
        try:
            names = gpu_type_set(text)
        except KeyError as e:
            raise TraceError(f"{where(source, int(rows[i]), field_name)}: {e.args[0]}") from None
        out.append("|".join(sorted(names)))
    return out


def _layouts(
    column: pd.Series, gpus: np.ndarray, source: str, rows: np.ndarray, field_name: str
) -> list[str]:
    """The ``layout`` cells, each parsed (``ddl_gym.llm.parse_layout``, its
    GPUs the row's) and written in its canonical spelling ('' for none)."""
    from ddl_gym.llm.layout import parse_layout  # (no engine import)

    out: list[str] = []
    for i, cell in enumerate(column.tolist()):
        text = "" if cell is None or (isinstance(cell, float) and cell != cell) else str(cell)
        text = text.strip()
        if not text:
            out.append("")
            continue
        try:
            out.append(parse_layout(text, int(gpus[i])).spec())
        except ValueError as e:
            raise TraceError(f"{where(source, int(rows[i]), field_name)}: {e}") from None
    return out


def _empty_reason(dropped: Mapping[str, int] | None) -> str:
    if dropped:
        parts = ", ".join(f"{n} {k.replace('_', '-')}" for k, n in dropped.items())
        return f"no GPU job left to simulate (every row was skipped: {parts})"
    return "no job rows (only a header, or blank lines)"


def make_trace(
    name: str,
    df: pd.DataFrame,
    source: str | Path | None,
    rows: Sequence[int] | np.ndarray | None = None,
    field_names: Mapping[str, str] | None = None,
    dropped: Mapping[str, int] | None = None,
) -> Trace:
    """Validate ``df`` and wrap it as a :class:`Trace` (used by the adapters).

    A file that yields no job is an error ("workload is empty"): simulating
    it would only print NaN metrics. Frames without a source (generated
    traces) may be empty.
    """
    src = str(source) if source is not None else name
    if source is not None and len(df) == 0:
        raise TraceError(f"{src}: workload is empty: {_empty_reason(dropped)}")
    jobs, r = validate_rows(df, src, rows, field_names)
    return Trace(
        name=name,
        jobs=jobs,
        source=str(source) if source is not None else None,
        source_rows=r if source is not None else None,
        dropped=dict(dropped or {}),
    )
