"""GPU types as data: catalogue labels, the speed model, its cross-validation
on Gavel, and openb's typed node list and GPU specs."""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

import pytest

from ddl_gym.gpu_speed import (
    GAVEL_FLAT,
    GAVEL_PHYSICAL,
    SpeedModel,
    campaign_difference,
    cross_validate,
    job_family,
    measured_speeds,
    read_gavel_json_single_gpu,
    read_gavel_single_gpu,
)
from ddl_gym.gpu_types import CATALOGUE, OPENB_NAMES, datasheet_speed, get_gpu_type
from ddl_gym.gpu_types_report import DOCS_PATH, main
from ddl_gym.traces.openb_types import (
    NODE_LIST,
    POD_LIST,
    check_openb_types,
    parse_gpu_spec,
    read_node_inventory,
    read_pod_types,
)
from ddl_gym.traces.schema import TraceError

# -- catalogue ----------------------------------------------------------------


def test_every_entry_is_labelled_with_a_source() -> None:
    required = {"K80", "P100", "V100-16GB", "V100-32GB", "T4", "A10", "A100-40GB"}
    assert required | {"A100-80GB", "H100"} <= set(CATALOGUE)
    for t in CATALOGUE.values():
        assert t.speed_label in ("measured", "estimate"), t.name
        assert len(t.source) > 20, t.name
        if t.speed_label == "measured":
            assert "Gavel" in t.source and t.speed is not None
        elif t.speed is not None:
            # an estimate with a speed cites a vendor datasheet it was computed from
            assert "datasheet" in t.source
            assert t.fp32_tflops is not None and t.mem_bw_gbs is not None
            assert t.speed == pytest.approx(datasheet_speed(t.fp32_tflops, t.mem_bw_gbs))


def test_every_openb_model_is_in_the_catalogue() -> None:
    for name, key in OPENB_NAMES.items():
        assert get_gpu_type(name) is CATALOGUE[key]
    assert get_gpu_type("v100").name == "V100-16GB"  # Gavel's spelling
    with pytest.raises(KeyError, match="unknown GPU type 'X100'"):
        get_gpu_type("X100")


def test_datasheet_speed_by_hand() -> None:
    # T4: sqrt(8.1/15.7 * 320/900) = sqrt(0.51592 * 0.35556) = 0.42830
    assert datasheet_speed(8.1, 320.0) == pytest.approx(0.42830, abs=1e-5)
    assert datasheet_speed(15.7, 900.0) == 1.0


# -- speed model on a tiny hand-computed table -----------------------------------

TINY = {
    ("Net (batch size 32)", "K80"): 1.0,
    ("Net (batch size 32)", "V100-16GB"): 4.0,
    ("Net (batch size 128)", "K80"): 1.0,
    ("Net (batch size 128)", "V100-16GB"): 8.0,
    ("Other (batch size 64)", "K80"): 2.0,
    ("Other (batch size 64)", "V100-16GB"): 2.0,
}


def test_job_family() -> None:
    assert job_family("ResNet-50 (batch size 64)") == ("ResNet-50", 64.0)
    assert job_family("A3C") == ("A3C", None)


def test_speed_model_by_hand() -> None:
    m = SpeedModel(TINY)
    # nearest batch size 32 -> ratio 4
    assert m.predict("Net (batch size 40)", "K80", 3.0, "V100-16GB") == pytest.approx(12.0)
    # 64 is equally far from 32 and 128 (log distance): geometric mean of 4 and 8
    assert m.ratio("Net (batch size 64)", "K80", "V100-16GB") == (
        pytest.approx(math.sqrt(32.0)),
        "family",
    )
    # the reverse direction is the reciprocal
    assert m.predict("Net (batch size 32)", "V100-16GB", 4.0, "K80") == pytest.approx(1.0)
    # unseen family: median of log ratios (log 1, log 4, log 8) -> 4
    assert m.ratio("New", "K80", "V100-16GB") == (pytest.approx(4.0), "global")
    # no pair measured: the catalogue's speeds
    r, src = m.ratio("New", "T4", "A10")
    assert src == "datasheet"
    assert r == pytest.approx(CATALOGUE["A10"].speed / CATALOGUE["T4"].speed)  # type: ignore[operator]
    with pytest.raises(KeyError, match="undisclosed"):
        m.ratio("New", "G2", "T4")


def test_cross_validation_by_hand() -> None:
    res = cross_validate(TINY, "job")
    err = {(r.job, r.a): r.rel_error for r in res.rows}
    # Net 32 held out: Net 128's ratio 8 -> K80 1 predicts 8 on V100 (measured 4)
    assert err[("Net (batch size 32)", "K80")] == pytest.approx(1.0)
    assert err[("Net (batch size 32)", "V100-16GB")] == pytest.approx(0.5)
    # Other held out: no family left -> median of log 4 and log 8 -> sqrt(32)
    assert err[("Other (batch size 64)", "K80")] == pytest.approx(math.sqrt(32.0) - 1.0)
    assert err[("Other (batch size 64)", "V100-16GB")] == pytest.approx(1 - 1 / math.sqrt(32.0))
    # sorted errors 0.5, 0.5, 0.823, 1, 1, 4.66: median (0.823 + 1) / 2
    assert res.median_error == pytest.approx((1 - 1 / math.sqrt(32.0) + 1.0) / 2)


def test_gavel_reader_names_the_row(tmp_path: Path) -> None:
    p = tmp_path / "g.csv"
    p.write_text(
        "gpu_type,consolidated,job_type,num_gpus,steps_per_sec\n"
        "k80,1,A3C,1,3.0\n"
        "k80,1,A3C,1,fast\n",
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match=r"g\.csv: row 2, field 'steps_per_sec': not a number"):
        read_gavel_single_gpu(p)


# -- openb GPU specs on hand-written rows ----------------------------------------------


def test_parse_gpu_spec() -> None:
    assert parse_gpu_spec("") == frozenset()
    assert parse_gpu_spec("nan") == frozenset()
    assert parse_gpu_spec("V100M16|V100M32") == {"V100-16GB", "V100-32GB"}
    assert parse_gpu_spec(" T4 ") == {"T4"}


POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)


def _pods(tmp_path: Path, *rows: str) -> Path:
    p = tmp_path / "pods.csv"
    p.write_text(POD_HEADER + "".join(r + "\n" for r in rows), encoding="utf-8")
    return p


def test_pod_types_by_hand(tmp_path: Path) -> None:
    p = _pods(
        tmp_path,
        "a,1000,1024,2,1000,A10|T4,LS,Running,0,7200,0",
        "b,1000,1024,1,500,,LS,Running,0,3600,0",
        "c,1000,1024,0,0,,LS,Running,0,3600,0",
        "d,1000,1024,1,1000,P100,LS,Pending,0,3600,",
    )
    pods = read_pod_types(p)
    assert [(x.name, x.accepted, x.gpu_hours) for x in pods] == [
        ("a", {"A10", "T4"}, 4.0),  # 2 GPUs x 2 h
        ("b", frozenset(), 0.5),  # half a GPU x 1 h
        ("c", frozenset(), 0.0),  # CPU-only
        ("d", {"P100"}, 0.0),  # never scheduled
    ]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("T4||A10", r"row 2 .*field 'gpu_spec': malformed spec 'T4\|\|A10'"),
        ("X100", r"row 2 .*field 'gpu_spec': unknown GPU type 'X100'"),
        ("T4|", r"row 2 .*field 'gpu_spec': malformed spec"),
    ],
)
def test_bad_spec_names_the_row(tmp_path: Path, spec: str, message: str) -> None:
    p = _pods(
        tmp_path,
        "a,1000,1024,1,1000,T4,LS,Running,0,10,0",
        f"b,1000,1024,1,1000,{spec},LS,Running,0,10,0",
    )
    with pytest.raises(TraceError, match=message) as info:
        read_pod_types(p)
    assert "pods.csv" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("b,1,1,two,1000,T4,LS,Running,0,10,0", r"field 'num_gpu': not a whole number"),
        ("b,1,1,1,1500,T4,LS,Running,0,10,0", r"field 'gpu_milli': must be <= 1000"),
        ("b,1,1,1,1000,T4,LS,Running,0,5,9", r"field 'deletion_time': before scheduled"),
        ("b,1,1,1,1000,T4,LS,Running,0,x,0", r"field 'deletion_time': not a number"),
    ],
)
def test_bad_pod_field_names_the_row(tmp_path: Path, row: str, message: str) -> None:
    p = _pods(tmp_path, "a,1000,1024,1,1000,T4,LS,Running,0,10,0", row)
    with pytest.raises(TraceError, match=r"pods\.csv: row 2 .*" + message):
        read_pod_types(p)


def test_missing_column_is_named(tmp_path: Path) -> None:
    p = tmp_path / "pods.csv"
    p.write_text("name,num_gpu\na,1\n", encoding="utf-8")
    with pytest.raises(TraceError, match="missing column.*gpu_milli"):
        read_pod_types(p)


def test_node_inventory_by_hand(tmp_path: Path) -> None:
    p = tmp_path / "nodes.csv"
    p.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n"
        "n0,1,1,8,V100M32\nn1,1,1,2,V100M32\nn2,1,1,4,T4\nn3,1,1,0,\n",
        encoding="utf-8",
    )
    inv = read_node_inventory(p)
    assert inv.nodes == {"T4": 1, "V100-32GB": 2}
    assert inv.gpus == {"T4": 4, "V100-32GB": 10}
    assert (inv.gpuless_nodes, inv.total_gpus) == (1, 14)
    assert inv.max_per_node == {"T4": 4, "V100-32GB": 8}
    p.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,8,K40\n", encoding="utf-8")
    with pytest.raises(TraceError, match=r"row 1 .*field 'model': unknown GPU type 'K40'"):
        read_node_inventory(p)


def test_unplaceable_pods_are_counted(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,4,T4\n", encoding="utf-8")
    pods = _pods(
        tmp_path,
        "a,1,1,1,1000,A10,LS,Running,0,3600,0",
        "b,1,1,1,1000,A10|T4,LS,Running,0,3600,0",
        "c,1,1,1,1000,,LS,Running,0,3600,0",
        "d,1,1,8,1000,T4,LS,Running,0,0,0",
        "e,1,1,8,1000,,LS,Running,0,0,0",
    )
    r = check_openb_types(nodes, pods)
    assert r.unplaceable == {"A10": 1}
    assert r.too_large == {"T4": 1, "any": 1}  # 8 GPUs; the only node has 4
    assert r.gpu_hours == {"A10": 1.0, "A10|T4": 1.0, "T4": 0.0, "any": 1.0}
    assert (r.gpu_pods, r.any_type_pods) == (5, 2)


def test_cli_without_data_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "page.md"
    assert main(["--data", str(tmp_path / "none"), "--out", str(out)]) == 2
    assert not out.exists()
    assert capsys.readouterr().err.count("\n") == 1


# -- on the real data ------------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def test_cross_validation_matches_the_docs(data_dir: Path) -> None:
    thr = read_gavel_single_gpu(data_dir / GAVEL_FLAT)
    assert len(thr) == 78  # 26 job types x 3 types
    job, family = cross_validate(thr, "job"), cross_validate(thr, "family")
    assert len(job.rows) == len(family.rows) == 26 * 6
    assert job.median_error <= 0.10  # the target, one job type held out
    assert family.median_error > job.median_error
    page = DOCS_PATH.read_text(encoding="utf-8")
    assert f"| one job | **{_pct(job.median_error)}** |" in page
    assert f"| one family | **{_pct(family.median_error)}** |" in page


def test_second_campaign_matches_the_docs(data_dir: Path) -> None:
    first = read_gavel_single_gpu(data_dir / GAVEL_FLAT)
    # the JSON reader and the flattened table agree on the first campaign
    assert read_gavel_json_single_gpu(data_dir / "profiles/gavel/simulation_throughputs.json") == (
        first
    )
    phys = read_gavel_json_single_gpu(data_dir / GAVEL_PHYSICAL)
    assert len(phys) == 77  # K80 ResNet-50 bs128 is 0 (not profiled) there
    job = cross_validate(phys, "job")
    assert job.median_error <= 0.10
    floor = statistics.median(campaign_difference(first, phys))
    assert 0 < floor < job.median_error
    page = DOCS_PATH.read_text(encoding="utf-8")
    assert f"median error of **{_pct(job.median_error)}** holding out one job" in page
    assert f"differ by {_pct(floor)} (median)" in page


def test_campaign_difference_by_hand() -> None:
    second = dict(TINY)
    second[("Other (batch size 64)", "V100-16GB")] = 3.0  # ratio 1 -> 1.5
    diffs = sorted(campaign_difference(TINY, second))
    # Net rows agree (4 pairs of 0); Other: |1.5 - 1| and |1/1.5 - 1|
    assert diffs == pytest.approx([0, 0, 0, 0, 1 / 3, 0.5])


def test_measured_speeds_match_the_catalogue(data_dir: Path) -> None:
    speeds = measured_speeds(read_gavel_single_gpu(data_dir / GAVEL_FLAT))
    for name, s in speeds.items():
        t = CATALOGUE[name]
        assert t.speed_label == "measured"
        assert t.speed == pytest.approx(s, abs=5e-4), name


def test_real_node_list_adds_up(data_dir: Path) -> None:
    path = data_dir / NODE_LIST
    with path.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    inv = read_node_inventory(path)
    assert inv.total_gpus == sum(int(r["gpu"]) for r in rows) == 6212
    assert sum(inv.nodes.values()) + inv.gpuless_nodes == len(rows) == 1213
    r = check_openb_types(path, data_dir / POD_LIST)
    assert r.pods == 4008 and r.gpu_pods == 3408
    assert r.unplaceable == {}  # every accepted type exists in the node list
    assert r.too_large == {}  # 8-GPU nodes exist (G2, V100-32GB)
    assert set(inv.gpus) == {"A10", "G2", "G3", "P100", "T4", "V100-16GB", "V100-32GB"}
