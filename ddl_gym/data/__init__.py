"""The data the benchmarks and calibration read: where it comes from and
whether the copy here is the right one.

``manifest.json`` lists every data file by its path relative to the data dir
(the layout of ``traces/`` and ``profiles/``) with the SHA-256 and size of the
file as the project uses it.
"""

from __future__ import annotations

import hashlib
import json
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
