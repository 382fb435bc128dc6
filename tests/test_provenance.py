"""Provenance of benchmark records: every record says which suite (name and
hash), which input files (SHA-256), which code (version, commit) and which
engine settings made it; ``resume`` refuses records made otherwise; suites
that pin their inputs hash their content and refuse other files."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import re
import shutil
import subprocess

import pytest
from ddl_gym.baselines import make_policy

from ddl_gym.benchmarks import evaluate, get_suite, suite_hash
from ddl_gym.benchmarks import provenance as prov
from ddl_gym.benchmarks import suite as suite_mod
from ddl_gym.benchmarks.evaluate import ForeignRecordError
from ddl_gym.benchmarks.provenance import InputChecksumError, code_commit
from ddl_gym.benchmarks.suite import Suite
from ddl_gym.data import expected_sha256, sha256_of

QUICK = "quick-tiresias-60@pcie16"  # 60 jobs: a run takes milliseconds


def _clear_caches() -> None:
    prov.suite_fingerprint.cache_clear()
    prov.suite_pins_inputs.cache_clear()


@pytest.fixture
def pinned_suite(monkeypatch):
    """A registered suite that pins its inputs (as ddl-gym-v3 does): v1's
    quick cases with ``hash_inputs=True``."""
    v1 = get_suite("ddl-gym-v1")
    made = Suite("test-pinned", v1.quick, v1.quick, hash_inputs=True)
    monkeypatch.setitem(suite_mod.SUITES, "test-pinned", lambda: made)
    _clear_caches()
    yield made
    _clear_caches()


def _copy_inputs(suite: Suite, data_dir, dest) -> list[str]:
    files = sorted({f for c in suite.cases + suite.quick for f in prov.case_inputs(c)})
    for rel in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data_dir / rel, dest / rel)
    return files


def _flip_last_byte(path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))


# -- what a record carries -----------------------------------------------------------------
def test_every_record_carries_its_provenance(data_dir):
    suite = get_suite("ddl-gym-v1")
    case = suite.case(QUICK)
    scores = evaluate("dally", quick=True, cases=[QUICK], seeds=[1], progress=False)
    record = scores.records.iloc[0]
    p = record["provenance"]
    assert p["suite"] == "ddl-gym-v1"
    assert p["suite_hash"] == suite_hash(suite)
    source = case.workload.source
    assert p["inputs"] == {source: sha256_of(data_dir / source)}
    assert p["inputs"][source] == expected_sha256(source)  # the developers' mirror is right
    assert p["ddl_gym"] == importlib.metadata.version("ddl-gym")
    assert p["commit"] == code_commit()
    assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?|unknown", p["commit"])
    assert p["policy"] == "dally"
    engine = p["engine"]
    # what simulate() used: the policy's engine_kwargs(), the case's congestion, the runner's
    for key, value in make_policy("dally").engine_kwargs().items():
        assert engine[key] == value, key
    assert engine["congestion"] == case.congestion
    assert engine["clairvoyant"] is False and engine["record_series"] is False
    assert engine["restore_s_per_gpu"] == 1.0  # an engine default nobody passed
    json.dumps(p)  # plain JSON


def test_code_commit_of_a_git_checkout(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("no git")
    assert prov._git_commit(tmp_path) == "unknown"  # not a checkout
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "a.txt").write_text("one\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "a"], check=True)
    head = subprocess.run(
        [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert prov._git_commit(tmp_path) == head
    (tmp_path / "untracked.txt").write_text("not tracked: still clean\n")
    assert prov._git_commit(tmp_path) == head
    (tmp_path / "a.txt").write_text("two\n")
    assert prov._git_commit(tmp_path) == head + "+dirty"


def test_engine_settings_are_plain_json():
    class Odd:
        name = "odd"

    class Policy:
        def engine_kwargs(self):
            return {"lease_s": 5.0, "perf_source": Odd()}

    got = prov.engine_settings(Policy(), {"congestion": "heavy"})
    assert got["lease_s"] == 5.0 and got["congestion"] == "heavy"
    assert got["perf_source"].endswith(".Odd odd>")  # its type and name, never an address


# -- the suite hash covers input content ---------------------------------------------------
def test_pinned_suite_hash_covers_each_input_byte(data_dir, tmp_path, pinned_suite):
    files = _copy_inputs(pinned_suite, data_dir, tmp_path)
    pinned = suite_hash(pinned_suite)
    assert suite_hash(pinned_suite, data_dir=tmp_path) == pinned  # the files are the pinned ones
    # without hash_inputs the same cases hash as before (names only)
    plain = dataclasses.replace(pinned_suite, hash_inputs=False)
    assert suite_hash(plain) != pinned
    _flip_last_byte(tmp_path / files[0])
    assert suite_hash(pinned_suite, data_dir=tmp_path) != pinned
    assert suite_hash(plain, data_dir=tmp_path) == suite_hash(plain)


def test_v3_hash_changes_with_one_byte_of_an_input(data_dir, tmp_path):
    if "ddl-gym-v3" not in suite_mod.SUITES:
        pytest.skip("ddl-gym-v3 is not registered")
    v3 = get_suite("ddl-gym-v3")
    assert v3.hash_inputs
    files = _copy_inputs(v3, data_dir, tmp_path)
    assert files, "v3 reads data files"
    assert suite_hash(v3, data_dir=tmp_path) == suite_hash(v3)
    _flip_last_byte(tmp_path / files[-1])
    assert suite_hash(v3, data_dir=tmp_path) != suite_hash(v3)


@pytest.mark.parametrize("name", ["ddl-gym-v1", "ddl-gym-v2"])
def test_old_suites_hash_names_only(name, tmp_path):
    """v1 and v2 keep their pinned hash whatever data_dir says."""
    suite = get_suite(name)
    assert not suite.hash_inputs
    assert suite_hash(suite, data_dir=tmp_path) == suite_hash(suite)


def test_a_changed_input_is_refused(data_dir, tmp_path, monkeypatch, pinned_suite):
    files = _copy_inputs(pinned_suite, data_dir, tmp_path)
    target = next(f for f in files if f.endswith("60_job.csv"))
    _flip_last_byte(tmp_path / target)
    monkeypatch.setenv("DDL_GYM_DATA", str(tmp_path))
    with pytest.raises(InputChecksumError) as err:
        evaluate("fifo", suite="test-pinned", quick=True, progress=False)
    text = str(err.value)
    assert target in text
    assert expected_sha256(target) in text
    assert sha256_of(tmp_path / target) in text
    assert "ddl-gym data fetch" in text


def test_pinned_inputs_that_match_run(data_dir, tmp_path, monkeypatch, pinned_suite):
    _copy_inputs(pinned_suite, data_dir, tmp_path)
    monkeypatch.setenv("DDL_GYM_DATA", str(tmp_path))
    scores = evaluate("fifo", suite="test-pinned", quick=True, cases=[QUICK], progress=False)
    p = scores.records["provenance"].iloc[0]
    assert p["suite_hash"] == suite_hash(pinned_suite)
    assert p["inputs"] == prov.pinned_inputs(pinned_suite.case(QUICK))


# -- resume refuses foreign records ------------------------------------------------------------
@pytest.fixture
def finished(data_dir, tmp_path):
    """One finished run of fifo in a folder, and its file."""
    out = tmp_path / "runs"
    evaluate("fifo", quick=True, cases=[QUICK], seeds=[0], out_dir=out, progress=False)
    (path,) = out.glob("*.json")
    return out, path


def _resume(out, policy="fifo", name=None):
    return evaluate(
        policy, quick=True, cases=[QUICK], seeds=[0], out_dir=out, resume=True,
        progress=False, name=name,
    )  # fmt: skip


def test_resume_reuses_a_record_of_the_same_run(finished):
    out, path = finished
    record = json.loads(path.read_text())
    record["mean_jct_s"] = -1.0  # marks the file: a rerun would overwrite it
    path.write_text(json.dumps(record))
    assert _resume(out).records["mean_jct_s"].iloc[0] == -1.0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("suite", "ddl-gym-v2"),
        ("suite_hash", "0" * 64),
        ("inputs", {"traces/tiresias/60_job.csv": "f" * 64}),
        ("ddl_gym", "0.0.1"),
        ("commit", "0" * 40),
        ("policy", "tiresias"),
        ("engine", {"congestion": "none"}),
    ],
)
def test_resume_refuses_a_foreign_record(finished, field, value):
    out, path = finished
    record = json.loads(path.read_text())
    record["provenance"][field] = value
    path.write_text(json.dumps(record))
    with pytest.raises(ForeignRecordError) as err:
        _resume(out)
    text = str(err.value)
    assert f"differs in {field}" in text and path.name in text
    assert "--out" in text and "--resume" in text  # what to do


def test_resume_refuses_another_policy_name(finished):
    out, _ = finished
    with pytest.raises(ForeignRecordError, match="differs in policy"):
        _resume(out, name="my-fifo")


def test_resume_refuses_other_engine_settings(finished):
    """dally under fifo's name: same name, other engine settings (leases)."""
    out, _ = finished
    with pytest.raises(ForeignRecordError, match="differs in engine .*lease"):
        _resume(out, policy="dally", name="fifo")


def test_resume_refuses_a_record_without_provenance(finished):
    out, path = finished
    record = json.loads(path.read_text())
    del record["provenance"]
    path.write_text(json.dumps(record))
    with pytest.raises(ForeignRecordError, match="no provenance"):
        _resume(out)


@pytest.mark.parametrize("damage", [b'{"status": "ok", "mean', b"\xff\xfe", b"[1, 2]"])
def test_resume_runs_a_damaged_record_again(finished, damage):
    out, path = finished
    path.write_bytes(damage)
    again = _resume(out)
    assert again.records["mean_jct_s"].iloc[0] > 0
    assert json.loads(path.read_text())["provenance"]["policy"] == "fifo"
