"""Calibrate to your own cluster: ``ddl-gym calibrate --table FILE``, or to
a hardware description alone: ``ddl-gym calibrate --hardware TEXT``.

Reads a measured table in the documented format (:func:`read_own_table`:
every number checked against physical ranges, every placement against the
GPUs per server the hardware description states), fits a fabric to it
(:func:`~ddl_gym.fidelity.calibrate.fit_fabric`, the three forms, the better
kept), cross-validates over placements (4 folds: every placement predicted
by a fit that never saw it), reports the error per level beside predicting
no communication cost and the base preset, states what the form cannot
express (ratios below 1, single-server points that fall as GPUs are added)
with the rows, and the table's repeatability floor (its repeats), then saves
the fitted preset in the user data dir (:mod:`ddl_gym.userdata`), where
``fabric="<name>"`` finds it. Without a table, :func:`hardware_preset` saves
the prior for the described hardware
(:func:`ddl_gym.fidelity.hardware.preset_for`).

Writing is all or nothing: the report and the preset are written to
temporary files in their folders and moved into place (``os.replace``) only
once the table was read and fitted; an existing preset is kept unless
``force``. Nothing is written into the package.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ddl_gym import userdata
from ddl_gym.fidelity.calibrate import (
    FitResult,
    abs_rel_error,
    error_table,
    fit_fabric,
    placement_folds,
    predict_placement_cv,
    predict_ratio,
    repeat_spread,
    save_fitted,
)
from ddl_gym.fidelity.hardware import Hardware, describe, nearest_preset, preset_for
from ddl_gym.fidelity.measured import (
    TABLE_COLUMNS,
    TABLE_OPTIONAL,
    MeasuredTableError,
    Point,
    points_frame,
)
from ddl_gym.profiles import MODEL_NAMES
from ddl_gym.topology import FABRICS, SAVED_FABRICS_DIR, Algorithm, Fabric, save_fabric

DEFAULT_LOSS = "soft_l1"
# The base preset where the table's hardware description cannot be read.
DEFAULT_BASE = "pcie_25gbe"
# A point this far below its reference (or below a smaller placement of the
# same job on one server) is beyond what the form can express, noise aside.
BELOW_TOL = 0.02


_FORMAT_COLUMNS = (
    ("model", "a catalogue model (`ddl_gym.profiles.MODEL_NAMES`: resnet50, bert_base, ...)"),
    ("local_bsz", "per-GPU batch size, a whole number (1 to 2^20)"),
    (
        "placement",
        "GPUs per server, `+`-joined, 1 to 1,024 per server: `8+8` two servers of 8, `4` "
        "four GPUs on one server, `2+1`; `8,8` inside quotes also works. A published "
        "artifact's digit string (`18` for one GPU on one server and eight on another) is "
        "written `1+8`",
    ),
    (
        "t_iter",
        "seconds per training iteration (steady state), from 1 us to 1 day, and within 1/100 "
        "to 500 times its job's single-GPU time",
    ),
    (
        "repeat",
        "optional repeat id: rows that differ only in it are repeats (they give the "
        "repeatability floor)",
    ),
    (
        "hardware",
        "optional, one per table: GPU, intra-server link and network, e.g. `8x A100 SXM4, "
        "NVSwitch, 8x HDR InfiniBand`; it picks the base preset, and where it states the "
        "GPUs per server (`8x A100`, `DGX A100`, `servers of 8 GPUs`) no placement may put "
        "more in one server",
    ),
)

FORMAT_DOC = (
    """## Calibrate to your own cluster: `ddl-gym calibrate --table`

Measure your cluster's iteration times and write them as a CSV with a header
(UTF-8, with or without a byte order mark, as a spreadsheet's "CSV UTF-8"
saves it; `own_table.read_own_table`; other columns are ignored):

| column | meaning |
|---|---|
"""
    + "\n".join(f"| `{c}` | {m} |" for c, m in _FORMAT_COLUMNS)
    + """

Every (model, `local_bsz`) needs a single-GPU row (placement `1`), the
reference of that job's other rows. Example:

```
model,local_bsz,placement,t_iter,repeat,hardware
resnet50,64,1,0.181,1,"2x DGX A100: NVSwitch, 8x HDR InfiniBand"
resnet50,64,8,0.190,1,
resnet50,64,8+8,0.193,1,
resnet50,64,8+8,0.195,2,
```

`ddl-gym calibrate --table FILE [--name NAME] [--base PRESET] [--hardware TEXT] [--force]`
fits the three all-reduce forms (the better kept), cross-validates over
placements (4 folds), prints the error per level beside predicting no
communication cost and the base preset, lists the rows the form cannot
express (below 1; on one server, faster than fewer GPUs of the same job) and
the repeatability floor, and saves the preset as `<user data dir>/fabrics/NAME.json`
(`ddl_gym.userdata`: `platformdirs`' user data dir, or `$DDL_GYM_DATA_HOME`),
after which `fabric="NAME"` works in the env, `simulate()` and scenarios. The
report goes to `<user data dir>/calibration/NAME.md` (or `--out`); the command
prints both paths. `--hardware` replaces the table's hardware column; a
description the reader cannot take does not refuse the table (the fit needs
no prior): the base is then `pcie_25gbe` (or `--base`), and the report says so.

A table that cannot be read right is refused: one line naming the file, the
row (and its line in the file) and the field, exit status 2, nothing written.
Nothing is written until the whole command has succeeded (the report and the
preset each go to a temporary file in their folder, then `os.replace`), and
an existing preset of the same name is kept unless `--force`. Nothing is
written into the package. The bundled Gavel and Pollux tables become rows
through the same function (`measured.points_frame`) and can be written in
this format (`measured.write_table`).

`ddl-gym calibrate --hardware TEXT [--name NAME] [--force]`, without a table,
saves the prior's preset for that description
(`hardware.describe`, then `hardware.preset_for`; default name `prior_` and
the description's words) and prints what it read; a description it cannot
read is refused in one line saying what it understood.
"""
)


# -- reading a table: the documented format, checked ------------------------------

# Physical ranges of a table's numbers. Outside them a row is a typo or a unit
# mix-up, and is refused (naming the row) rather than fitted.
MIN_T_ITER = 1e-6  # s: no training iteration takes less than a microsecond
MAX_T_ITER = 86_400.0  # s: a day per iteration
MAX_LOCAL_BSZ = 1 << 20  # samples per GPU
MAX_GPUS_PER_SERVER = 1024
MAX_SERVERS = 65_536  # servers in one placement
MAX_TABLE_BYTES = 64 << 20  # a measured table is kilobytes; this is a wrong file
# A row's time over its job's single-GPU time. Every GPU does the same work as
# the single GPU, so a ratio far below 1 is not a measurement, and 500x is
# beyond a large model all-reduced over 1 GbE; a row in ms beside a 1-GPU row
# in s (or the reverse) lands outside by 1000x.
MIN_RATIO = 0.01
MAX_RATIO = 500.0
_T_RANGE = "s (a microsecond to a day per iteration)"
_BSZ_RANGE = "samples per GPU"

# What a spreadsheet saves when not asked for CSV: its own file, or UTF-16 text.
_NOT_CSV = (
    (b"PK\x03\x04", "a zip file (a spreadsheet's .xlsx or .ods?)"),
    (b"\xd0\xcf\x11\xe0", "an old Excel (.xls) file"),
    (b"\xff\xfe", "UTF-16 text"),
    (b"\xfe\xff", "UTF-16 text"),
)
_SEPARATORS = re.compile(r"[+,;\s]+")
_DIGITS = re.compile(r"[0-9]+")

# "8x A100", "4 NVIDIA T4 per node", "servers of up to 8 GPUs": a count
# followed (after vendor words) by a GPU model or "GPU(s)". A count before
# anything else ("2x DGX A100": servers; "8x HDR": network ports) is not one.
_GPU_WORD = (
    r"(?:gpus?|k80|p100|v100|t4|a10g?|a30|a40|a100|h100|h200|b200|l4|l40s?"
    r"|rtx\s*[a-z]?\d{3,4}\w*|gtx\s*\d{3,4}\w*|titan\w*|mi\d{2,3}\w*|\d{4}\s*ti)"
)
_VENDOR_WORDS = r"(?:(?:nvidia|tesla|geforce|quadro|amd|instinct|radeon)\s+)*"
_GPU_COUNT = re.compile(rf"\b(\d{{1,4}})\s*(?:x|\*|×)?\s*{_VENDOR_WORDS}{_GPU_WORD}\b")
# Servers sold whole: NVIDIA DGX datasheets (DGX-1: 8 V100; DGX-2: 16 V100;
# DGX A100 / H100 / H200 / B200: 8; DGX Station: 4).
_DGX = (
    (re.compile(r"\bdgx[\s-]*2\b"), 16),
    (re.compile(r"\bdgx[\s-]*station\b"), 4),
    (re.compile(r"\bdgx[\s-]*(?:1|a100|h100|h200|b200)\b"), 8),
)


def gpus_per_server(text: str) -> int | None:
    """GPUs per server a hardware description states (``"8x A100, NVSwitch,
    8x HDR InfiniBand"``: 8; ``"2x DGX A100"``: 8; ``"servers of up to 8
    GPUs"``: 8), or ``None`` where it states none.

    :func:`~ddl_gym.fidelity.hardware.describe`'s count where it reads the
    text and gives one; else the counts found in the text, the largest where
    it states several (a placement is refused only on a count the text makes
    certain), so that a description the reader refuses (a table's column
    need not be readable) still bounds the placements."""
    try:
        stated = describe(text).gpus_per_server
    except ValueError:  # hardware.UnreadableHardware
        stated = None
    if stated is not None and stated > 0:
        return stated
    t = text.lower()
    counts = [int(m[1]) for m in _GPU_COUNT.finditer(t) if int(m[1]) > 0]
    counts += [n for pat, n in _DGX if pat.search(t)]
    return max(counts) if counts else None


@dataclass(frozen=True)
class OwnTable:
    """A measured table read by :func:`read_own_table`."""

    rows: pd.DataFrame  # measured.COLUMNS, plus "repeat"
    hardware: str  # the description in force: the override if given, else the column's
    column_hardware: str  # the table's own hardware column ("" if none)
    gpus_per_server: int | None  # what the description states (None: not stated, not checked)


def _quote(text: str, limit: int = 40) -> str:
    """``repr`` of a cell, cut short: an error line stays one readable line."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _read_text(path: Path) -> str:
    """The file's text: UTF-8, with or without a byte order mark (Excel's "CSV
    UTF-8" writes one)."""
    if path.is_dir():
        raise MeasuredTableError(path, "is a directory, not a CSV file")
    if not path.exists():
        raise MeasuredTableError(path, "file not found")
    try:
        if path.stat().st_size > MAX_TABLE_BYTES:
            raise MeasuredTableError(
                path, f"larger than {MAX_TABLE_BYTES >> 20} MB: not a measured table"
            )
        data = path.read_bytes()
    except OSError as err:
        raise MeasuredTableError(path, f"cannot read: {err.strerror or err}") from None
    for magic, what in _NOT_CSV:
        if data.startswith(magic):
            raise MeasuredTableError(path, f"{what}, not CSV text; save it as 'CSV UTF-8'")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise MeasuredTableError(
            path,
            f"line {line}: byte 0x{data[err.start]:02x} is not UTF-8 text; save the table "
            "as UTF-8 (e.g. a spreadsheet's 'CSV UTF-8')",
        ) from None


def _records(path: Path, text: str) -> list[tuple[str, dict[str, str]]]:
    """Data rows as ``(where, {column: text})``, ``where`` = ``"3 (line 4)"``:
    the third data row, on line 4 of the file (the header is line 1)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        first = next(reader, None)
    except csv.Error as err:
        raise MeasuredTableError(path, f"line 1: not a CSV header ({err})") from None
    if first is None:
        raise MeasuredTableError(path, "empty file: no header")
    header = [c.strip() for c in first]
    missing = [c for c in TABLE_COLUMNS if c not in header]
    if missing and len(header) == 1:
        for sep, name in (("\t", "tabs"), (";", "';'")):
            if sep in header[0]:
                raise MeasuredTableError(
                    path, f"columns separated by {name}, not ','; save the table as CSV"
                )
    if missing:
        raise MeasuredTableError(
            path, f"missing column(s) {', '.join(missing)}; header is {header}"
        )
    twice = [c for c in TABLE_COLUMNS + TABLE_OPTIONAL if header.count(c) > 1]
    if twice:
        raise MeasuredTableError(path, f"column(s) {', '.join(twice)} appear twice in the header")
    rows: list[tuple[str, dict[str, str]]] = []
    i = 0
    while True:
        line = reader.line_num + 1
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as err:
            raise MeasuredTableError(path, f"line {line}: not a CSV row ({err})") from None
        if not record:
            continue  # an empty line
        i += 1
        cells = {h: record[k].strip() for k, h in enumerate(header) if k < len(record)}
        if not any(cells.values()):
            continue  # a row of empty cells
        where = f"{i} (line {line})"
        for col in TABLE_COLUMNS:
            if cells.get(col, "") == "":
                raise MeasuredTableError(path, "empty value", where, col)
        rows.append((where, cells))
    if not rows:
        raise MeasuredTableError(path, "no data rows")
    return rows


def _bounded(
    path: Path, where: str, field: str, text: str, low: float, high: float, unit: str
) -> float:
    """A number in ``[low, high]`` (the field's physical range)."""
    try:
        value = float(text)
    except (ValueError, OverflowError):
        raise MeasuredTableError(path, f"not a number: {_quote(text)}", where, field) from None
    if not math.isfinite(value):
        raise MeasuredTableError(path, f"not a finite number: {_quote(text)}", where, field)
    if value <= 0:
        raise MeasuredTableError(path, f"must be > 0, got {_quote(text)}", where, field)
    if not low <= value <= high:
        raise MeasuredTableError(
            path, f"{_quote(text)} is outside {low:g}..{high:,g} {unit}".rstrip(), where, field
        )
    return value


def _placement(path: Path, where: str, text: str, per_server: int | None) -> tuple[int, ...]:
    """GPUs per server, largest first, checked against ``per_server``."""

    def refuse(message: str) -> MeasuredTableError:
        return MeasuredTableError(path, f"{_quote(text)}: {message}", where, "placement")

    parts = [p for p in _SEPARATORS.split(text) if p]
    if not parts:
        raise refuse("empty placement")
    if len(parts) > MAX_SERVERS:
        raise refuse(f"{len(parts):,} servers, more than {MAX_SERVERS:,}")
    if not all(_DIGITS.fullmatch(p) for p in parts):
        raise refuse("GPUs per server as whole numbers joined by '+' (e.g. 8+8)")
    # by length first: int() of thousands of digits is refused or slow
    if any(len(p.lstrip("0")) > 4 or int(p) > MAX_GPUS_PER_SERVER for p in parts):
        raise refuse(
            f"more than {MAX_GPUS_PER_SERVER:,} GPUs in one server; GPUs per server "
            "are joined by '+' (e.g. 8+8)"
        )
    servers = tuple(sorted((int(p) for p in parts), reverse=True))
    if servers[-1] < 1:
        raise refuse("every server holds at least one GPU")
    if per_server is not None and servers[0] > per_server:
        digits = parts[0]
        if len(parts) == 1 and all("1" <= d <= str(min(per_server, 9)) for d in digits):
            # a published artifact's placement string (Pollux: "18" = 1 + 8)
            raise refuse(
                f"one server of {servers[0]} GPUs, but the hardware has {per_server} per "
                f"server; if each digit is a server (as in published artifacts' placement "
                f"strings), write {'+'.join(digits)}"
            )
        raise refuse(
            f"{servers[0]} GPUs in one server, but the hardware has {per_server} per server "
            f"(GPUs per server are joined by '+', e.g. {per_server}+{per_server})"
        )
    return servers


def read_own_table(
    path: str | Path, cluster: str | None = None, hardware: str | None = None
) -> OwnTable:
    """A measured table in the documented format (``FORMAT_DOC``), checked.

    The columns are those of :func:`ddl_gym.fidelity.measured.read_table`.
    On top of it: a UTF-8 byte order mark is accepted; ``t_iter`` must lie
    in 1 us..1 day, ``local_bsz`` be a whole number in 1..2**20 and a
    placement hold 1..1,024 GPUs per server; where the hardware description
    (``hardware`` if given, else the table's column) states the GPUs per
    server (:func:`gpus_per_server`), no placement may put more in one
    server: a published artifact's digit string (``18`` for 1 + 8) is
    refused, with how to write it. Every refusal is one
    :class:`~ddl_gym.fidelity.measured.MeasuredTableError` naming the file,
    row (and line) and field.
    """
    path = Path(path)
    rows = _records(path, _read_text(path))
    described: dict[str, str] = {}  # description -> first row stating it
    for where, cells in rows:
        if cells.get("hardware"):
            described.setdefault(cells["hardware"], where)
    if len(described) > 1:
        (a, wa), (b, wb) = list(described.items())[:2]
        raise MeasuredTableError(
            path,
            f"one hardware description per table, got {_quote(a)} (row {wa}) and "
            f"{_quote(b)} (row {wb})",
            None,
            "hardware",
        )
    column = next(iter(described), "")
    text = hardware if hardware is not None else column
    per_server = gpus_per_server(text) if text else None
    points = []
    for where, cells in rows:
        model = cells["model"]
        if model not in MODEL_NAMES:
            raise MeasuredTableError(
                path,
                f"unknown model {_quote(model)}; known: {', '.join(MODEL_NAMES)}",
                where,
                "model",
            )
        bsz = _bounded(
            path, where, "local_bsz", cells["local_bsz"], 1, MAX_LOCAL_BSZ, "samples per GPU"
        )
        if bsz != int(bsz):
            raise MeasuredTableError(
                path, f"not a whole number: {_quote(cells['local_bsz'])}", where, "local_bsz"
            )
        placement = _placement(path, where, cells["placement"], per_server)
        t_iter = _bounded(path, where, "t_iter", cells["t_iter"], MIN_T_ITER, MAX_T_ITER, _T_RANGE)
        job = f"{model} bsz={bsz:g}"
        points.append(Point(model, job, bsz, placement, t_iter, where, cells.get("repeat", "")))
    df = points_frame(path, "table", cluster or path.stem, points)
    if df["is_reference"].all():
        raise MeasuredTableError(
            path, "only single-GPU rows (placement 1): nothing to fit; add rows on several GPUs"
        )
    for pt, ratio, t_c in zip(points, df["ratio"], df["t_compute"], strict=True):
        if not MIN_RATIO <= ratio <= MAX_RATIO:
            raise MeasuredTableError(
                path,
                f"{pt.t_iter:g} s is {ratio:.3g} times the job's single-GPU time ({t_c:g} s): "
                "no data-parallel run is; seconds and milliseconds mixed?",
                pt.where,
                "t_iter",
            )
    df["repeat"] = [pt.repeat for pt in points]
    return OwnTable(df, text, column, per_server)


@dataclass(frozen=True)
class TableReport:
    """What ``calibrate --table`` found, and where it went."""

    name: str
    rows: pd.DataFrame
    hardware: str
    base: str
    fit: FitResult
    errors: pd.DataFrame  # per evaluation and level
    below_one: pd.DataFrame  # rows measured faster than their reference
    non_monotone: pd.DataFrame  # single-server rows faster than fewer GPUs of the job
    repeats: pd.DataFrame  # the repeatability floor
    saved: Path | None
    markdown: str
    report: Path | None = None  # where the markdown was written (None: nowhere)
    gpus_per_server: int | None = None  # stated by the hardware description


class PresetExists(ValueError):
    """A user preset of that name exists and ``force`` was not given."""


def check_name(name: str) -> None:
    """A user preset may not shadow a built-in or shipped one (those are
    looked up first, so it could never be used by name)."""
    userdata.user_fabric_path(name)  # rejects paths
    if name in FABRICS or (SAVED_FABRICS_DIR / f"{name}.json").is_file():
        raise ValueError(f"preset name {name!r} is taken by a built-in preset; choose another")


def preset_target(name: str, force: bool = False) -> Path:
    """Where user preset ``name`` will be saved, checked before any work:
    a valid name, not a built-in's, a folder that can hold it, and no
    existing preset unless ``force`` (:class:`PresetExists`)."""
    check_name(name)
    path = userdata.user_fabric_path(name)
    check_folder(path.parent)
    if path.is_dir():
        raise ValueError(f"{path} is a directory, not a preset file")
    if path.exists() and not force:
        raise PresetExists(
            f"preset {name!r} exists ({path}); pass --force to replace it, or --name to "
            "save under another name"
        )
    return path


def check_folder(folder: Path) -> None:
    """Refuse a folder that cannot be made: a file where it or a parent should be."""
    for p in (folder, *folder.parents):
        if p.exists():
            if not p.is_dir():
                raise ValueError(f"{folder}: cannot be a folder, {p} is a file")
            return


def choose_base(hardware: str, base: str | None) -> str:
    """``base`` if given, else the datasheet preset nearest the hardware.

    Raises ``ValueError`` on an unknown ``base`` or a description
    :func:`~ddl_gym.fidelity.hardware.describe` cannot read."""
    if base is not None:
        if base not in FABRICS:
            raise ValueError(f"unknown base preset {base!r}; known: {', '.join(FABRICS)}")
        return base
    return nearest_preset(describe(hardware))


def below_one(df: pd.DataFrame, tol: float = BELOW_TOL) -> pd.DataFrame:
    """Rows measured faster than their reference: every form predicts >= 1."""
    d = df[~df["is_reference"].to_numpy() & (df["ratio"].to_numpy() < 1 - tol)]
    return d[["job", "placement", "t_iter", "t_compute", "ratio"]].reset_index(drop=True)


def non_monotone(df: pd.DataFrame, tol: float = BELOW_TOL) -> pd.DataFrame:
    """Single-server rows whose ratio is below that of fewer GPUs of the same
    job by more than ``tol``: on one server every form's slowdown does not
    fall as GPUs are added."""
    d = df[(df["s"].to_numpy() == 1) & ~df["is_reference"].to_numpy()]
    out = []
    for _, job in d.groupby("job", sort=True):
        job = job.sort_values("n")
        best = job.groupby("n")["ratio"].median()
        for _, row in job.iterrows():
            fewer = best[best.index < row["n"]]
            if len(fewer) and row["ratio"] < fewer.max() * (1 - tol):
                out.append(
                    {
                        "job": row["job"],
                        "placement": row["placement"],
                        "ratio": row["ratio"],
                        "fewer GPUs' ratio": float(fewer.max()),
                    }
                )
    return pd.DataFrame(out, columns=["job", "placement", "ratio", "fewer GPUs' ratio"])


def _level_errors(df: pd.DataFrame, err: np.ndarray, label: str) -> pd.DataFrame:
    ok = ~np.isnan(err)
    t = error_table(df[ok], err[ok], by=("level",))
    t.insert(0, "evaluation", label)
    return t


def _md(df: pd.DataFrame, pct: tuple[str, ...] = ()) -> str:
    if df.empty:
        return "_none_"
    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    for _, row in df.iterrows():
        cells = []
        for c in df.columns:
            v = row[c]
            if isinstance(v, tuple):
                cells.append("+".join(map(str, v)))
            elif isinstance(v, float):
                cells.append(f"{v:.1%}" if c in pct else f"{v:.4g}")
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def calibrate_table(
    path: str | Path,
    name: str | None = None,
    base: str | None = None,
    save: bool = True,
    hardware: str | None = None,
    loss: str = DEFAULT_LOSS,
    seed: int = 0,
    force: bool = False,
    report_dir: str | Path | None = None,
) -> TableReport:
    """Read (:func:`read_own_table`), fit, cross-validate and report one
    measured table; ``save``: save the preset as user preset ``name``
    (default: the file's name without suffix), replacing one of that name
    only if ``force``; ``report_dir``: write the report there as ``name.md``.

    Everything is checked (name, folders, table) before anything is written,
    and the writes happen together at the end, each whole or not at all: a
    refused table or preset name writes nothing.
    """
    path = Path(path)
    name = name or path.stem
    target = preset_target(name, force) if save else None
    report = None
    if report_dir is not None:
        check_folder(Path(report_dir))
        report = Path(report_dir) / f"{name}.md"
    table = read_own_table(path, cluster=name, hardware=hardware)
    df, hw = table.rows, table.hardware
    base_name, unread = _base_for(table, base)
    fit = fit_fabric(df, base_name, name=name, loss=loss)
    folds = placement_folds(df, k=4, seed=seed)
    form: dict[str, Algorithm] = {name: fit.fabric.algorithm}
    pred_cv = predict_placement_cv(df, folds, base_name, loss=loss, algorithms=form)
    errors = pd.concat(
        [
            _level_errors(df, abs_rel_error(df, pred_cv), "fitted, held-out placements (4-fold)"),
            _level_errors(
                df, abs_rel_error(df, predict_ratio(df, fit.fabric)), "fitted, in-sample"
            ),
            _level_errors(df, abs_rel_error(df, np.ones(len(df))), "predict 1 (no comm cost)"),
            _level_errors(
                df, abs_rel_error(df, predict_ratio(df, FABRICS[base_name])), f"preset {base_name}"
            ),
        ],
        ignore_index=True,
    )
    below, nonmono = below_one(df), non_monotone(df)
    repeats = repeat_spread(df)
    hw_line = _hardware_line(hw, table.gpus_per_server, unread)
    text = _markdown(
        path, name, hw_line, base_name, fit, errors, below, nonmono, repeats, target, df
    )
    desc = f"fitted by ddl-gym calibrate --table to {path.name} ({fit.points} points)"
    if hw:
        desc += f"; hardware: {hw}"
    saved = _write_outputs(fit, name, target, desc, report, text)
    return TableReport(
        name,
        df,
        hw,
        base_name,
        fit,
        errors,
        below,
        nonmono,
        repeats,
        saved,
        text,
        report,
        table.gpus_per_server,
    )


def _base_for(table: OwnTable, base: str | None) -> tuple[str, str]:
    """The base preset, and why the description was not read ("" if it was).

    A description that cannot be read does not refuse the table (the fit
    needs no prior); the base is then the default and the report says so.
    An unknown ``--base`` is an error."""
    if base is not None:
        return choose_base(table.hardware, base), ""
    if not table.hardware:
        return DEFAULT_BASE, ""
    try:
        hw = describe(table.hardware)
    except ValueError as err:  # hardware.UnreadableHardware
        return DEFAULT_BASE, str(err)
    if not _understood(hw):
        return DEFAULT_BASE, "no GPU, intra-server link or network recognised"
    return nearest_preset(hw), ""


def _understood(hw: Hardware) -> bool:
    return hw.gpu is not None or hw.intra is not None or hw.network is not None


def _hardware_line(hw: str, per_server: int | None, unread: str) -> str:
    if not hw:
        return "(not stated; placements not checked against the GPUs per server)"
    line = hw
    if per_server is not None:
        line += f" ({per_server} GPUs per server: every placement checked against it)"
    else:
        line += " (GPUs per server not stated: placements not checked against them)"
    if unread:
        line += f" (not understood: {unread}; base {DEFAULT_BASE}, choose one with --base)"
    return line


def _stage(path: Path, text: str) -> Path:
    """``text`` in a hidden temporary file beside ``path``, to be moved in place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    return tmp


def _write_outputs(
    fit: FitResult,
    name: str,
    target: Path | None,
    description: str,
    report: Path | None,
    text: str,
) -> Path | None:
    """Write the report and the preset, both or neither (as far as a file
    system allows: the report is staged first, the preset written whole, then
    the report moved in place)."""
    staged = _stage(report, text) if report is not None else None
    try:
        saved = None
        if target is not None:
            # force was settled by preset_target; a preset that appeared since is replaced
            saved = save_fitted(fit, name, target.parent, description=description)
        if staged is not None and report is not None:
            os.replace(staged, report)
    finally:
        if staged is not None:
            with contextlib.suppress(FileNotFoundError):
                staged.unlink()
    return saved


# -- a hardware description alone: the prior's preset -----------------------------


@dataclass(frozen=True)
class HardwarePreset:
    """What ``calibrate --hardware TEXT`` (no table) read and saved."""

    name: str
    hardware: Hardware
    fabric: Fabric
    saved: Path | None


def prior_name(text: str) -> str:
    """Default preset name of a description: ``prior_`` and its words."""
    slug = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:48].rstrip("_")
    return f"prior_{slug}" if slug else "prior"


def hardware_preset(
    text: str, name: str | None = None, save: bool = True, force: bool = False
) -> HardwarePreset:
    """The prior's preset for a hardware description (no table): read by
    :func:`~ddl_gym.fidelity.hardware.describe`, made by
    :func:`~ddl_gym.fidelity.hardware.preset_for`, saved (``save``) as user
    preset ``name`` (default :func:`prior_name`), replacing one only if
    ``force``. Raises ``ValueError`` on a description that states no GPU,
    intra-server link or network."""
    name = name or prior_name(text)
    target = preset_target(name, force) if save else None
    hw = describe(text)  # hardware.UnreadableHardware (a ValueError) where it cannot
    if not _understood(hw):
        raise ValueError(
            f"hardware {_quote(text)}: no GPU, intra-server link or network recognised "
            "(e.g. '8x A100 SXM4, NVSwitch, 8x HDR InfiniBand')"
        )
    prior = preset_for(hw)
    fabric = replace(
        prior,
        name=name,
        description=f"ddl-gym calibrate --hardware {text!r}: {prior.description}".rstrip(": "),
    )
    saved = None
    if target is not None:
        tmp = _stage(target, "")
        try:
            save_fabric(fabric, tmp)
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        saved = target
    return HardwarePreset(name, hw, fabric, saved)


def fabric_line(f: Fabric) -> str:
    """One line of a fabric's parameters, for reports and the CLI."""
    return (
        f"form `{f.algorithm}`; GPU link {f.gpu_link.bandwidth / 1e9:.3g} GB/s, "
        f"{f.gpu_link.latency * 1e6:.3g} us; NIC {f.nic.bandwidth / 1e9:.3g} GB/s, "
        f"{f.nic.latency * 1e6:.3g} us; overlap {f.overlap:.2f}; sharing h {f.gpu_link_sharing:.2f}"
        f", x {f.nic_sharing:.2f}; multipliers "
        + (", ".join(f"{m} {v:.3g}" for m, v in f.comm_scale) or "none")
    )


def _markdown(
    path: Path,
    name: str,
    hw: str,
    base: str,
    fit: FitResult,
    errors: pd.DataFrame,
    below: pd.DataFrame,
    nonmono: pd.DataFrame,
    repeats: pd.DataFrame,
    saved: Path | None,
    df: pd.DataFrame,
) -> str:
    informative = df[~df["is_reference"]]
    levels = informative.groupby("level").size().to_dict()
    floor = (
        f"median {repeats['median'].iloc[0]:.1%}, p90 {repeats['p90'].iloc[0]:.1%} over "
        f"{int(repeats['pairs'].iloc[0])} ordered pairs of rows that repeat a job and placement"
        if not repeats.empty
        else "unknown: the table repeats no (job, placement); add rows with a `repeat` id"
    )
    lines = [
        f"# Calibration of `{name}` to `{path.name}`",
        "",
        f"Hardware: {hw or '(not stated)'}. Base preset: `{base}`. Points: "
        + ", ".join(f"{n} {lv}" for lv, n in sorted(levels.items()))
        + f" (and {int(df['is_reference'].sum())} single-GPU references).",
        "",
        "Error = |predicted / measured - 1| of the iteration time over the 1-GPU time "
        "of the same job (model and per-GPU batch); `machine` = one server, "
        "`multi-node` = several servers.",
        "",
        _md(errors, pct=("median", "p90", "max")),
        "",
        f"Fitted: {fabric_line(fit.fabric)}; rms log error {fit.rms_log_error:.3f}.",
        "",
        f"Repeatability floor: {floor}. A median error below it is not to be expected.",
        "",
        f"## What the form cannot express ({len(below)} + {len(nonmono)} rows)",
        "",
        f"Rows measured more than {BELOW_TOL:.0%} faster than one GPU of the same job "
        "(every form predicts at least 1):",
        "",
        _md(below, pct=()),
        "",
        f"Rows on one server more than {BELOW_TOL:.0%} faster than fewer GPUs of the same job "
        "(every form's slowdown on one server does not fall as GPUs are added):",
        "",
        _md(nonmono, pct=()),
        "",
    ]
    if saved is not None:
        lines += [f'Saved as `{saved}`: use it as `fabric="{name}"`.', ""]
    return "\n".join(lines)
