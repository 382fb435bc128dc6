"""The LLM per-iteration model (ddl_gym/llm): layouts, shapes, hand-computed
iteration times and the calibration table (docs/model.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddl_gym.llm import (
    Layout,
    LLMParams,
    TransformerShape,
    get_shape,
    iteration_time,
    links_of,
    parse_layout,
)
from ddl_gym.llm.calibration import PUBLISHED, errors, fit, fitted_rows, report_table
from ddl_gym.perf import Shape
from ddl_gym.topology import Fabric, Link

DOCS = Path(__file__).resolve().parents[1] / "docs" / "model.md"  # the calibration table

# a fabric of round numbers and no latency: every term is bytes / bandwidth
FLAT = Fabric("flat", gpu_link=Link(100e9, 0.0), nic=Link(200e9, 0.0), uplink=Link(200e9, 0.0))
TINY = TransformerShape("tiny", layers=4, hidden=1024, heads=8, seq_len=1024, vocab=32000,
                        ffn=4096)  # fmt: skip
EXACT = LLMParams(mfu=0.5, h_half=0.0, link_eff=1.0)  # rate = 50 TFLOP/s on a 100 TFLOP/s GPU


def test_layout_validation_names_the_field():
    with pytest.raises(ValueError, match="tp must be a positive integer"):
        Layout(tp=0)
    with pytest.raises(ValueError, match="zero must be a ZeRO stage"):
        Layout(zero=4)
    with pytest.raises(ValueError, match="micro_batches"):
        Layout(micro_batches=0)
    lay = parse_layout("tp8-pp4-dp16")
    assert (lay.tp, lay.pp, lay.dp, lay.micro_batches, lay.gpus) == (8, 4, 16, 4, 512)
    assert parse_layout("dp4-tp2-z3-m8-b2") == Layout(2, 1, 4, 3, 8, 2)
    assert parse_layout(Layout(2, 1, 4, 3, 8, 2).spec()) == Layout(2, 1, 4, 3, 8, 2)
    with pytest.raises(ValueError, match="but the job asks for 64"):
        parse_layout("tp8-pp4-dp16", gpus=64)
    with pytest.raises(ValueError, match="part 'x3'"):
        parse_layout("tp8-x3")
    with pytest.raises(ValueError, match="tp given twice"):
        parse_layout("tp8-tp4")


def test_shapes_match_the_papers_parameter_counts():
    assert get_shape("llama2_7b").params == 6_738_415_616  # Llama 2 7B, as released
    assert round(get_shape("llama2_70b").params / 1e9, 1) == 69.0
    assert round(get_shape("gpt3_175b").params / 1e9, 1) == 174.6
    for name, billions in (("megatron_1.7b", 1.7), ("megatron_18.4b", 18.4),
                           ("megatron_145.6b", 145.6), ("megatron_1008b", 1008.0)):  # fmt: skip
        assert round(get_shape(name).params / 1e9, 1) == billions


def test_flops_equal_narayanan_formula():
    # 96 B s l h^2 (1 + s / 6h + V / 16 l h), Narayanan et al. 2021, section 5.1
    m = get_shape("megatron_145.6b")
    B, s, n_l, h, V = 2304, m.seq_len, m.layers, m.hidden, m.vocab
    closed = 96 * B * s * n_l * h**2 * (1 + s / (6 * h) + V / (16 * n_l * h))
    assert m.iteration_flops(B) == pytest.approx(closed, rel=1e-12)


def test_three_d_job_equals_hand_computation():
    # tp2 x pp2 x dp2 on two 4-GPU servers of one rack: a replica (tp*pp = 4)
    # fills a server, so TP and PP stay on the GPU link and DP crosses the NIC.
    lay = Layout(tp=2, pp=2, dp=2, micro_batches=4, micro_batch_size=1)
    links = links_of(FLAT, gpus_per_server=4)
    it = iteration_time(TINY, lay, Shape(8, 4, 2, 1), links, 100e12, EXACT)
    layer_fwd = 2 * 1024 * (12 * 1024**2) + 4 * 1024**2 * 1024  # 2 b s 12h^2 + 4 b s^2 h
    logits_fwd = 2 * 1024 * 1024 * 32000  # 2 b s h V
    stage = 4 * 2 * layer_fwd + 3 * logits_fwd  # 2 layers, recomputed; logits on the last
    t_mb = stage / 2 / 50e12  # over tp = 2 GPUs at 50 TFLOP/s
    act = 1024 * 1024 * 2  # b s h fp16
    t_tp = 2 * 6 * (2 * (1 / 2) * act / 100e9)  # 2 layers x 6 all-reduces, ring of 2
    t_pp = 2 * (act / 100e9)  # forward + backward send inside the server
    layer_params = 12 * 1024**2 + 13 * 1024
    embed = 32000 * 1024 + 1024 * 1024 + 2 * 1024
    shard = (2 * layer_params + embed) / 2 * 2  # stage params / tp, 2 bytes
    t_dp = 2 * (1 / 2) * 4 * shard / 200e9  # 4 DP groups share each server's NIC
    assert it.compute == pytest.approx(4 * t_mb, rel=1e-12)
    assert it.bubble == pytest.approx(1 * t_mb, rel=1e-12)
    assert it.tp == pytest.approx(5 * t_tp, rel=1e-12)  # m + pp - 1 = 5 slots
    assert it.pp == pytest.approx(5 * t_pp, rel=1e-12)
    assert it.dp == pytest.approx(t_dp, rel=1e-12)
    assert it.total == pytest.approx(5 * (t_mb + t_tp + t_pp) + t_dp, rel=1e-12)


def test_tp_group_split_across_servers_is_slower_by_the_links_ratio():
    lay = Layout(tp=8, pp=1, dp=1)
    links = links_of(FLAT, gpus_per_server=8)
    inside = iteration_time(TINY, lay, Shape(8, 8, 1, 1), links, 100e12, EXACT)
    split = iteration_time(TINY, lay, Shape(8, 4, 2, 1), links, 100e12, EXACT)
    assert split.compute == inside.compute
    # a GPU's NVSwitch port (100 GB/s) against its rail of the NIC (200 / 8)
    assert split.tp / inside.tp == pytest.approx(100e9 / (200e9 / 8), rel=1e-12)


def test_a_smaller_uplink_share_slows_a_cross_rack_job():
    lay = Layout(tp=2, pp=2, dp=4, micro_batches=4)
    shape = Shape(16, 4, 2, 2)
    fast = iteration_time(TINY, lay, shape, links_of(FLAT, 4), 100e12, EXACT)
    slow = iteration_time(TINY, lay, shape, links_of(FLAT, 4, uplink_bw=50e9), 100e12, EXACT)
    assert slow.dp > fast.dp and slow.compute == fast.compute
    # DP's inter-server ring is paced by the uplink share: 4x less bandwidth
    assert slow.dp == pytest.approx(4 * fast.dp, rel=1e-12)


def test_zero3_moves_one_and_a_half_times_and_overlaps():
    base = Layout(tp=1, pp=1, dp=2, micro_batches=1)
    links = links_of(FLAT, gpus_per_server=1)
    no_overlap = LLMParams(mfu=0.5, h_half=0.0, link_eff=1.0, dp_overlap=0.0)
    plain = iteration_time(TINY, base, Shape(2, 1, 2, 1), links, 100e12, no_overlap)
    z3 = iteration_time(
        TINY, Layout(1, 1, 2, 3, 1, 1), Shape(2, 1, 2, 1), links, 100e12, no_overlap
    )
    assert z3.dp == pytest.approx(1.5 * plain.dp, rel=1e-12)
    hidden = iteration_time(TINY, Layout(1, 1, 2, 3, 1, 1), Shape(2, 1, 2, 1), links, 100e12, EXACT)
    assert hidden.dp == max(0.0, z3.dp - z3.compute)


def test_calibration_within_15_percent_and_fit_reproduces_defaults():
    errs = errors(LLMParams(), fitted_rows())
    assert len(errs) >= 6 and max(abs(e) for e in errs) < 0.15
    assert fit() == LLMParams()
    assert len(PUBLISHED) == len(fitted_rows()) + 6  # the six ZeRO-3 rows, reported


def test_docs_table_is_the_codes():
    assert report_table() in DOCS.read_text()
