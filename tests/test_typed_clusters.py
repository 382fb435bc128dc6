"""Typed cluster presets (ddl_gym/typed_clusters.py): well formed, found by
name, and openb's node list run with typed traces: no job on a type it did
not accept, GPU-hours per type adding up, and a job no accepted type can
hold refused before the run, naming its row."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from ddl_gym.baselines import make_policy  # pyright: ignore[reportMissingImports]

from ddl_gym.engine import Engine, simulate
from ddl_gym.fidelity.hardware import DEFAULT_EFFICIENCY
from ddl_gym.fidelity.links import INTRA
from ddl_gym.gpu_types import get_gpu_type
from ddl_gym.topology import Cluster, get_cluster
from ddl_gym.traces import Trace, TraceError, TraceWarning
from ddl_gym.traces.openb_types import NODE_LIST, read_node_inventory
from ddl_gym.traces.schema import make_trace
from ddl_gym.typed_clusters import (
    OPENB_ASSUMED_SPEED,
    TYPED_CLUSTER_NAMES,
    gavel_cluster,
    generations_cluster,
    intra_link,
    openb_cluster,
)

POLICIES = ("fifo", "tiresias", "gandiva", "dally-1-2")


# -- the fixed presets ---------------------------------------------------------------
def _per_type(c: Cluster) -> dict[str, int]:
    return dict(zip(c.type_names, c.type_capacities(), strict=True))


def _racks_uniform(c: Cluster) -> bool:
    S = c.servers_per_rack
    return all(len(set(c.server_kind[r * S : (r + 1) * S])) == 1 for r in range(c.racks))


def test_gavel_preset_has_36_of_each_type_a_rack_each():
    c = get_cluster("gavel-kpv")
    assert _per_type(c) == {"K80": 36, "P100": 36, "V100-16GB": 36}
    assert (c.racks, c.servers_per_rack, c.gpus_per_server, c.num_gpus) == (3, 9, 4, 108)
    assert _racks_uniform(c)
    assert "36:36:36" in c.description and "assumed" in c.description
    assert get_cluster("gavel-kpv") is c  # built once
    assert _per_type(gavel_cluster(gpus_per_type=8)) == {"K80": 8, "P100": 8, "V100-16GB": 8}
    with pytest.raises(ValueError, match="multiple of gpus_per_server"):
        gavel_cluster(gpus_per_type=10)


def test_generations_preset_is_8_gpu_servers_one_generation_per_rack():
    c = get_cluster("v100-a100-h100")
    assert _per_type(c) == {"V100-32GB": 128, "A100-80GB": 128, "H100": 128}
    assert (c.racks, c.servers_per_rack, c.gpus_per_server) == (6, 8, 8)
    assert _racks_uniform(c)
    assert c.fabric.name == "a100_nvlink_ib"
    assert _per_type(generations_cluster(racks_per_type=1, servers_per_rack=2)) == {
        "V100-32GB": 16,
        "A100-80GB": 16,
        "H100": 16,
    }


@pytest.mark.parametrize("name", ["gavel-kpv", "v100-a100-h100"])
def test_gpu_links_are_the_datasheet_class_times_the_default_efficiency(name):
    c = get_cluster(name)
    for kind in c.gpu_kinds:
        t = get_gpu_type(kind.name)
        assert t.link is not None and t.link_gbs is not None
        cls = INTRA[t.link.lower()]
        # the catalogue's link_gbs is per direction for PCIe, both directions for NVLink
        per_direction = t.link_gbs / (2 if t.link.startswith("NVLink") else 1)
        assert cls.bandwidth == pytest.approx(per_direction * 1e9)
        assert kind.gpu_link is not None
        assert kind.gpu_link.bandwidth == pytest.approx(cls.bandwidth * DEFAULT_EFFICIENCY)
        assert kind.gpu_link.latency == cls.latency
        assert kind.speed is None  # every type has catalogue speeds
    assert "efficiency 0.25" in c.description


def test_a_type_without_a_catalogue_link_uses_the_fabric_one():
    assert intra_link("G2") is None
    with pytest.raises(ValueError, match="efficiency"):
        intra_link("K80", efficiency=0.0)


def test_unknown_cluster_lists_the_typed_presets_too():
    with pytest.raises(ValueError, match="known clusters: .*gavel-kpv, v100-a100-h100, openb"):
        get_cluster("no-such-cluster")
    assert TYPED_CLUSTER_NAMES == ("gavel-kpv", "v100-a100-h100", "openb")


# -- openb -----------------------------------------------------------------------------
def test_openb_from_a_small_node_list(tmp_path):
    """Racks of one type in node-list order, padded; GPU-less nodes left out."""
    path = tmp_path / "nodes.csv"
    rows = ["sn,cpu_milli,memory_mib,gpu,model"]
    rows += [f"n{i},1,1,2,P100" for i in range(3)]
    rows += ["c0,1,1,0,", "v0,1,1,8,V100M32", "g0,1,1,8,G2", "n3,1,1,1,P100"]
    path.write_text("\n".join(rows) + "\n")
    c = openb_cluster(path, rack_nodes=2)
    assert c.type_names == ("P100", "V100-32GB", "G2")  # catalogue order
    assert (c.racks, c.servers_per_rack, c.gpus_per_server) == (4, 2, 8)
    assert c.server_gpus == (2, 2, 2, 1, 8, 0, 8, 0)
    assert c.server_kind == (0, 0, 0, 0, 1, 1, 2, 2)
    assert _per_type(c) == {"P100": 7, "V100-32GB": 8, "G2": 8}
    assert c.gpu_kinds[2].speed == OPENB_ASSUMED_SPEED["G2"]
    assert "assumed" in c.description and "G2 1" in c.description
    with pytest.raises(ValueError, match="G2 has no speed"):
        openb_cluster(path, assumed_speed={})
    bad = tmp_path / "bad.csv"
    bad.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,2,P100\nn1,1,1,2,X9\n")
    with pytest.raises(TraceError, match=r"row 2.*'model'.*unknown GPU type 'X9'"):
        openb_cluster(bad)


@pytest.fixture(scope="module")
def openb(data_dir) -> Cluster:
    path = data_dir / NODE_LIST
    if not path.is_file():
        pytest.skip(f"no {path}")
    return get_cluster("openb")


def test_openb_gpus_per_type_match_the_node_list(openb, data_dir):
    inv = read_node_inventory(data_dir / NODE_LIST)
    assert _per_type(openb) == inv.gpus
    nodes = dict.fromkeys(inv.nodes, 0)
    largest = dict.fromkeys(inv.nodes, 0)
    for k, g in zip(openb.server_kind, openb.capacities(), strict=True):
        name = openb.type_names[k]
        nodes[name] += g > 0
        largest[name] = max(largest[name], g)
    assert nodes == inv.nodes
    assert largest == inv.max_per_node
    assert openb.num_gpus == inv.total_gpus == 6212
    assert _racks_uniform(openb)
    assert openb.servers_per_rack == 16
    # each type's racks: ceil(nodes / 16)
    assert openb.racks == sum(math.ceil(n / 16) for n in inv.nodes.values())


def test_openb_is_read_from_the_data_dir_named(monkeypatch, tmp_path):
    monkeypatch.setenv("DDL_GYM_DATA", str(tmp_path))
    with pytest.raises(ValueError, match="openb_node_list_gpu_node.csv.*ddl-gym data fetch"):
        get_cluster("openb")
    monkeypatch.setenv("DDL_GYM_DATA", str(tmp_path / "absent"))
    with pytest.raises(ValueError, match="data dir"):
        get_cluster("openb")


MODELS = ("resnet50", "resnet18", "vgg11", "bert_large", "transformer", "lstm_lm")


def random_typed_trace(cluster: Cluster, seed: int, n: int = 120) -> Trace:
    """Jobs of 1-8 GPUs accepting random sets of the cluster's types (one
    in five any type); half draw only from the three smallest types, so
    that jobs queue there while other types sit free."""
    rng = np.random.default_rng(seed)
    names = list(cluster.type_names)
    cap = _per_type(cluster)
    small = sorted(names, key=lambda x: cap[x])[:3]
    rows, t = [], 0.0
    for i in range(n):
        gpus = int(rng.integers(1, 9))
        pool = small if rng.random() < 0.5 else names
        accepted = [str(x) for x in rng.permutation(pool)[: int(rng.integers(1, len(pool) + 1))]]
        while max(cap[a] for a in accepted) < gpus:  # some accepted type can hold it
            accepted.append(str(rng.choice(names)))
        t += float(rng.exponential(10.0))
        rows.append(
            {
                "job_id": f"j{i}",
                "arrival_s": t,
                "gpus": gpus,
                "model": str(rng.choice(MODELS)),
                "iterations": float(rng.integers(2_000, 200_000)),
                "iter_time_s": 0.2,
                "gpu_types": "" if rng.random() < 0.2 else "|".join(sorted(set(accepted))),
            }
        )
    return make_trace(f"typed-{seed}", pd.DataFrame(rows), None)


def check_typed_result(trace: Trace, cluster: Cluster, result) -> None:
    accepted = dict(zip(trace.jobs["job_id"], trace.jobs["gpu_types"], strict=True))
    type_of_server = [cluster.type_names[k] for k in cluster.server_kind]
    held = dict.fromkeys(cluster.type_names, 0.0)
    p = result.placements
    assert len(p) > 0
    for job, server, gpus, start, end in zip(
        p["job_id"], p["server"], p["gpus"], p["start_s"], p["end_s"], strict=True
    ):
        t = type_of_server[server]
        assert accepted[job] == "" or t in accepted[job].split("|"), (job, t, accepted[job])
        assert gpus <= cluster.capacities()[server]
        held[t] += gpus * (end - start)
    jobs = result.jobs
    assert (jobs["gpu_type"] != "mixed").all()  # mix_types is off
    s = result.summary
    for name in cluster.type_names:
        assert s[f"gpu_h_{name}"] == pytest.approx(held[name] / 3600, rel=1e-9, abs=1e-9)
    total = sum(s[f"gpu_h_{name}"] for name in cluster.type_names)
    assert total == pytest.approx(jobs["gpu_time_s"].sum() / 3600, rel=1e-9)
    assert s["completed"] == len(trace.jobs)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_openb_runs_every_job_on_an_accepted_type_and_gpu_hours_add_up(openb, seed):
    trace = random_typed_trace(openb, seed)
    for name in POLICIES:
        result = simulate(trace, openb, make_policy(name), record_placements=True)
        check_typed_result(trace, openb, result)


def test_same_seed_same_typed_result(openb):
    trace = random_typed_trace(openb, 5, n=60)
    a = simulate(trace, openb, make_policy("tiresias"), record_placements=True)
    b = simulate(trace, openb, make_policy("tiresias"), record_placements=True)
    pd.testing.assert_frame_equal(a.jobs, b.jobs)
    assert a.summary == b.summary


def test_a_job_no_accepted_type_can_hold_is_refused_before_the_run(openb):
    rows = [
        ("a", 0.0, 1, "resnet50", 100.0, 0.1, ""),
        ("b", 1.0, 4, "resnet50", 100.0, 0.1, "A10"),  # openb has 2 A10 GPUs
    ]
    cols = ["job_id", "arrival_s", "gpus", "model", "iterations", "iter_time_s", "gpu_types"]
    trace = make_trace("refused", pd.DataFrame(rows, columns=cols), None)
    with pytest.raises(TraceError, match=r"row 2 .*job_id 'b'.*4 GPUs.*\(A10\) hold only 2"):
        Engine(trace, openb)


def test_gavel_and_generations_presets_run_typed_traces():
    for name in ("gavel-kpv", "v100-a100-h100"):
        cluster = get_cluster(name)
        trace = random_typed_trace(cluster, 7, n=60)
        for policy in ("fifo", "gandiva"):
            result = simulate(trace, cluster, make_policy(policy), record_placements=True)
            check_typed_result(trace, cluster, result)


# -- openb's own typed pod list (not in the developers' data dir: skips) ----------------
GPUSPEC = "traces/alibaba_openb/openb_pod_list_gpuspec33.csv"


def test_openb_gpuspec_pods_run_only_on_types_they_accept(openb, data_dir):
    path = data_dir / GPUSPEC
    if not path.is_file():
        pytest.skip(f"no {path} (`ddl-gym data fetch` downloads it)")
    from ddl_gym.traces.alibaba import load_alibaba

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        trace = load_alibaba(path)
    assert (trace.jobs["gpu_types"] != "").any()
    result = simulate(trace, openb, make_policy("fifo"), record_placements=True)
    check_typed_result(trace, openb, result)


def _docs_row(name: str) -> str:
    from pathlib import Path

    page = (Path(__file__).parents[1] / "docs" / "model.md").read_text(encoding="utf-8")
    (row,) = [line for line in page.splitlines() if line.startswith(f"| `{name}` |")]
    return row


def _counts_text(c: Cluster) -> list[str]:
    return [f"{c.num_gpus:,}:", *(f"{g:,} {n}" for n, g in _per_type(c).items())]


@pytest.mark.parametrize("name", ["gavel-kpv", "v100-a100-h100"])
def test_docs_presets_table_states_the_gpu_counts(name):
    row = _docs_row(name)
    c = get_cluster(name)
    gpus = row.split("|")[2]
    assert f"{c.num_gpus:,}:" in gpus and c.fabric.name in row
    for n, g in _per_type(c).items():
        assert f"{g} {n}" in gpus or f"{g} each" in gpus, (n, g)


def test_docs_openb_row_states_its_gpu_counts(openb):
    row = _docs_row("openb")
    for text in _counts_text(openb):
        assert text in row, text
    assert f"{openb.racks} racks of {openb.servers_per_rack}" in row
