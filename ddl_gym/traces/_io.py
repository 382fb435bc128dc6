"""Raw file reading that keeps true source row numbers.

Every family reads its file through here, so the same rules hold for all of
them: a UTF-8 byte-order mark is tolerated (spreadsheet exports write one),
a directory or unreadable path is a :class:`TraceError` that says so, and
JSON nested too deeply for the parser is an error, not a ``RecursionError``.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .schema import TraceError, row_note

# "utf-8-sig" reads plain UTF-8 too; it only drops a leading byte-order mark.
ENCODING = "utf-8-sig"


def check_readable(path: str | Path) -> Path:
    """``path`` as a Path if it is a readable file; else a one-line error.

    Missing files raise ``FileNotFoundError`` (callers and the CLI treat it
    as a user error); directories and unreadable files a :class:`TraceError`.
    """
    p = Path(path)
    try:
        is_dir, exists = p.is_dir(), p.exists()
    except PermissionError as exc:  # a folder on the way cannot be searched
        raise TraceError(f"{p}: cannot read (permission denied)") from exc
    if is_dir:
        raise TraceError(f"{p}: is a directory, not a trace file")
    if not exists:
        raise FileNotFoundError(f"{p}: no such trace file")
    try:
        with open(p, "rb") as fh:
            fh.read(1)
    except PermissionError as exc:
        raise TraceError(f"{p}: cannot read (permission denied)") from exc
    except OSError as exc:
        raise TraceError(f"{p}: cannot read: {exc.strerror or exc}") from exc
    return p


def read_csv_raw(path: str | Path) -> tuple[pd.DataFrame, np.ndarray]:
    """Read a CSV as strings, returning the frame and each row's 1-based number.

    Blank lines are dropped but still counted, so row numbers match what a
    spreadsheet shows (header excluded). Every cell stays a string so the
    parsers can tell "empty" from "not a number".
    """
    check_readable(path)
    try:
        df = pd.read_csv(
            path,
            dtype=str,
            keep_default_na=False,
            skip_blank_lines=False,
            encoding=ENCODING,
        )
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        # pandas counts file lines with the header as line 1; report data rows.
        m = re.search(r"line (\d+)", str(exc))
        at = f"row {int(m.group(1)) - 1} ({row_note(str(path))}), field '*': " if m else ""
        raise TraceError(f"{path}: {at}cannot parse as CSV: {str(exc).strip()}") from exc
    except pd.errors.EmptyDataError as exc:
        raise TraceError(f"{path}: empty file (no header row)") from exc
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    df.columns = [str(c).strip().lstrip("\ufeff") for c in df.columns]
    rows = np.arange(1, len(df) + 1)
    blank = (df.fillna("").map(lambda v: str(v).strip() == "")).all(axis=1).to_numpy()
    keep = ~blank
    return df.loc[keep].reset_index(drop=True), rows[keep]


def read_csv_header(path: str | Path) -> list[str]:
    """The header line of a CSV (empty list if unreadable)."""
    try:
        with open(path, newline="", encoding=ENCODING) as fh:
            first = next(csv.reader(fh), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        return []
    return [c.strip() for c in first]


def read_json(path: str | Path) -> Any:
    """Parse a JSON file (BOM tolerated); malformed or too-deep JSON is a TraceError."""
    check_readable(path)
    try:
        with open(path, encoding=ENCODING) as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{path}: invalid JSON: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}: not UTF-8 text: {exc}") from exc
    except RecursionError as exc:
        raise TraceError(f"{path}: invalid JSON: nested too deeply to be a job list") from exc
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def read_parquet_raw(path: str | Path) -> tuple[pd.DataFrame, np.ndarray]:
    """Read a Parquet file; rows are numbered 1..n in file order."""
    check_readable(path)
    try:
        df = pd.read_parquet(path)
    except ImportError as exc:
        raise TraceError(
            f"{path}: reading Parquet needs pyarrow (pip install 'ddl-gym[parquet]')"
        ) from exc
    except Exception as exc:  # pyarrow raises its own types for corrupt files
        raise TraceError(f"{path}: cannot read as Parquet: {exc}") from exc
    df = df.reset_index(drop=True)
    df.columns = [str(c).strip() for c in df.columns]
    return df, np.arange(1, len(df) + 1)


def parquet_columns(path: str | Path) -> list[str]:
    """Column names of a Parquet file (empty list if unreadable or no pyarrow)."""
    try:
        import pyarrow.parquet as pq

        return [str(c).strip() for c in pq.read_schema(path).names]
    except Exception:  # not Parquet, unreadable, or pyarrow missing
        return []
