"""The Alibaba openb adapter's GPU types: ``gpu_spec`` -> ``gpu_types``."""

from __future__ import annotations

import warnings

import pytest

from ddl_gym.traces import TraceError, TraceWarning
from ddl_gym.traces.alibaba import load_alibaba
from ddl_gym.traces.openb_types import POD_LIST, parse_gpu_spec, read_pod_types

HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)
GPUSPEC = "traces/alibaba_openb/openb_pod_list_gpuspec33.csv"


def _write(tmp_path, rows: list[str]):
    path = tmp_path / "openb_pod_list_x.csv"
    path.write_text(HEADER + "".join(r + "\n" for r in rows))
    return path


def _load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        return load_alibaba(path, **kw)


def test_gpu_spec_becomes_sorted_catalogue_names(tmp_path):
    path = _write(
        tmp_path,
        [
            "p0,1,1,1,1000,V100M32|V100M16,LS,Running,0,100,0",
            "p1,1,1,0,0,,LS,Running,1,100,1",  # CPU-only: skipped
            "p2,1,1,2,1000,,LS,Running,2,100,2",  # any type
            "p3,1,1,1,1000,nan,LS,Running,3,100,3",  # the README's "no constraint"
            "p4,1,1,4,1000,G2,LS,Running,4,100,4",
            "p5,1,1,1,1000,T4|P100|T4,LS,Running,5,100,5",
        ],
    )
    jobs = _load(path).jobs
    assert jobs["job_id"].tolist() == ["p0", "p2", "p3", "p4", "p5"]
    assert jobs["gpu_types"].tolist() == ["V100-16GB|V100-32GB", "", "", "G2", "P100|T4"]
    assert "gpu_types" not in _load(path, gpu_types=False).jobs


def test_a_list_naming_no_model_keeps_its_trace_unchanged(tmp_path):
    path = _write(tmp_path, ["p0,1,1,1,1000,,LS,Running,0,100,0"])
    assert "gpu_types" not in _load(path).jobs
    assert _load(path, gpu_types=True).jobs["gpu_types"].tolist() == [""]


def test_an_unknown_model_names_file_row_and_field(tmp_path):
    path = _write(
        tmp_path,
        [
            "p0,1,1,1,1000,T4,LS,Running,0,100,0",
            "p1,1,1,1,1000,T4|K9,LS,Running,1,100,1",
        ],
    )
    with pytest.raises(TraceError, match=r"openb_pod_list_x.csv.*row 2.*'gpu_spec'.*'K9'"):
        _load(path)
    path = _write(tmp_path, ["p0,1,1,1,1000,T4||P100,LS,Running,0,100,0"])
    with pytest.raises(TraceError, match=r"row 1.*'gpu_spec'.*malformed"):
        _load(path)


def test_the_dev_cut_has_no_gpu_types_column(data_dir):
    path = data_dir / POD_LIST
    if not path.is_file():
        pytest.skip(f"no {path}")
    assert "gpu_types" not in _load(path).jobs


def test_gpuspec33_pods_keep_their_accepted_types(data_dir):
    """openb's gpuspec33 list (a third of the GPU pods name models): each
    kept pod's gpu_types is its gpu_spec read by the checked reader. Not in
    the developers' data dir: `ddl-gym data fetch` downloads it."""
    path = data_dir / GPUSPEC
    if not path.is_file():
        pytest.skip(f"no {path} (`ddl-gym data fetch` downloads it)")
    jobs = _load(path).jobs
    specs = {p.name: p.accepted for p in read_pod_types(path)}
    for job, cell in zip(jobs["job_id"], jobs["gpu_types"], strict=True):
        assert cell == "|".join(sorted(specs[job]))
    named = (jobs["gpu_types"] != "").mean()
    assert 0.3 < named < 0.4, named
    assert parse_gpu_spec("V100M16|V100M32") == frozenset({"V100-16GB", "V100-32GB"})
