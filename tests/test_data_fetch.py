"""``ddl-gym data fetch`` / ``status`` against a loopback HTTP server laid out
like raw.githubusercontent.com (``/{repo}/{commit}/{path}``).

The real origin files (adaptdl's whole ``philly.csv``, Alibaba's whole pod
list, the PAI archive) are not in the data dir, so the tests build
origin-like files from the data dir's copies: the five Philly weeks plus rows
outside every window, shuffled; the Alibaba cut plus pods created later; the
PAI table headerless in a .tar.gz beside its header file. Each cut must give
back the data dir's file byte for byte. Plain copies are served as they are.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import random
import tarfile
import threading
import urllib.parse
from collections import defaultdict
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ddl_gym.cli.main import main
from ddl_gym.data import data_files, fetch_command, manifest, needed_files
from ddl_gym.data.cuts import CutError, apply_cut, extra_inputs
from ddl_gym.data.fetch import FETCH_DIR, fetch, origin_url

PHILLY_WEEKS = sorted(p for p in manifest() if p.startswith("traces/philly/philly_2017"))
ALIBABA = "traces/alibaba_openb/openb_pod_list_default_dev.csv"
PAI = "traces/alibaba_pai2020/pai_machine_spec.csv"
TIRESIAS = "traces/tiresias/60_job.csv"
# ddl-gym-v1 reads these 17 files (its definition is frozen, its hash pinned)
V1_FILES = 17


@pytest.fixture(autouse=True)
def _user_home(tmp_path, monkeypatch):
    """The user data dir in a temporary folder; no mirror from the environment."""
    monkeypatch.setenv("DDL_GYM_DATA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DDL_GYM_DATA_MIRROR", raising=False)


# -- the origin server -----------------------------------------------------------
class Origins:
    """What the server serves, how it misbehaves, and what it was asked."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}  # "repo/commit/path" -> bytes
        self.interrupt: set[str] = set()  # first request: half the body, then close
        self.ignore_range = False  # answer a Range request with the whole file (200)
        self.requests: list[tuple[str, str | None]] = []  # (key, Range header)
        self.lock = threading.Lock()

    def count(self, key: str) -> int:
        return sum(k == key for k, _ in self.requests)


def _handler(origins: Origins) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format, *args):  # noqa: A002 - quiet test output
            pass

        def do_GET(self):  # noqa: N802 - http.server's name
            key = urllib.parse.unquote(self.path.lstrip("/"))
            rng = self.headers.get("Range")
            with origins.lock:
                origins.requests.append((key, rng))
                first = origins.count(key) == 1
            body = origins.files.get(key)
            if body is None:
                self.send_error(404, "Not Found")
                return
            start = 0
            if rng and not origins.ignore_range and rng.startswith("bytes=") and rng.endswith("-"):
                start = int(rng[len("bytes=") : -1])
                if start >= len(body):
                    self.send_error(416, "Range Not Satisfiable")
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            part = body[start:]
            self.send_header("Content-Length", str(len(part)))
            self.end_headers()
            if key in origins.interrupt and first:
                self.wfile.write(part[: len(part) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(part)

    return Handler


@pytest.fixture
def mirror_manifest(data_dir, tmp_path, monkeypatch) -> Iterator[None]:
    """The manifest narrowed to the files the data dir holds, where the
    developers' data dir predates some fetchable entries (e.g. openb's
    gpuspec33 pod list, added from upstream later): the whole-manifest tests
    then check every file the data dir can vouch for instead of skipping."""
    import json

    import ddl_gym.data as data

    whole = json.loads(data.MANIFEST_PATH.read_text())
    files = whole["files"]
    absent = [p for p in files if not (data_dir / p).is_file()]
    if not absent:
        yield
        return
    derived = [p for p in absent if "origin" not in files[p]]
    if derived:  # a fetched data dir: not the developers' whole set
        pytest.skip(f"{data_dir} is not the whole data set (lacks derived {derived[0]})")
    narrowed = {**whole, "files": {p: e for p, e in files.items() if p not in absent}}
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(narrowed))
    monkeypatch.setattr(data, "MANIFEST_PATH", path)
    data.manifest.cache_clear()
    data.data_files.cache_clear()
    yield
    data.manifest.cache_clear()
    data.data_files.cache_clear()


@pytest.fixture
def server() -> Iterator[tuple[Origins, str]]:
    """A loopback origin server: (its state, its base URL)."""
    origins = Origins()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(origins))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield origins, f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _key(repo: str, commit: str, path: str) -> str:
    return f"{repo}/{commit}/{path}"


def origin_key(path: str) -> str:
    o = data_files()[path].origin
    assert o is not None
    return _key(o.repo, o.commit, o.path)


# -- origin-like files built from the data dir ------------------------------------
def _lines(data: bytes) -> list[bytes]:
    return data.rstrip(b"\n").split(b"\n")


def _philly_origin(data_dir: Path, rng: random.Random) -> bytes:
    """The five weeks plus rows outside every window, shuffled: rows with one
    timestamp keep their order (the cut's sort is stable, as in adaptdl's file)."""
    header, rows = b"", []
    for p in PHILLY_WEEKS:
        lines = _lines((data_dir / p).read_bytes())
        header = lines[0]
        rows += lines[1:]
    rows += [
        b"2017-09-04 10:00:00,60.0,1,60.0,11cb48",  # before every window
        b"2017-10-30 00:00:00,60.0,2,120.0,11cb48",  # the first week's end: excluded
        b"2017-11-01 12:00:00,60.0,1,60.0,6214e9",  # a week that is not cut
        b"2017-12-22 23:00:00,60.0,8,480.0,6c71a0",  # after every window
    ]
    stamp = [r.split(b",", 1)[0] for r in rows]
    by_stamp: dict[bytes, list[bytes]] = defaultdict(list)
    for s, r in zip(stamp, rows, strict=True):
        by_stamp[s].append(r)
    order = list(range(len(rows)))
    rng.shuffle(order)
    queues = {s: iter(rs) for s, rs in by_stamp.items()}
    shuffled = [next(queues[stamp[i]]) for i in order]
    return b"\n".join([header, *shuffled]) + b"\n"


def _alibaba_origin(data_dir: Path, rng: random.Random) -> bytes:
    """The cut's pods (all created before 11,500,000 s) in their order, with
    pods created at or after the limit inserted among them."""
    lines = _lines((data_dir / ALIBABA).read_bytes())
    header, rows = lines[0], lines[1:]
    col = header.split(b",").index(b"creation_time")
    later = []
    for i, created in enumerate((b"11500000", b"11500001", b"12000000", b"13500000")):
        fields = rows[i].split(b",")
        fields[0] = b"openb-pod-later-%d" % i
        fields[col] = created
        later.append(b",".join(fields))
    out = list(rows)
    for row in later:
        out.insert(rng.randrange(len(out) + 1), row)
    return b"\n".join([header, *out]) + b"\n"


def _tar_gz(member: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(member)
        info.size, info.mtime = len(data), 0
        tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue(), mtime=0)


def _need(data_dir: Path, paths: list[str]) -> None:
    """Skip unless the data dir holds ``paths`` (a fetched one may be partial)."""
    absent = [p for p in paths if data_files()[p].fetchable and not (data_dir / p).is_file()]
    if absent:
        pytest.skip(f"{data_dir} lacks {len(absent)} data files (e.g. {absent[0]})")


def build_origins(data_dir: Path, paths: list[str]) -> dict[str, bytes]:
    """Origin-like files, by ``repo/commit/path``, from which the cuts of
    ``paths`` give the data dir's files."""
    files = data_files()
    sources = PHILLY_WEEKS if any(p in PHILLY_WEEKS for p in paths) else []
    _need(data_dir, [*paths, *sources])
    rng = random.Random(0)
    out: dict[str, bytes] = {}
    for p in paths:
        f = files[p]
        if f.origin is None:
            continue
        o, name = f.origin, (f.cut or {}).get("name", "copy")
        key = _key(o.repo, o.commit, o.path)
        if name == "copy":
            out[key] = (data_dir / p).read_bytes()
        elif name == "time_window":
            out[key] = _philly_origin(data_dir, rng)
        elif name == "below":
            out[key] = _alibaba_origin(data_dir, rng)
        elif name == "tar_member":
            assert f.cut is not None
            header, _, body = (data_dir / p).read_bytes().partition(b"\n")
            out[key] = _tar_gz(str(f.cut["member"]), body)
            (extra,) = extra_inputs(f.cut)
            out[_key(o.repo, o.commit, extra)] = header + b"\n"
        else:
            raise AssertionError(f"no origin builder for cut {name!r}")
    # the origin-like files are what the tests claim: each cut reproduces its file
    for p in paths:
        f = files[p]
        if f.origin is not None:
            extras = {x: out[_key(f.origin.repo, f.origin.commit, x)] for x in extra_inputs(f.cut)}
            made = apply_cut(f.cut, out[origin_key(p)], extras)
            assert hashlib.sha256(made).hexdigest() == f.sha256, p
    return out


def _files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


# -- the manifest --------------------------------------------------------------
def test_manifest_names_each_files_origin_or_how_it_was_derived():
    files = data_files()
    derived = sorted(p for p, f in files.items() if f.origin is None)
    assert derived == [
        "profiles/dally_astra/MAPPING.md",
        "profiles/dally_astra/slowdowns.csv",
        "profiles/gavel/isolated_throughputs_flat.csv",
        "profiles/tiresias/tiresias_model_tensors.csv",
        "reference/artist_sim_500jobs_4x2.csv",
        "reference/artist_sim_week_4x2.csv",
    ]
    for p, f in files.items():
        assert f.licence and f.cite, p
        assert len(f.sha256) == 64 and f.bytes > 0, p
        if f.origin is None:
            assert f.derived and f.cut is None, p
            continue
        assert len(f.origin.commit) == 40 and int(f.origin.commit, 16) >= 0, p
        assert f.cut is not None and f.cut["name"] in ("copy", "time_window", "below", "tar_member")
    cuts = {p: f.cut["name"] for p, f in files.items() if f.cut and f.cut["name"] != "copy"}
    assert cuts == {
        **dict.fromkeys(PHILLY_WEEKS, "time_window"),
        ALIBABA: "below",
        PAI: "tar_member",
    }
    assert "non-commercial" in files["profiles/lucid/colocate_info.csv"].licence
    # the five weeks come from one origin file: it is downloaded once
    assert len({origin_key(p) for p in PHILLY_WEEKS}) == 1


def test_origin_url_quotes_the_path_and_takes_a_mirror():
    o = data_files()["traces/philly/philly_vc.csv"].origin
    assert o is not None
    url = origin_url(o, "https://example.org/raw/")
    assert url == (
        f"https://example.org/raw/S-Lab-System-Group/HeliosArtifact/{o.commit}/"
        "framework/QSSF%20Service/data/philly_vc.csv"
    )


# -- cuts: exact small cases ---------------------------------------------------------
def test_time_window_keeps_the_half_open_window_stably_sorted():
    origin = (
        b"timestamp,duration,cluster\n"
        b"2017-11-14 00:00:00,1.0,b\n"
        b"2017-11-13 00:00:00,2.0,a\n"  # the start: kept
        b"2017-11-20 00:00:00,3.0,a\n"  # the end: left out
        b"2017-11-14 00:00:00,4.0,a\n"  # ties keep the origin's order
        b"2017-11-12 23:59:59,5.0,a\n"
    )
    cut = {"name": "time_window", "column": "timestamp", "sort": True}
    cut |= {"start": "2017-11-13 00:00:00", "end": "2017-11-20 00:00:00"}
    assert apply_cut(cut, origin) == (
        b"timestamp,duration,cluster\n"
        b"2017-11-13 00:00:00,2.0,a\n"
        b"2017-11-14 00:00:00,1.0,b\n"
        b"2017-11-14 00:00:00,4.0,a\n"
    )


def test_below_keeps_the_origin_order_and_tar_member_prepends_the_header():
    origin = b"name,creation_time\np2,5\np1,11500000\np0,3\np3,11499999.5\n"
    cut = {"name": "below", "column": "creation_time", "limit": 11500000}
    assert apply_cut(cut, origin) == b"name,creation_time\np2,5\np0,3\np3,11499999.5\n"
    archive = _tar_gz("t.csv", b"m1,8\nm2,0\n")
    cut = {"name": "tar_member", "member": "t.csv", "header": "t.header"}
    assert apply_cut(cut, archive, {"t.header": b"machine,gpus\n"}) == b"machine,gpus\nm1,8\nm2,0\n"


@pytest.mark.parametrize(
    "cut, origin, message",
    [
        ({"name": "below", "column": "t", "limit": 1}, b"a,b\n1,2\n", "no column 't'"),
        ({"name": "below", "column": "t", "limit": 1}, b"t,b\n1,2\nx,3\n", "line 3, column t"),
        ({"name": "below", "column": "t", "limit": 1}, b"t,b\n1,2,3\n", "line 2: 3 fields"),
        (
            {"name": "time_window", "column": "t", "start": "2017-01-01 00:00:00", "end": "2018"},
            b"t\n2017-02-01 00:00:00\n",
            "end",
        ),
        ({"name": "tar_member", "member": "x", "header": "h"}, b"not a tar", "h"),
        ({"name": "shuffle"}, b"", "unknown cut 'shuffle'"),
    ],
)
def test_a_bad_origin_or_cut_is_one_clear_error(cut, origin, message):
    with pytest.raises(CutError, match="^philly.csv: .*" + message.replace("(", r"\(")):
        apply_cut(cut, origin, {"h": b"a\n"} if message != "h" else {}, where="philly.csv")


# -- fetch -------------------------------------------------------------------------
def test_fetch_suite_v1_fetches_exactly_its_files_once(data_dir, server, capsys):
    origins, url = server
    paths = needed_files("ddl-gym-v1")
    assert len(paths) == V1_FILES
    origins.files = build_origins(data_dir, paths)
    assert main(["data", "fetch", "--suite", "ddl-gym-v1", "--mirror", url]) == 0
    home = _home() / "data"  # the user data dir's data/ by default
    assert _files_under(home) == set(paths)  # exactly those, and no download leftovers
    for p in paths:
        assert hashlib.sha256((home / p).read_bytes()).hexdigest() == data_files()[p].sha256
    # each origin file was asked for once (the Philly week's philly.csv too)
    keys = [k for k, _ in origins.requests]
    assert sorted(keys) == sorted({origin_key(p) for p in paths})
    out = capsys.readouterr().out
    assert f"fetched {V1_FILES}, already present and verified 0" in out
    # a second fetch downloads nothing
    n = len(origins.requests)
    assert main(["data", "fetch", "--suite", "ddl-gym-v1", "--mirror", url]) == 0
    assert len(origins.requests) == n
    assert f"fetched 0, already present and verified {V1_FILES}" in capsys.readouterr().out


def _home() -> Path:
    import os

    return Path(os.environ["DDL_GYM_DATA_HOME"])


def test_fetch_everything_reproduces_the_data_dir(
    data_dir, mirror_manifest, server, tmp_path, monkeypatch
):
    """Every fetchable file, from $DDL_GYM_DATA_MIRROR: the five Philly weeks
    from one download of the shuffled philly.csv, the Alibaba cut, the PAI
    archive with its header; the derived files are listed, not failed."""
    origins, url = server
    origins.files = build_origins(data_dir, sorted(manifest()))
    monkeypatch.setenv("DDL_GYM_DATA_MIRROR", url)
    out = tmp_path / "data"
    assert main(["data", "fetch", "--data", str(out)]) == 0
    fetchable = {p for p, f in data_files().items() if f.fetchable}
    assert _files_under(out) == fetchable
    for p in fetchable:
        assert (out / p).read_bytes() == (data_dir / p).read_bytes(), p
    assert origins.count(origin_key(PHILLY_WEEKS[0])) == 1
    assert len(origins.requests) == len(origins.files)


def test_a_corrupt_file_is_refused_and_not_kept(data_dir, server, tmp_path, capsys):
    origins, url = server
    paths = needed_files("ddl-gym-v1")
    origins.files = build_origins(data_dir, paths)
    good = origins.files[origin_key(TIRESIAS)]
    body = bytearray(good)
    body[len(body) // 2] ^= 0x01  # one byte changed
    origins.files[origin_key(TIRESIAS)] = bytes(body)
    out = tmp_path / "data"
    argv = ["data", "fetch", "--suite", "ddl-gym-v1", "--data", str(out), "--mirror", url]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    expected, got = data_files()[TIRESIAS].sha256, hashlib.sha256(bytes(body)).hexdigest()
    assert len(err) == 1  # one line per failed file
    assert err[0].startswith(f"ddl-gym data fetch: error: {TIRESIAS}: checksum mismatch: ")
    assert f"expected sha256 {expected}, got {got}" in err[0] and err[0].endswith("not kept")
    # the bad file is not kept (nor its download); the others are there
    assert not (out / TIRESIAS).exists() and not (out / FETCH_DIR).exists()
    assert _files_under(out) == set(paths) - {TIRESIAS}
    # once the origin is right, the next fetch downloads only that file
    origins.files[origin_key(TIRESIAS)] = good
    n = len(origins.requests)
    assert main(argv) == 0
    assert origins.requests[n:] == [(origin_key(TIRESIAS), None)]
    assert _files_under(out) == set(paths)


def test_a_missing_origin_is_named(data_dir, server, tmp_path, capsys):
    origins, url = server
    paths = [TIRESIAS, "traces/tiresias/n32g4.csv"]
    origins.files = build_origins(data_dir, paths)
    del origins.files[origin_key(TIRESIAS)]
    out = tmp_path / "data"
    report = fetch(paths, out, url)
    assert [p for p, _ in report.failed] == [TIRESIAS]
    reason = report.failed[0][1]
    assert "HTTP 404" in reason and "SymbioticLab/Tiresias@" in reason
    assert "simulator/60_job.csv" in reason
    assert origins.count(origin_key(TIRESIAS)) == 1  # a 404 is not retried
    assert (out / "traces/tiresias/n32g4.csv").is_file() and not (out / TIRESIAS).exists()


def test_an_interrupted_download_resumes_with_a_range_request(data_dir, server, tmp_path):
    origins, url = server
    origins.files = build_origins(data_dir, PHILLY_WEEKS)
    key = origin_key(PHILLY_WEEKS[0])
    origins.interrupt.add(key)
    report = fetch(PHILLY_WEEKS, tmp_path / "data", url)
    assert report.ok and sorted(report.fetched) == PHILLY_WEEKS
    half = len(origins.files[key]) // 2
    assert origins.requests == [(key, None), (key, f"bytes={half}-")]
    assert report.downloads == 2
    for p in PHILLY_WEEKS:
        assert (tmp_path / "data" / p).read_bytes() == (data_dir / p).read_bytes()


def test_a_server_without_ranges_sends_the_whole_file_again(data_dir, server, tmp_path):
    origins, url = server
    origins.files = build_origins(data_dir, [TIRESIAS])
    key = origin_key(TIRESIAS)
    origins.interrupt.add(key)
    origins.ignore_range = True
    report = fetch([TIRESIAS], tmp_path, url)
    assert report.ok and len(origins.requests) == 2  # the half is dropped, not appended to
    assert (tmp_path / TIRESIAS).read_bytes() == (data_dir / TIRESIAS).read_bytes()


def test_an_interrupted_run_resumes_in_the_next_run(data_dir, server, tmp_path):
    origins, url = server
    origins.files = build_origins(data_dir, [ALIBABA])
    key = origin_key(ALIBABA)
    origins.interrupt.add(key)
    out = tmp_path / "data"
    first = fetch([ALIBABA], out, url, attempts=1)
    assert [p for p, _ in first.failed] == [ALIBABA]
    assert "connection closed after" in first.failed[0][1]
    half = len(origins.files[key]) // 2
    (part,) = (out / FETCH_DIR).rglob("*.part")
    assert part.stat().st_size == half
    second = fetch([ALIBABA], out, url, attempts=1)
    assert second.ok and second.fetched == [ALIBABA]
    assert origins.requests[-1] == (key, f"bytes={half}-")
    assert (out / ALIBABA).read_bytes() == (data_dir / ALIBABA).read_bytes()
    assert not (out / FETCH_DIR).exists()


def test_a_derived_file_cannot_be_fetched(tmp_path):
    path = "profiles/dally_astra/slowdowns.csv"
    loose = fetch([path], tmp_path, "http://127.0.0.1:9")  # nothing is downloaded
    assert loose.ok and loose.derived == [path] and loose.downloads == 0
    strict = fetch([path], tmp_path, "http://127.0.0.1:9", strict_derived=True)
    assert strict.failed and "not fetchable: derived" in strict.failed[0][1]


# -- status ----------------------------------------------------------------------
def test_status_lists_ok_wrong_and_missing_files(data_dir, tmp_path, capsys):
    out = tmp_path / "data"
    paths = needed_files("ddl-gym-v1")
    ok, wrong = paths[0], paths[1]
    _need(data_dir, [ok, wrong])
    for p in (ok, wrong):
        (out / p).parent.mkdir(parents=True, exist_ok=True)
        (out / p).write_bytes((data_dir / p).read_bytes())
    with open(out / wrong, "ab") as fh:
        fh.write(b"\n")
    assert main(["data", "status", "--suite", "ddl-gym-v1", "--data", str(out)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"data dir: {out} (--data)"
    state = {line.split()[0]: line.split(None, 1)[1] for line in lines[1:] if line[:2] == "  "}
    assert set(state) == set(paths)
    assert state[ok] == "ok"
    assert state[wrong].startswith("wrong checksum  got ")
    assert all(state[p] == "missing" for p in paths[2:])
    assert lines[-2] == f"suite ddl-gym-v1: {V1_FILES} files: 1 ok, 1 wrong checksum, 15 missing"
    assert lines[-1] == "to fetch what is missing: ddl-gym data fetch --suite ddl-gym-v1"
    # the whole manifest: derived files say they cannot be fetched
    assert main(["data", "status", "--data", str(out)]) == 1
    text = capsys.readouterr().out
    assert "profiles/dally_astra/slowdowns.csv" in text
    assert "missing, not fetchable (derived)" in text


def test_status_of_the_data_dir_itself_is_all_ok(data_dir, mirror_manifest, monkeypatch, capsys):
    if any(not (data_dir / p).is_file() for p in manifest()):
        pytest.skip(f"{data_dir} is not the whole data set (a fetched one lacks derived files)")
    monkeypatch.setenv("DDL_GYM_DATA", str(data_dir))
    assert main(["data", "status"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"data dir: {data_dir} ($DDL_GYM_DATA)"
    n = len(manifest())
    assert out[-1] == f"manifest: {n} files: {n} ok, 0 wrong checksum, 0 missing"


# -- where the data is found -------------------------------------------------------------
def test_find_data_dir_order(tmp_path, monkeypatch):
    from ddl_gym.traces import loader

    monkeypatch.setattr(loader, "_repo_root", lambda: tmp_path / "repo")
    monkeypatch.delenv("DDL_GYM_DATA", raising=False)
    assert loader.find_data_dir() is None  # nothing anywhere
    user = _home() / "data"
    user.mkdir(parents=True)
    assert loader.find_data_dir() == user
    shared = tmp_path / "shared" / "data"
    shared.mkdir(parents=True)
    assert loader.find_data_dir() == shared  # the developers' mirror first
    explicit = tmp_path / "mine"
    explicit.mkdir()
    monkeypatch.setenv("DDL_GYM_DATA", str(explicit))
    assert loader.find_data_dir() == explicit
    # an explicit setting that is no folder is never silently replaced
    monkeypatch.setenv("DDL_GYM_DATA", str(tmp_path / "absent"))
    assert loader.find_data_dir() is None


def test_a_missing_benchmark_file_names_the_fetch_command(tmp_path, monkeypatch):
    from ddl_gym.benchmarks.workload import DataMissingError, data_path

    monkeypatch.setenv("DDL_GYM_DATA", str(tmp_path))
    with pytest.raises(DataMissingError, match="`ddl-gym data fetch --suite ddl-gym-v1`"):
        data_path(TIRESIAS, suite="ddl-gym-v1")
    with pytest.raises(DataMissingError, match=r"`ddl-gym data fetch` \(see docs/data.md\)"):
        data_path(TIRESIAS)
    assert fetch_command() == "ddl-gym data fetch"
