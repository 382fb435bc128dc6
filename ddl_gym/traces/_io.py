"""Raw file reading that keeps true source row numbers."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pandas as pd

from .schema import TraceError, row_note


def read_csv_raw(path: str | Path) -> tuple[pd.DataFrame, np.ndarray]:
    """Read a CSV as strings, returning the frame and each row's 1-based number.

    Blank lines are dropped but still counted, so row numbers match what a
    spreadsheet shows (header excluded). Every cell stays a string so the
    parsers can tell "empty" from "not a number".
    """
    try:
        df = pd.read_csv(
            path,
            dtype=str,
            keep_default_na=False,
            skip_blank_lines=False,
        )
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        # pandas counts file lines with the header as line 1; report data rows.
        m = re.search(r"line (\d+)", str(exc))
        at = f"row {int(m.group(1)) - 1} ({row_note(str(path))}), field '*': " if m else ""
        raise TraceError(f"{path}: {at}cannot parse as CSV: {str(exc).strip()}") from exc
    except pd.errors.EmptyDataError as exc:
        raise TraceError(f"{path}: empty file (no header row)") from exc
    df.columns = [str(c).strip() for c in df.columns]
    rows = np.arange(1, len(df) + 1)
    blank = (df.fillna("").map(lambda v: str(v).strip() == "")).all(axis=1).to_numpy()
    keep = ~blank
    return df.loc[keep].reset_index(drop=True), rows[keep]


def read_csv_header(path: str | Path) -> list[str]:
    """The header line of a CSV (empty list if unreadable)."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            first = next(csv.reader(fh), [])
    except (OSError, UnicodeDecodeError):
        return []
    return [c.strip() for c in first]
