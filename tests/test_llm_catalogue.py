"""LLM catalogue entries, default layouts, the synthetic Acme-like job mix and
the DGX leaf-spine presets (issue 54, docs/llm.md)."""

from __future__ import annotations

import numpy as np
import pytest
from ddl_gym.baselines import make_policy  # pyright: ignore[reportMissingImports]

from ddl_gym.engine import simulate
from ddl_gym.llm import SHAPES, Layout, parse_layout
from ddl_gym.llm.catalogue import DEFAULT_LAYOUTS, layout_for
from ddl_gym.llm.clusters import LLM_CLUSTERS, dgx_cluster
from ddl_gym.llm.workload import ACME_SEREN, llm_cluster_trace, size_distribution
from ddl_gym.profiles import LLM_MODELS, MODEL_NAMES, get_profile, model_names


def test_llm_entries_are_valid_names_with_the_shapes_parameters():
    for name in LLM_MODELS:
        assert name in model_names() and name not in MODEL_NAMES
        assert get_profile(name).params == SHAPES[name].params
    assert set(DEFAULT_LAYOUTS) == {*LLM_MODELS, "llama2_7b"}
    with pytest.raises(ValueError, match="built-in"):
        from ddl_gym.profiles import register_model

        register_model("gpt3_175b", 1.0, params=10)


def test_default_layouts():
    # Narayanan et al. 2021, Table 2: 175B on 768 GPUs, TP 8 x PP 12, batch 1536
    assert layout_for("gpt3_175b", 768) == Layout(tp=8, pp=12, dp=8, micro_batches=192)
    assert layout_for("llama2_70b", 64) == Layout(tp=8, pp=8, dp=1, micro_batches=1024)
    assert layout_for("gpt3_1.3b", 8).spec() == "tp1-pp1-dp8-m64"
    with pytest.raises(ValueError, match="not a multiple of its replica of 96"):
        layout_for("gpt3_175b", 512)
    for name, d in DEFAULT_LAYOUTS.items():  # model state (16 B/param) <= 30 GB per GPU
        assert 16 * SHAPES[name].params / (d.tp * d.pp) <= 30e9, name


def test_size_distribution_matches_the_acme_summary():
    sizes, p = size_distribution(ACME_SEREN, 512)
    assert list(sizes) == [2**k for k in range(10)]
    assert p[0] == pytest.approx(0.55) and float(p @ sizes) == pytest.approx(5.68, rel=1e-9)


def test_synthetic_trace_is_seeded_and_matches_its_targets():
    cluster = LLM_CLUSTERS["dgx_a100_1024"]
    a = llm_cluster_trace(cluster, 3000, seed=3).jobs
    b = llm_cluster_trace(cluster, 3000, seed=3).jobs
    assert a.equals(b)
    assert a["gpus"].median() == 1.0
    assert a["gpus"].mean() == pytest.approx(ACME_SEREN.mean_gpus, rel=0.15)
    assert a["duration_s"].median() == pytest.approx(ACME_SEREN.median_run_s, rel=0.15)
    assert a["gpus"].max() <= 512
    for g, text in zip(a["gpus"], a["layout"], strict=True):
        assert parse_layout(text, int(g)).gpus == g
    # offered load: the drawn GPU-seconds over the arrival span and the GPUs
    offered = float((a["gpus"] * a["duration_s"]).sum()) / (a["arrival_s"].max() * 1024)
    assert offered == pytest.approx(0.8, rel=0.1)


def test_synthetic_trace_runs_through_the_engine():
    cluster = LLM_CLUSTERS["dgx_a100_1024"]
    trace = llm_cluster_trace(cluster, 300, seed=0)
    r = simulate(trace, cluster, make_policy("tiresias"), record_series=False)
    assert r.summary["completed"] == 300
    alone = trace.jobs["duration_s"].to_numpy()
    # no job runs faster than alone at its tightest placement
    assert np.all(r.jobs["run_s"].to_numpy() >= alone * (1 - 1e-9))


def test_dgx_presets():
    c = dgx_cluster("a100", 1024)
    assert (c.racks, c.servers_per_rack, c.gpus_per_server, c.num_gpus) == (8, 16, 8, 1024)
    assert c.fabric.name == "a100_nvlink_ib" and c.fabric.oversubscription == 1.0
    c2 = LLM_CLUSTERS["dgx_a100_1024_2to1"]
    assert c2.uplink_capacity == pytest.approx(c.uplink_capacity / 2)
    assert LLM_CLUSTERS["dgx_h100_1024"].fabric.nic.bandwidth == 400e9
    with pytest.raises(ValueError, match="multiple of 128"):
        dgx_cluster("a100", 1000)
