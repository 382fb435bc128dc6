"""Models beyond the seed's: the transformer entries of the catalogue, and
adding a model with register_model(...) or a scenario file's [models] table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from ddl_gym.baselines import make_policy

from ddl_gym.engine import simulate
from ddl_gym.profiles import (
    ASSIGNABLE_MODELS,
    MODEL_NAMES,
    TRANSFORMER_MODELS,
    UnknownModelError,
    get_profile,
    model_names,
    register_model,
)
from ddl_gym.scenarios import ScenarioError, load_scenario_file, scenario_from_dict, to_toml
from ddl_gym.traces import Trace, load_trace, synthetic_trace

ROOT = Path(__file__).resolve().parents[1]

# the catalogue before the transformer models: seeded model assignment draws
# from exactly these, so adding models never changes a trace
BEFORE_TRANSFORMERS = (
    "resnet50", "resnet18", "alexnet", "mobilenet_v3", "vgg11", "bert_large", "transformer",
    "lstm_lm", "recommendation", "a3c", "cyclegan", "bert_base", "deepspeech2", "yolov3", "ncf",
    "vgg16", "vgg19", "resnet101", "resnet152", "inception_v3", "inception_v4", "googlenet",
    "mobilenet_v2",
)  # fmt: skip


def test_transformers_are_in_the_catalogue_with_their_parameter_counts():
    assert set(TRANSFORMER_MODELS) == {
        "gpt2", "gpt2_medium", "gpt2_large", "gpt2_xl", "vit_l16", "llama2_7b",
    }  # fmt: skip
    assert MODEL_NAMES[: len(BEFORE_TRANSFORMERS)] == BEFORE_TRANSFORMERS
    assert ASSIGNABLE_MODELS == BEFORE_TRANSFORMERS
    params = {m: get_profile(m).params for m in TRANSFORMER_MODELS}
    assert params == {
        "gpt2": 124_439_808,
        "gpt2_medium": 354_823_168,
        "gpt2_large": 774_030_080,
        "gpt2_xl": 1_557_611_200,
        "vit_l16": 304_326_632,
        "llama2_7b": 6_738_415_616,
    }
    for m in TRANSFORMER_MODELS:
        p = get_profile(m)
        assert p.total_grad_bytes == 4 * p.params  # fp32 gradients
        assert p.source == "transformer-flops" and "est." in p.reference


def test_gpt2_iteration_time_by_hand():
    # 6 N + 6 n_layer n_ctx d_model FLOPs per token, 8 x 1024 tokens, V100 125 TF at 30%
    per_token = 6 * 124_439_808 + 6 * 12 * 1024 * 768
    assert get_profile("gpt2").iter_time_s == pytest.approx(per_token * 8192 / (125e12 * 0.30))
    # Llama 2 7B on A100 (312 TF at 40%), 4 x 4096 tokens: ~5.7 s
    assert get_profile("llama2_7b").iter_time_s == pytest.approx(5.73, abs=0.01)


def _trace(model: str, iter_time_s: float, n: int = 6, gpus: int | None = None) -> Trace:
    df = pd.DataFrame(
        {
            "job_id": [f"j{i}" for i in range(n)],
            "arrival_s": [60.0 * i for i in range(n)],
            "gpus": [gpus] * n if gpus else [8, 16, 4, 8, 2, 16][:n],
            "model": [model] * n,
            "iterations": [2000.0] * n,
            "iter_time_s": [iter_time_s] * n,
        }
    )
    return Trace(name="t", jobs=df)


def test_a_transformer_trace_runs_and_feels_the_network():
    # 32 GPUs: two of the seed cluster's 16-GPU racks, so the uplinks carry gradients
    trace = _trace("gpt2_xl", get_profile("gpt2_xl").iter_time_s, gpus=32)
    none = simulate(trace, "seed64", make_policy("fifo"), congestion="none").summary
    heavy = simulate(trace, "seed64", make_policy("fifo"), congestion="heavy").summary
    # the seed fabric (400 GB/s uplinks) hides its all-reduce; heavy congestion does not
    assert none["completed"] == 6 and heavy["comm_overhead"] > none["comm_overhead"] >= 0


def test_register_model_from_python(tmp_path):
    prof = register_model("test-py-llm", 1.5, params=3_000_000_000, n_tensors=200)
    assert prof.params == 3_000_000_000 and prof.n_layers == 200
    assert "test-py-llm" in model_names() and get_profile("test-py-llm") is prof
    # the same numbers again are fine (scenario files register on every load)
    assert register_model("test-py-llm", 1.5, params=3_000_000_000, n_tensors=200) is prof
    with pytest.raises(ValueError, match="other numbers"):
        register_model("test-py-llm", 2.0, params=3_000_000_000, n_tensors=200)
    with pytest.raises(ValueError, match="built-in"):
        register_model("gpt2", 0.1, params=124_439_808)
    with pytest.raises(ValueError, match="exactly one"):
        register_model("test-py-none", 0.1)
    with pytest.raises(ValueError, match="model name"):
        register_model("Bad Name", 0.1, params=10)
    with pytest.raises(ValueError, match="iter_time_s"):
        register_model("test-py-zero", 0.0, params=10)
    by_tensor = register_model("test-py-tensors", 0.2, grad_bytes=[400, 4_000_000])
    assert by_tensor.grad_bytes == (400, 4_000_000) and by_tensor.params == 1_000_100
    # a trace file may now name it
    path = tmp_path / "t.csv"
    _trace("test-py-llm", 1.5).jobs.to_csv(path, index=False)
    result = simulate(load_trace(path), "seed64", make_policy("tiresias"), congestion="heavy")
    assert result.summary["completed"] == 6


def test_unknown_model_error_says_how_to_add_one():
    with pytest.raises(UnknownModelError, match=r"register_model\(\.\.\.\) or a \[models\]"):
        get_profile("gpt5")


SCENARIO = """
name = "own-model"
trace = "synthetic"
cluster = "2x2x4"
congestion = "heavy"

[synthetic]
n_jobs = 12
max_gpus = 8
model_mix = {{ {name} = 1.0, resnet50 = 1.0 }}

[models.{name}]
iter_time_s = 0.8
params = 1_300_000_000
n_tensors = 290
reference = "my A100 measurement"
"""


def test_scenario_models_table_registers_and_round_trips(tmp_path):
    path = tmp_path / "own.toml"
    path.write_text(SCENARIO.format(name="test-toml-llm"))
    scenario, _ = load_scenario_file(path)
    assert get_profile("test-toml-llm").params == 1_300_000_000
    trace = scenario.build_trace(0)
    assert "test-toml-llm" in set(trace.jobs["model"])
    # the run's config.toml holds the table, so --config repeats the run
    again = tmp_path / "again.toml"
    again.write_text(to_toml(scenario.to_dict()))
    assert load_scenario_file(again)[0] == scenario
    # other numbers under the same name are an error naming the table
    clash = tmp_path / "clash.toml"
    clash.write_text(SCENARIO.format(name="test-toml-llm").replace("0.8", "0.9"))
    with pytest.raises(ScenarioError, match=r"\[models.test-toml-llm\].*other numbers"):
        load_scenario_file(clash)


@pytest.mark.parametrize(
    ("models", "text"),
    [
        ({"x1": {"params": 10}}, "'iter_time_s' is required"),
        ({"x2": {"iter_time_s": -1.0, "params": 10}}, "models.x2.iter_time_s"),
        ({"x3": {"iter_time_s": 1.0, "params": 10, "flops": 3}}, "unknown key(s) 'flops'"),
        ({"x4": {"iter_time_s": 1.0}}, "exactly one of params and grad_bytes"),
        ({"resnet50": {"iter_time_s": 1.0, "params": 10}}, "built-in"),
        ({"x5": 3}, "'models.x5' must be a table"),
    ],
)
def test_bad_models_tables_are_clear_errors(models, text):
    with pytest.raises(ScenarioError, match="scenario file") as err:
        scenario_from_dict({"name": "bad", "models": models}, source="scenario file")
    assert text in str(err.value)


def test_a_fresh_process_runs_a_scenario_with_its_own_model(tmp_path):
    """The CLI (and every worker process) registers the table when it reads
    the scenario: compare on 2 processes runs the model end to end."""
    path = tmp_path / "own.toml"
    path.write_text(SCENARIO.format(name="test-cli-llm"))
    proc = subprocess.run(
        [sys.executable, "-m", "ddl_gym.cli", "compare", "-s", str(path), "--policies",
         "fifo,dally", "--seeds", "0,1", "--processes", "2", "--no-save", "--no-progress"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "| " not in proc.stdout and "fifo" in proc.stdout and "dally" in proc.stdout


def test_synthetic_default_is_unchanged_by_the_new_models():
    # the default workload draws from its own model mix, not from the catalogue
    a = synthetic_trace(n_jobs=200, seed=3)
    assert not set(a.jobs["model"]) & set(TRANSFORMER_MODELS)


def test_docs_model_page_lists_every_transformer():
    text = (ROOT / "docs" / "model.md").read_text()
    for m in TRANSFORMER_MODELS:
        assert f"`{m}`" in text, m
    for section in ("What it does not model", "register_model", "[models", "iterations"):
        assert section in text, section
