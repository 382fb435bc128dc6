"""A catalogue of bad and awkward inputs, each with its exact expected outcome.

Every file is generated here from small templates (no data files are
committed). An error case names the file, the row and the field and says
what was expected; an awkward-but-valid case (BOM, CRLF, extra or reordered
columns, unsorted arrivals, Parquet) loads to the same jobs as the clean file.
"""

from __future__ import annotations

import builtins
import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ddl_gym.scenarios import ScenarioError, load_scenario_file
from ddl_gym.topology import Congestion
from ddl_gym.traces import TraceError, TraceWarning, load_trace, save_trace
from tests.fuzz import run_cli

# family -> (suffix, header, rows); row i of the list is data row i + 1
TEMPLATES: dict[str, tuple[str, list[str], list[list[str]]]] = {
    "philly": (
        ".csv",
        ["timestamp", "duration", "num_gpus", "gpu_time", "cluster"],
        [
            ["2017-11-13 00:02:12", "67.0", "1", "67.0", "11cb48"],
            ["2017-11-13 00:12:12", "680.0", "4", "2720.0", "11cb48"],
            ["2017-11-13 01:00:00", "3600.0", "8", "28800.0", "6214e9"],
        ],
    ),
    "tiresias": (
        ".csv",
        ["job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration", "interval"],
        [
            ["1", "4", "0", "1000", "vgg16", "500", "10"],
            ["2", "1", "10", "200", "resnet50", "100", "5"],
            ["3", "8", "15", "5000", "inception3", "900", "0"],
        ],
    ),
    "pollux": (
        ".csv",
        ["name", "time", "application", "num_replicas", "batch_size"],
        [
            ["cifar10-1", "0", "cifar10", "1", "128"],
            ["bert-2", "30", "bert", "4", "12"],
            ["imagenet-3", "60", "imagenet", "8", "256"],
        ],
    ),
    "alibaba": (
        ".csv",
        ["name", "num_gpu", "gpu_milli", "creation_time", "scheduled_time", "deletion_time"],
        [
            ["pod-1", "1", "1000", "0", "5", "600"],
            ["pod-2", "2", "1000", "10", "20", "4000"],
            ["pod-3", "4", "1000", "30", "31", "90"],
        ],
    ),
    "normalised": (
        ".csv",
        ["job_id", "arrival_s", "gpus", "model", "iterations", "iter_time_s"],
        [
            ["a", "0", "2", "resnet50", "1000", "0.1"],
            ["b", "5.5", "8", "bert_large", "20", "1.5"],
            ["c", "9", "1", "alexnet", "300", "0.02"],
        ],
    ),
    "dally": (
        ".json",
        [
            "job_id",
            "arrival_time",
            "max_parallelism",
            "total_iterations",
            "time_per_iteration",
            "model",
            "duration",
        ],
        [
            ["0", "50", "8", "5000", "0.2", "ResNet50", "1000"],
            ["1", "100", "4", "300", "0.5", "BERT", "200"],
            ["2", "200", "16", "900", "0.1", "VGG", "100"],
        ],
    ),
}
GPU_FIELD = {
    "philly": "num_gpus",
    "tiresias": "num_gpu",
    "pollux": "num_replicas",
    "alibaba": "num_gpu",
    "normalised": "gpus",
    "dally": "max_parallelism",
}


def render(family: str, header: list[str], rows: list[list], eol: str = "\n") -> bytes:
    suffix = TEMPLATES[family][0]
    if suffix == ".json":
        return json.dumps([dict(zip(header, r, strict=True)) for r in rows]).encode()
    return eol.join([",".join(header)] + [",".join(map(str, r)) for r in rows]).encode() + b"\n"


def write(tmp: Path, family: str, data: bytes, suffix: str | None = None) -> Path:
    path = tmp / f"{family}{suffix or TEMPLATES[family][0]}"
    path.write_bytes(data)
    return path


def clean(tmp: Path, family: str) -> pd.DataFrame:
    _, header, rows = TEMPLATES[family]
    return quiet_load(write(tmp / "..", family, render(family, header, rows))).jobs


def quiet_load(path: Path, **kw) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        return load_trace(path, **kw)


def with_cell(family: str, row: int, column: str, value: object) -> bytes:
    """The template with data row ``row`` (1-based) of ``column`` set to ``value``."""
    _, header, rows = TEMPLATES[family]
    rows = [list(r) for r in rows]
    rows[row - 1][header.index(column)] = value
    return render(family, header, rows)


@dataclass(frozen=True)
class Bad:
    """An input that must fail: its error names row and field and says ``says``."""

    family: str
    data: Callable[[], bytes]
    row: int | None
    field: str | None
    says: str
    suffix: str | None = None


def cell(family: str, row: int, column: str, value: object, says: str) -> Bad:
    return Bad(family, lambda: with_cell(family, row, column, value), row, column, says)


def header_only(family: str) -> Bad:
    _, header, _ = TEMPLATES[family]
    return Bad(family, lambda: render(family, header, []), None, None, "workload is empty")


BAD: dict[str, Bad] = {
    # huge GPU counts (near int64, absurd), every family
    **{
        f"{fam}-gpus-int64": cell(fam, 2, GPU_FIELD[fam], "9223372036854775807", "too large")
        for fam in TEMPLATES
    },
    **{f"{fam}-gpus-1e12": cell(fam, 1, GPU_FIELD[fam], "1e12", "too large") for fam in TEMPLATES},
    # header-only files: "workload is empty", never NaN metrics or IndexError
    **{f"{fam}-header-only": header_only(fam) for fam in TEMPLATES if fam != "dally"},
    "dally-empty-array": Bad("dally", lambda: b"[]", None, None, "workload is empty"),
    "alibaba-no-gpu-job": Bad(
        "alibaba",
        lambda: render(
            "alibaba",
            TEMPLATES["alibaba"][1],
            [["cpu-1", "0", "0", "0", "1", "5"], ["cpu-2", "0", "0", "3", "4", "9"]],
        ),
        None,
        None,
        "workload is empty: no GPU job",
    ),
    # JSON booleans and nested values where the seed's format has numbers
    "dally-bool-gpus": cell("dally", 2, "max_parallelism", True, "boolean value true"),
    "dally-bool-iterations": cell("dally", 3, "total_iterations", False, "boolean value false"),
    "dally-bool-arrival": cell("dally", 1, "arrival_time", True, "boolean value true"),
    "dally-list-value": cell("dally", 2, "time_per_iteration", [1, 2], "list value"),
    "dally-object-id": cell("dally", 1, "job_id", {"a": 1}, "dict value"),
    "dally-bool-model": cell("dally", 2, "model", True, "boolean value true"),
    "dally-deep-json": Bad("dally", lambda: b"[" * 100_000 + b"]" * 100_000, None, None, "deep"),
    "dally-not-array": Bad("dally", lambda: b'{"a": 1}', None, None, "not a recognised"),
    "dally-invalid-json": Bad("dally", lambda: b'[{"job_id": "1",', None, None, "invalid JSON"),
    "dally-item-not-object": Bad(
        "dally",
        lambda: json.dumps(
            [dict(zip(TEMPLATES["dally"][1], TEMPLATES["dally"][2][0], strict=True)), 5]
        ).encode(),
        2,
        "*",
        "expected a JSON object",
    ),
    # Philly time zones: a mix of zoned and local times has no order
    "philly-mixed-zones": cell(
        "philly", 2, "timestamp", "2017-11-13 00:12:12+01:00", "has a UTC offset"
    ),
    "philly-bad-timestamp": cell("philly", 3, "timestamp", "yesterday", "unparseable timestamp"),
    "philly-zero-gpus": cell("philly", 1, "num_gpus", "0", "must be > 0"),
    "philly-fractional-gpus": cell("philly", 2, "num_gpus", "2.5", "non-integer"),
    "philly-negative-duration": cell("philly", 2, "duration", "-5", "negative value"),
    "philly-text-duration": cell("philly", 1, "duration", "abc", "non-numeric value 'abc'"),
    "philly-missing-column": Bad(
        "philly",
        lambda: render("philly", ["timestamp", "num_gpus"], [["2017-11-13 00:00:00", "1"]]),
        None,
        None,
        "missing required column(s) 'duration'",
    ),
    "tiresias-unknown-model": cell("tiresias", 2, "model_name", "gpt9", "unknown model name"),
    "tiresias-zero-iterations": cell("tiresias", 1, "iterations", "0", "must be > 0"),
    "tiresias-inf-duration": cell("tiresias", 3, "duration", "inf", "non-finite"),
    "tiresias-duplicate-id": cell("tiresias", 3, "job_id", "1", "duplicate job id '1'"),
    "pollux-unknown-app": cell("pollux", 2, "application", "gpt9", "unknown model name"),
    "pollux-negative-time": cell("pollux", 3, "time", "-1", "negative value"),
    "alibaba-milli-range": cell("alibaba", 1, "gpu_milli", "2000", "out of range"),
    "alibaba-deleted-early": cell("alibaba", 2, "deletion_time", "15", "before scheduled_time"),
    "normalised-unknown-model": cell("normalised", 1, "model", "gpt9", "unknown model name"),
    "normalised-arrival-1e300": cell("normalised", 2, "arrival_s", "1e300", "too large"),
    "normalised-work-too-large": cell("normalised", 3, "iterations", "1e20", "too large"),
    "normalised-iter-time-nan": cell("normalised", 2, "iter_time_s", "nan", "empty or NaN"),
    "empty-file": Bad("tiresias", lambda: b"", None, None, "not a recognised trace file"),
    "binary-garbage": Bad("tiresias", lambda: bytes(range(256)), None, None, "not a recognised"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_trace_file_names_file_row_and_field(tmp_path: Path, case: str) -> None:
    bad = BAD[case]
    path = write(tmp_path, bad.family, bad.data(), bad.suffix)
    with pytest.raises(TraceError) as info:
        quiet_load(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: "), msg
    assert "\n" not in msg
    assert bad.says in msg, msg
    if bad.row is not None:
        assert msg.startswith(f"{path}: row {bad.row} ("), msg
    if bad.field is not None:
        assert f"field {bad.field!r}" in msg, msg


# -- awkward but valid: the same jobs as the clean file --------------------------
def _reorder(family: str) -> bytes:
    _, header, rows = TEMPLATES[family]
    order = list(reversed(range(len(header))))
    return render(family, [header[i] for i in order], [[r[i] for i in order] for r in rows])


def _extra(family: str) -> bytes:
    _, header, rows = TEMPLATES[family]
    return render(family, [*header, "comment"], [[*r, "x"] for r in rows])


def _unsorted(family: str) -> bytes:
    _, header, rows = TEMPLATES[family]
    return render(family, header, list(reversed(rows)))


def _blank_lines(family: str) -> bytes:
    _, header, rows = TEMPLATES[family]
    return render(family, header, rows).replace(b"\n", b"\n\n", 2)


AWKWARD: dict[str, Callable[[str], bytes]] = {
    "bom": lambda f: b"\xef\xbb\xbf" + render(f, *TEMPLATES[f][1:]),
    "crlf": lambda f: render(f, *TEMPLATES[f][1:], eol="\r\n"),
    "reordered": _reorder,
    "extra-column": _extra,
    "unsorted": _unsorted,
    "blank-lines": _blank_lines,
}


@pytest.mark.parametrize("family", sorted(TEMPLATES))
@pytest.mark.parametrize("how", sorted(AWKWARD))
def test_awkward_but_valid_file_loads_like_the_clean_one(
    tmp_path: Path, family: str, how: str
) -> None:
    if TEMPLATES[family][0] == ".json" and how in ("crlf", "blank-lines"):
        pytest.skip("JSON has no lines to vary")
    (tmp_path / "clean").mkdir()
    ref = clean(tmp_path / "clean", family)
    path = write(tmp_path, family, AWKWARD[how](family))
    got = quiet_load(path).jobs
    if family in ROW_ORDER_DRAWS and how in ("unsorted", "blank-lines"):
        # ids are file rows and models are drawn in file order: by design these
        # follow the file; the jobs' times and sizes must not
        cols = ["arrival_s", "gpus", "duration_s"]
        got, ref = got[cols], ref[cols]
    pd.testing.assert_frame_equal(got, ref)


# families whose job ids are source rows or whose models are seeded draws in file order
ROW_ORDER_DRAWS = ("philly", "alibaba")


def test_blank_lines_keep_spreadsheet_row_numbers(tmp_path: Path) -> None:
    _, header, rows = TEMPLATES["tiresias"]
    rows = [list(r) for r in rows]
    rows[2][1] = "x"  # data row 3 becomes file row 4 after one blank line
    data = render("tiresias", header, rows).replace(b"\n", b"\n\n", 1)
    path = write(tmp_path, "tiresias", data)
    with pytest.raises(TraceError, match=r"row 4 .*field 'num_gpu'"):
        load_trace(path)


def test_philly_zoned_times_are_compared_in_utc(tmp_path: Path) -> None:
    _, header, rows = TEMPLATES["philly"]
    rows = [list(r) for r in rows]
    rows[0][0] = "2017-11-13 01:00:00+01:00"  # 00:00 UTC
    rows[1][0] = "2017-11-13 00:30:00Z"  # 00:30 UTC
    rows[2][0] = "2017-11-12 20:00:00-05:00"  # 01:00 UTC
    trace = load_trace(write(tmp_path, "philly", render("philly", header, rows)))
    assert trace.jobs["arrival_s"].tolist() == [0.0, 1800.0, 3600.0]


def test_json_numbers_are_accepted_where_the_seed_writes_strings(tmp_path: Path) -> None:
    _, header, rows = TEMPLATES["dally"]
    typed = [[float(v) if v.replace(".", "").isdigit() else v for v in r] for r in rows]
    typed = [[int(r[0]), *r[1:]] for r in typed]
    ref = clean(tmp_path, "dally")
    got = quiet_load(write(tmp_path, "dally", render("dally", header, typed))).jobs
    pd.testing.assert_frame_equal(got, ref)


# -- Parquet in the normalised schema (what `traces convert` writes) -------------
def test_parquet_normalised_loads_like_csv(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    csv = write(tmp_path, "normalised", render("normalised", *TEMPLATES["normalised"][1:]))
    trace = load_trace(csv)
    pq = tmp_path / "jobs.parquet"
    trace.jobs.to_parquet(pq, index=False)
    got = load_trace(pq)
    pd.testing.assert_frame_equal(got.jobs, trace.jobs)
    assert list(got.source_rows) == [1, 2, 3]


@pytest.mark.parametrize(
    ("mutate", "row", "field", "says"),
    [
        (lambda df: df.assign(gpus=[2, 2**62, 1]), 2, "gpus", "too large"),
        (lambda df: df.assign(gpus=[True, False, True]), 1, "gpus", "boolean value true"),
        (lambda df: df.assign(model=["resnet50", "gpt9", "alexnet"]), 2, "model", "unknown"),
        (lambda df: df.assign(arrival_s=[0.0, np.nan, 1.0]), 2, "arrival_s", "empty or NaN"),
        (lambda df: df.iloc[0:0], None, None, "workload is empty"),
        (lambda df: df.drop(columns=["gpus"]), None, None, "not a recognised trace file"),
    ],
)
def test_parquet_goes_through_the_same_validation(tmp_path: Path, mutate, row, field, says) -> None:
    pytest.importorskip("pyarrow")
    df = pd.DataFrame(
        {
            "job_id": ["a", "b", "c"],
            "arrival_s": [0.0, 5.5, 9.0],
            "gpus": [2, 8, 1],
            "model": ["resnet50", "bert_large", "alexnet"],
            "iterations": [1000.0, 20.0, 300.0],
            "iter_time_s": [0.1, 1.5, 0.02],
        }
    )
    path = tmp_path / "bad.parquet"
    mutate(df).to_parquet(path, index=False)
    with pytest.raises(TraceError) as info:
        load_trace(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: ") and says in msg, msg
    if row is not None:
        assert msg.startswith(f"{path}: row {row} (") and f"field {field!r}" in msg, msg


def test_corrupt_parquet_is_not_a_trace(tmp_path: Path) -> None:
    path = tmp_path / "x.parquet"
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(TraceError, match="not a recognised trace file"):
        load_trace(path)


# -- paths ---------------------------------------------------------------------------
def test_directory_missing_and_unreadable_paths(tmp_path: Path, monkeypatch) -> None:
    with pytest.raises(TraceError, match=r"is a directory, not a trace file"):
        load_trace(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such trace file"):
        load_trace(tmp_path / "missing.csv")
    path = write(tmp_path, "tiresias", render("tiresias", *TEMPLATES["tiresias"][1:]))
    real_open = builtins.open

    def deny(file, *args, **kwargs):  # root ignores chmod, so refuse in open()
        if str(file) == str(path):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", deny)
    with pytest.raises(TraceError, match=r"cannot read \(permission denied\)"):
        load_trace(path)


# -- congestion schedules whose period is not exact in binary ------------------------
@pytest.mark.parametrize("period", [100.1, 0.3, 86400.7, 33.3])
def test_congestion_next_change_always_moves_forward(period: float) -> None:
    c = Congestion("p", schedule=((0.0, 0.1), (period / 2, 0.6)), period=period)
    t = 0.0
    for _ in range(20_000):
        nxt = c.next_change(t)
        assert nxt > t, (t, nxt)
        # the fraction is constant from t up to the change, which is a real one
        assert c.at(t) == c.at(math_mid(t, nxt)) or math_mid(t, nxt) == nxt
        assert c.at(nxt) != c.at(t), (t, nxt)
        t = nxt
    # the old t // period arithmetic returned t itself at 300.29999999999995
    assert c.next_change(300.29999999999995) > 300.29999999999995


def math_mid(a: float, b: float) -> float:
    return a + (b - a) / 2


# -- scenario files ----------------------------------------------------------------
SCENARIO_BASE = 'trace = "synthetic"\ncluster = "2x2x4"\n\n[synthetic]\nn_jobs = 6\n'

SCENARIO_BAD: dict[str, tuple[str, str]] = {
    "unknown-key": ('colour = "red"\n' + SCENARIO_BASE, "unknown key(s) 'colour'"),
    "unknown-synthetic-key": (SCENARIO_BASE + "speed = 3\n", "[synthetic]: unknown key(s) 'speed'"),
    "unknown-model": (
        SCENARIO_BASE + 'model_mix = { "gpt9" = 1 }\n',
        "'synthetic.model_mix': unknown model name 'gpt9'",
    ),
    "string-for-number": ('jobs = "a"\n' + SCENARIO_BASE, "'jobs' must be a positive integer"),
    "bool-for-number": ("jobs = true\n" + SCENARIO_BASE, "'jobs' must be a positive integer"),
    "synthetic-string-for-number": (
        SCENARIO_BASE.replace("n_jobs = 6", 'n_jobs = "a"'),
        "'synthetic.n_jobs' must be an integer",
    ),
    "gpu-mix-key": (SCENARIO_BASE + "gpu_mix = { a = 1 }\n", "'synthetic.gpu_mix' must be keyed"),
    "gpu-mix-too-big": (
        SCENARIO_BASE + "gpu_mix = { 64 = 1 }\n",
        "'synthetic.gpu_mix': no size with a positive weight fits 16 GPUs",
    ),
    "negative-seed": ("seeds = [-1]\n" + SCENARIO_BASE, "'seeds' must be a list of integers >= 0"),
    "bad-congestion": ('congestion = "storm"\n' + SCENARIO_BASE, "unknown congestion level"),
    "bad-cluster": ('trace = "default"\ncluster = "0x1x1"\n', "'cluster'"),
    "not-toml": ("jobs = = 3\n", "not valid TOML"),
}


@pytest.mark.parametrize("case", sorted(SCENARIO_BAD))
def test_bad_scenario_file_names_file_and_key(tmp_path: Path, case: str) -> None:
    text, says = SCENARIO_BAD[case]
    path = tmp_path / f"{case}.toml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_scenario_file(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: ") and says in msg, msg


def test_scenario_with_bom_loads(tmp_path: Path) -> None:
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + SCENARIO_BASE.encode())
    scenario, _ = load_scenario_file(path)
    assert len(scenario.build_trace(0)) == 6


def test_scenario_in_unreadable_folder(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "locked" / "s.toml"

    def deny(self) -> bool:  # root ignores chmod: refuse the lookup instead
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "is_file", deny)
    with pytest.raises(ScenarioError, match=r"cannot read: Permission denied"):
        load_scenario_file(path)


# -- the command line: exit 2 and one line, never a traceback ------------------------
def _cli(argv: list[str]) -> tuple[int, str]:
    code, err = run_cli(argv)
    assert "Traceback" not in err, err
    return code, err


SIM = ["simulate", "--jobs", "3", "--no-progress"]


def test_cli_out_pointing_at_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, err = _cli([*SIM, "-s", "small", "--out", str(blocker)])
    assert code == 2 and str(blocker) in err and "not a directory" in err, err


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--trace", "{tmp}"], "is a directory"),
        (["--trace", "{tmp}/missing.csv"], "missing.csv"),
        (["--trace", "{tmp}/empty.csv"], "workload is empty"),
        (["-s", "{tmp}/bad.toml"], "unknown key(s) 'colour'"),
        (["--config", "{tmp}/missing.toml"], "no such config file"),
        (["--seed", "-1"], "argument --seed: must be an integer >= 0, got -1"),
        (["--jobs", "0"], "'jobs' must be a positive integer"),
        (["--cluster", "0x1x1"], "cluster"),
        (["--congestion", "storm"], "unknown congestion level"),
        (["--policy", "nope"], "nope"),
        (["--jobs", "abc"], "invalid int value"),
    ],
)
def test_cli_bad_arguments_exit_2_with_one_line(tmp_path: Path, extra, says) -> None:
    (tmp_path / "empty.csv").write_text(",".join(TEMPLATES["normalised"][1]) + "\n")
    (tmp_path / "bad.toml").write_text('colour = "red"\n')
    scenario = [] if {"-s", "--config"} & set(extra) else ["-s", "small"]
    argv = [*SIM, *scenario, "--no-save", *(a.replace("{tmp}", str(tmp_path)) for a in extra)]
    code, err = _cli(argv)
    assert code == 2 and says in err, err


def test_cli_simulates_a_parquet_trace(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    csv = write(tmp_path, "normalised", render("normalised", *TEMPLATES["normalised"][1:]))
    trace = load_trace(csv)
    pq = tmp_path / "jobs.parquet"
    save_trace(trace, tmp_path / "copy.csv")
    trace.jobs.to_parquet(pq, index=False)
    code, err = _cli(["simulate", "--trace", str(pq), "--no-progress", "--no-save"])
    assert code == 0, err
