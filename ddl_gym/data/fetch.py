"""Fetch the data files from their origins and check them (``ddl-gym data fetch``).

Each data file of the manifest (:mod:`ddl_gym.data`) with an origin is
downloaded from ``{base}/{repo}/{commit}/{path}`` (``base`` is
``https://raw.githubusercontent.com``, or a mirror with the same layout below
it: ``--mirror URL`` or ``$DDL_GYM_DATA_MIRROR``; a local folder works too),
cut (:mod:`ddl_gym.data.cuts`) and stored under the data dir only if its
SHA-256 is the manifest's. Several files cut from one origin file (the five
Philly weeks) download it once.

Downloads go to ``<data dir>/.fetch/<repo>/<commit>/<path>.part`` and resume
with an HTTP Range request after a dropped connection, in the same run (a few
attempts) or the next one; the origin copies are removed once their files are
made. A file whose checksum is wrong is refused and not kept. Only the
standard library is used (urllib).
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ddl_gym.data import DataFile, Origin, data_files, sha256_of
from ddl_gym.data.cuts import CutError, apply_cut, extra_inputs

DEFAULT_BASE = "https://raw.githubusercontent.com"
MIRROR_ENV_VAR = "DDL_GYM_DATA_MIRROR"
FETCH_DIR = ".fetch"  # under the data dir: partial and whole origin downloads
CHUNK = 1 << 16


class FetchError(Exception):
    """One data file could not be made (the message names why)."""


class OriginMissing(FetchError):
    """The origin answered 404: no such repository, commit or path."""


def default_data_dir() -> Path:
    """Where ``ddl-gym data fetch`` stores files: ``<user data dir>/data``."""
    from ddl_gym.userdata import data_home

    return data_home() / "data"


def base_url(mirror: str | None = None) -> str:
    """The download base: ``mirror``, else ``$DDL_GYM_DATA_MIRROR``, else GitHub's
    raw host. A base without a scheme is a local folder."""
    base = mirror or os.environ.get(MIRROR_ENV_VAR) or DEFAULT_BASE
    if "://" not in base:
        base = Path(base).expanduser().resolve().as_uri()
    return base.rstrip("/")


def origin_url(origin: Origin, base: str = DEFAULT_BASE) -> str:
    """The URL of ``origin`` under ``base`` (``{base}/{repo}/{commit}/{path}``)."""
    path = urllib.parse.quote(origin.path)
    return f"{base.rstrip('/')}/{origin.repo}/{origin.commit}/{path}"


# -- status --------------------------------------------------------------------
OK, WRONG, MISSING = "ok", "wrong checksum", "missing"


@dataclass(frozen=True)
class FileStatus:
    """One data file under a data dir: ``ok`` (present, checksum verified),
    ``wrong checksum`` (present, ``got`` is its SHA-256) or ``missing``."""

    file: DataFile
    state: str
    got: str | None = None

    @property
    def path(self) -> str:
        return self.file.path


def file_status(file: DataFile, data_dir: Path | None) -> FileStatus:
    target = None if data_dir is None else data_dir / file.path
    if target is None or not target.is_file():
        return FileStatus(file, MISSING)
    got = sha256_of(target)
    return FileStatus(file, OK if got == file.sha256 else WRONG, got)


def status(paths: Iterable[str], data_dir: Path | None) -> list[FileStatus]:
    """The state of each manifest file of ``paths`` under ``data_dir``."""
    files = data_files()
    return [file_status(files[p], data_dir) for p in paths]


# -- fetch ---------------------------------------------------------------------
@dataclass
class FetchReport:
    """What :func:`fetch` did.

    ``fetched``: files made and verified; ``present``: already there and
    verified (not downloaded); ``failed``: ``(path, reason)``; ``derived``:
    files without an origin (not fetchable); ``downloads``: HTTP requests
    made (a resumed download counts each request)."""

    fetched: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    derived: list[str] = field(default_factory=list)
    downloads: int = 0

    @property
    def ok(self) -> bool:
        return not self.failed


def fetch(
    paths: Iterable[str],
    dest: Path,
    base: str = DEFAULT_BASE,
    *,
    attempts: int = 3,
    timeout: float = 60.0,
    log: Callable[[str], None] | None = None,
    strict_derived: bool = False,
) -> FetchReport:
    """Make each manifest file of ``paths`` under ``dest`` from its origin.

    Files already present with the right checksum are not downloaded again.
    Files without an origin are listed in ``report.derived`` (and failed too
    with ``strict_derived``: a suite that needs one cannot be completed).
    ``attempts``: requests per origin file (each resumes the last)."""
    say = log or (lambda _text: None)
    files = data_files()
    report = FetchReport()
    todo: dict[tuple[str, str, str], list[DataFile]] = {}
    for p in paths:
        if p not in files:
            report.failed.append((p, "not in ddl_gym/data/manifest.json"))
            continue
        f = files[p]
        if file_status(f, dest).state == OK:
            report.present.append(p)
        elif f.origin is None:
            report.derived.append(p)
            if strict_derived:
                report.failed.append((p, f"not fetchable: derived ({f.derived})"))
        else:
            key = (f.origin.repo, f.origin.commit, f.origin.path)
            todo.setdefault(key, []).append(f)
    if not todo:
        return report
    cache = dest / FETCH_DIR
    for group in todo.values():
        origin = group[0].origin
        assert origin is not None
        needed = [origin.path, *sorted({x for f in group for x in extra_inputs(f.cut)})]
        local: dict[str, Path] = {}
        try:
            for path in needed:
                src = origin.sibling(path)
                local[path] = _download(src, cache, base, attempts, timeout, report, say)
        except FetchError as err:
            report.failed.extend((f.path, str(err)) for f in group)
            continue
        try:
            data = local[origin.path].read_bytes()
            extras = {p: local[p].read_bytes() for p in needed[1:]}
            for f in group:
                try:
                    _make(f, data, extras, dest)
                except FetchError as err:
                    report.failed.append((f.path, str(err)))
                else:
                    report.fetched.append(f.path)
                    say(f"  ok {f.path}")
        finally:
            # the origin copies are not kept: made files (or a refused, bad
            # download) leave nothing behind; a retry downloads afresh
            for p in local.values():
                p.unlink(missing_ok=True)
    _prune(cache)
    return report


def _make(file: DataFile, origin: bytes, extras: dict[str, bytes], dest: Path) -> None:
    """Cut ``file`` from the origin's bytes, check it and store it atomically."""
    assert file.origin is not None
    try:
        data = apply_cut(file.cut, origin, extras, where=str(file.origin))
    except CutError as err:
        raise FetchError(f"cannot cut: {err}") from None
    got = hashlib.sha256(data).hexdigest()
    if got != file.sha256:
        raise FetchError(
            f"checksum mismatch: expected sha256 {file.sha256}, got {got} "
            f"(from {file.origin}); not kept"
        )
    target = dest / file.path
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)


def _download(
    origin: Origin,
    cache: Path,
    base: str,
    attempts: int,
    timeout: float,
    report: FetchReport,
    say: Callable[[str], None],
) -> Path:
    """The local copy of ``origin`` (downloaded into the cache, resuming a
    ``.part`` left by an earlier attempt or run)."""
    done = cache / origin.repo / origin.commit / origin.path
    if done.is_file():  # an earlier run downloaded it but stopped before cutting
        return done
    part = done.with_name(done.name + ".part")
    part.parent.mkdir(parents=True, exist_ok=True)
    url = origin_url(origin, base)
    last = "no attempt made"
    for _ in range(max(1, attempts)):
        have = part.stat().st_size if part.is_file() else 0
        request = urllib.request.Request(url, headers={"User-Agent": "ddl-gym data fetch"})
        if have:
            request.add_header("Range", f"bytes={have}-")
        say(f"get {url}" + (f" (resuming at byte {have})" if have else ""))
        report.downloads += 1
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                code = getattr(response, "status", None) or 200
                resumed = have > 0 and code == 206
                if resumed and not _range_starts_at(response, have):
                    last = "the server resumed at another byte than asked"
                    part.unlink()
                    continue
                length = response.headers.get("Content-Length")
                expected = (have if resumed else 0) + int(length) if length else None
                with open(part, "ab" if resumed else "wb") as out:
                    while chunk := response.read(CHUNK):
                        out.write(chunk)
        except urllib.error.HTTPError as err:
            if err.code == 404:
                raise OriginMissing(
                    f"origin not found (HTTP 404): {origin} at {url} "
                    "(wrong repository, commit or path, or the mirror lacks it)"
                ) from None
            if err.code == 416 and have:  # the partial file is no prefix of it: start over
                part.unlink()
                last = "HTTP 416 on resume"
                continue
            last = f"HTTP {err.code} {err.reason}"
            if 400 <= err.code < 500 and err.code not in (408, 429):
                break
            continue
        except (http.client.HTTPException, urllib.error.URLError, OSError) as err:
            last = f"{type(err).__name__}: {getattr(err, 'reason', None) or err}"
            continue  # keep the bytes written so far; the next request resumes
        size = part.stat().st_size
        if expected is not None and size < expected:
            last = f"connection closed after {size} of {expected} bytes"
            continue
        os.replace(part, done)
        return done
    raise FetchError(f"download of {origin} failed ({url}): {last}")


def _range_starts_at(response: http.client.HTTPResponse, have: int) -> bool:
    """Whether a 206 answer's Content-Range starts at byte ``have``."""
    text = response.headers.get("Content-Range", "")
    try:
        return int(text.split()[1].split("-")[0]) == have
    except (IndexError, ValueError):
        return False


def _prune(cache: Path) -> None:
    """Remove the cache folders left empty (a ``.part`` to resume keeps its own)."""
    if not cache.is_dir():
        return
    for folder in sorted((p for p in cache.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
    if not any(cache.iterdir()):
        shutil.rmtree(cache, ignore_errors=True)
