"""The data the benchmarks and calibration read: where it comes from and
whether the copy here is the right one.

``manifest.json`` lists every data file by its path relative to the data dir
(the layout of ``traces/`` and ``profiles/``) with the SHA-256 and size of the
file as the project uses it, and its provenance:

- ``origin``: ``{repo, commit, path}`` (a GitHub repository, the full commit
  SHA read, the file's path there; ``branch`` when the commit is not on the
  default branch), or None for a file derived by running code (then
  ``derived`` says how; such a file cannot be fetched);
- ``cut``: how the file is made from its origin (:mod:`ddl_gym.data.cuts`:
  ``copy``, a ``time_window`` of rows, rows ``below`` a limit, a ``tar_member``);
- ``licence`` and ``cite``.

``ddl-gym data fetch`` (:mod:`ddl_gym.data.fetch`) downloads the origins at
their pinned commits, applies the cuts and checks the checksums; see
``docs/data.md``. This module imports nothing heavy.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

MANIFEST_PATH = Path(__file__).with_name("manifest.json")


@lru_cache(maxsize=1)
def manifest() -> dict[str, dict[str, Any]]:
    """Every data file of the manifest: relative path -> its entry."""
    return json.loads(MANIFEST_PATH.read_text())["files"]


def expected_sha256(path: str) -> str | None:
    """The SHA-256 the manifest pins for ``path`` (relative to the data dir),
    or None for a file the manifest does not list."""
    entry = manifest().get(path)
    return None if entry is None else str(entry["sha256"])


def sha256_of(path: str | Path) -> str:
    """SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class Origin:
    """A file of a public GitHub repository at one commit."""

    repo: str  # "owner/name"
    commit: str  # the full 40-hex SHA
    path: str  # inside the repository
    branch: str | None = None  # where the commit lives, when not the default branch

    def sibling(self, path: str) -> Origin:
        """Another file of the same repository and commit."""
        return Origin(self.repo, self.commit, path, self.branch)

    def __str__(self) -> str:
        return f"{self.repo}@{self.commit[:8]}:{self.path}"


@dataclass(frozen=True)
class DataFile:
    """One manifest entry."""

    path: str  # relative to the data dir
    sha256: str
    bytes: int
    origin: Origin | None
    cut: dict[str, Any] | None
    licence: str
    cite: str
    derived: str | None = None  # how a file without origin was made

    @property
    def fetchable(self) -> bool:
        return self.origin is not None


def _data_file(path: str, entry: dict[str, Any]) -> DataFile:
    o = entry.get("origin")
    return DataFile(
        path=path,
        sha256=str(entry["sha256"]),
        bytes=int(entry["bytes"]),
        origin=None if o is None else Origin(o["repo"], o["commit"], o["path"], o.get("branch")),
        cut=entry.get("cut"),
        licence=str(entry.get("licence", "")),
        cite=str(entry.get("cite", "")),
        derived=entry.get("derived"),
    )


@lru_cache(maxsize=1)
def data_files() -> dict[str, DataFile]:
    """Every manifest entry as a :class:`DataFile`, by relative path."""
    return {p: _data_file(p, e) for p, e in manifest().items()}


def fetch_command(suite: str | None = None) -> str:
    """The command that fetches a suite's files (every fetchable file without a suite)."""
    return "ddl-gym data fetch" + (f" --suite {suite}" if suite else "")


def suite_files(suite: str) -> list[str]:
    """The data files a benchmark suite's cases read (their ``workload.source``
    other than ``"synthetic"``), sorted. Imports the benchmark registry."""
    from ddl_gym.benchmarks import get_suite

    s = get_suite(suite)
    sources = {c.workload.source for c in (*s.cases, *s.quick)}
    sources.discard("synthetic")
    return sorted(sources)


def needed_files(suite: str | None = None) -> list[str]:
    """The manifest paths ``suite`` needs (every file without a suite), sorted.
    Raises ValueError for a suite file the manifest does not list."""
    if suite is None:
        return sorted(data_files())
    paths = suite_files(suite)
    unknown = [p for p in paths if p not in data_files()]
    if unknown:
        raise ValueError(
            f"suite {suite!r} reads {', '.join(unknown)}, which ddl_gym/data/manifest.json "
            "does not list"
        )
    return paths


__all__ = [
    "MANIFEST_PATH",
    "DataFile",
    "Origin",
    "data_files",
    "expected_sha256",
    "fetch_command",
    "manifest",
    "needed_files",
    "sha256_of",
    "suite_files",
]
