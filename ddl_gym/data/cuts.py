"""The cuts that make a data file from its origin file(s), byte for byte.

A cut is a manifest entry's ``cut``: a name and its parameters (plain JSON).

- ``{"name": "copy"}``: the origin file as it is.
- ``{"name": "time_window", "column": C, "start": S, "end": E, "sort": true}``:
  a CSV's header line, then the rows whose ``C`` (a ``YYYY-MM-DD HH:MM:SS``
  time) is in ``[S, E)``; with ``sort`` they are stably sorted by ``C`` (ties
  keep the origin's order). The five Philly weeks are cut this way from
  adaptdl's ``philly.csv``.
- ``{"name": "below", "column": C, "limit": L}``: the header line, then the
  rows whose numeric ``C`` is below ``L``, in the origin's order (the Alibaba
  2023 pods created before ``L`` seconds).
- ``{"name": "tar_member", "member": M, "header": H}``: the bytes of file
  ``H`` (another file of the same repository and commit: the header line)
  followed by member ``M`` of the origin ``.tar.gz`` (the PAI 2020 tables ship
  headerless inside archives).

Rows are kept as the origin's raw lines (only the selected field is parsed),
so a cut file differs from its origin only by the rows left out or moved.
Output lines end with ``\\n``. A malformed row is an error naming the origin
file, the line and the field.
"""

from __future__ import annotations

import csv
import io
import tarfile
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

CUT_NAMES = ("copy", "time_window", "below", "tar_member")


class CutError(ValueError):
    """An origin file the cut cannot read, or a cut the code does not know."""


def extra_inputs(cut: Mapping[str, Any] | None) -> list[str]:
    """Paths of other files of the origin's repository and commit that ``cut``
    reads besides the origin file (``tar_member``'s header)."""
    if cut is not None and cut.get("name") == "tar_member":
        return [str(cut["header"])]
    return []


def apply_cut(
    cut: Mapping[str, Any] | None,
    origin: bytes,
    extras: Mapping[str, bytes] | None = None,
    *,
    where: str = "origin",
) -> bytes:
    """The data file that ``cut`` makes from the ``origin`` file's bytes.

    ``extras``: the bytes of :func:`extra_inputs`, by path. ``where`` names the
    origin in error messages."""
    name = "copy" if cut is None else cut.get("name")
    extras = extras or {}
    if name == "copy":
        return origin
    if name == "time_window":
        assert cut is not None
        start, end = _time(cut["start"], where, "start"), _time(cut["end"], where, "end")
        return _filter_rows(
            origin,
            str(cut["column"]),
            lambda text, at: start <= _time(text, where, at) < end,
            where,
            sort_key=(lambda text, at: _time(text, where, at)) if cut.get("sort") else None,
        )
    if name == "below":
        assert cut is not None
        limit = float(cut["limit"])
        return _filter_rows(
            origin, str(cut["column"]), lambda text, at: _number(text, where, at) < limit, where
        )
    if name == "tar_member":
        assert cut is not None
        header_path = str(cut["header"])
        if header_path not in extras:
            raise CutError(f"{where}: tar_member cut needs {header_path!r}, which was not given")
        return extras[header_path] + _tar_member(origin, str(cut["member"]), where)
    raise CutError(f"{where}: unknown cut {name!r} (known: {', '.join(CUT_NAMES)})")


def _time(text: Any, where: str, at: str) -> datetime:
    text = str(text)
    try:
        if len(text) != 19:  # fromisoformat (fast) takes other forms too: only this one
            raise ValueError(text)
        return datetime.fromisoformat(text)
    except ValueError:
        raise CutError(f"{where}: {at}: {text!r} is not a YYYY-MM-DD HH:MM:SS time") from None


def _number(text: str, where: str, at: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise CutError(f"{where}: {at}: {text!r} is not a number") from None


def _filter_rows(
    data: bytes,
    column: str,
    keep: Callable[[str, str], bool],
    where: str,
    sort_key: Callable[[str, str], Any] | None = None,
) -> bytes:
    """The header line and the raw row lines whose ``column`` passes ``keep``
    (called with the field's text and a ``line N, column C`` location)."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if not lines:
        raise CutError(f"{where}: empty file, no header line")
    header = _fields(lines[0], where, 1)
    if column not in header:
        raise CutError(f"{where}: no column {column!r} in the header ({', '.join(header)})")
    col = header.index(column)
    kept: list[tuple[Any, bytes]] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = _fields(line, where, number)
        if len(fields) != len(header):
            raise CutError(
                f"{where}: line {number}: {len(fields)} fields, the header has {len(header)}"
            )
        at = f"line {number}, column {column}"
        if keep(fields[col], at):
            kept.append((sort_key(fields[col], at) if sort_key else None, line))
    if sort_key is not None:
        kept.sort(key=lambda pair: pair[0])  # stable: ties keep the origin's order
    return b"".join(line + b"\n" for line in [lines[0], *(line for _, line in kept)])


def _fields(line: bytes, where: str, number: int) -> list[str]:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CutError(f"{where}: line {number}: not UTF-8 ({err.reason})") from None
    text = text.rstrip("\r")
    if '"' not in text:  # the common case, much faster than the csv module
        return text.split(",")
    return next(csv.reader([text]), [])


def _tar_member(data: bytes, member: str, where: str) -> bytes:
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            try:
                info = tar.getmember(member)
            except KeyError:
                names = ", ".join(tar.getnames()[:10])
                raise CutError(f"{where}: archive has no member {member!r} ({names})") from None
            fh = tar.extractfile(info)
            if fh is None:
                raise CutError(f"{where}: archive member {member!r} is not a regular file")
            return fh.read()
    except (tarfile.TarError, EOFError, OSError) as err:
        raise CutError(f"{where}: not a readable tar archive ({err})") from None
