"""The normalised card from one ``evaluate`` call, against the heuristics'
reference records shipped with the package; the statistics in core numpy
(rliable's numbers); ``ddl-gym benchmark reference --check``."""

from __future__ import annotations

import argparse
import copy
import itertools

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from ddl_gym.benchmarks import evaluate, get_suite, stats
from ddl_gym.benchmarks.evaluate import Scores
from ddl_gym.benchmarks.reference import (
    Reference,
    ReferenceError,
    SplitReference,
    differences,
    load_reference,
    reference_path,
)

SUITE = "ddl-gym-v1"


@pytest.fixture(scope="module")
def quick_card(request):
    """srtf (an oracle: not one of the suite's heuristics) on the quick
    sub-suite, and its card, from one call."""
    request.getfixturevalue("data_dir")
    scores = evaluate("srtf", suite=SUITE, quick=True, progress=False)
    return scores, scores.card()


def _by_hand(scores: Scores, reference: SplitReference, heuristics) -> dict:
    """The card's numbers computed again from the records, loop by loop."""
    ref = pd.DataFrame(reference.records)
    out: dict = {"cases": {}, "P": [], "B": [], "Q": []}
    for case in dict.fromkeys(scores.records["case"]):
        mine = scores.records[scores.records["case"] == case].sort_values("seed")
        seeds = list(mine["seed"])
        means = {}
        for h in heuristics:
            rows = ref[(ref["policy"] == h) & (ref["case"] == case)].set_index("seed")
            means[h] = sum(rows.loc[s, "mean_jct_s"] for s in seeds) / len(seeds)
        best = min(means, key=means.get)
        best_runs = ref[(ref["policy"] == best) & (ref["case"] == case)].set_index("seed")
        p = [float(v) for v in mine["mean_jct_s"]]
        b = [float(best_runs.loc[s, "mean_jct_s"]) for s in seeds]
        norm_p = [v / means[best] for v in p]
        norm_b = [v / means[best] for v in b]
        wins = sum((x < y) + 0.5 * (x == y) for x, y in itertools.product(norm_p, norm_b))
        bound = [reference.bounds[(case, s)] for s in seeds] if reference.bounds else None
        entry = {
            "best": best,
            "normalised": (sum(p) / len(p)) / means[best],
            "p_improvement": wins / (len(p) * len(b)),
        }
        if bound is not None:
            mb = sum(bound) / len(bound)
            entry["position"] = (sum(p) / len(p) - mb) / (means[best] - mb)
            out["Q"].append([(x - y) / (means[best] - mb) for x, y in zip(p, bound, strict=True)])
        out["cases"][case] = entry
        out["P"].append(norm_p)
        out["B"].append(norm_b)
    return out


def test_card_from_one_call_matches_the_records(quick_card):
    scores, card = quick_card
    suite = get_suite(SUITE)
    ref = load_reference(SUITE).split("quick")
    hand = _by_hand(scores, ref, suite.heuristics)
    assert list(card.cases["case"]) == [c.name for c in suite.quick]
    for _, row in card.cases.iterrows():
        want = hand["cases"][row["case"]]
        assert row["best"] == want["best"] and row["best"] in suite.heuristics
        assert row["normalised"] == pytest.approx(want["normalised"], rel=1e-12)
        assert row["p_improvement"] == pytest.approx(want["p_improvement"], abs=1e-12)
        if "position" in want:
            assert row["position"] == pytest.approx(want["position"], rel=1e-9)
    flat = [v for col in hand["P"] for v in col]
    agg = card.aggregates["value"]
    assert agg["IQM"] == pytest.approx(scipy.stats.trim_mean(flat, 0.25), rel=1e-12)
    assert agg["mean"] == pytest.approx(np.mean(flat), rel=1e-12)
    case_means = [np.mean(col) for col in hand["P"]]
    assert agg["median"] == pytest.approx(np.median(case_means), rel=1e-12)
    assert agg["optimality gap"] == pytest.approx(np.mean([max(v - 1, 0) for v in flat]), abs=1e-12)
    p_cases = [hand["cases"][c]["p_improvement"] for c in hand["cases"]]
    assert agg["P(improvement)"] == pytest.approx(np.mean(p_cases), abs=1e-12)
    if hand["Q"]:
        q = [v for col in hand["Q"] for v in col]
        assert agg["position mean"] == pytest.approx(np.mean(q), rel=1e-9)
    # every interval holds its point; the families partition the cases
    a = card.aggregates
    assert ((a["lo"] <= a["value"] + 1e-12) & (a["value"] <= a["hi"] + 1e-12)).all()
    assert card.families["cases"].sum() == len(card.cases)
    assert card.reps == stats.REPS


def test_card_text_shows_hours_provenance_and_citation(quick_card):
    scores, card = quick_card
    text = str(card)
    ref = load_reference(SUITE)
    assert "mean JCT (h)" in text and "IQM" in text and "P(improvement)" in text
    assert ref.suite_hash in text
    assert ref.split("quick").provenance["commit"] in text
    assert "cite:" in text
    for case in card.cases["case"]:
        assert case in text
    hours = card.cases["mean_jct_s"].iloc[0] / 3600
    assert f"{hours:.3f}" in text


def test_card_never_returns_raw_metrics(quick_card):
    scores, _ = quick_card
    other = Scores(scores.policy, SUITE, "train", scores.records)
    with pytest.raises(ReferenceError, match="benchmark reference --suite ddl-gym-v1"):
        other.card()
    with pytest.raises(ReferenceError, match="no reference records"):
        Scores(scores.policy, "ddl-gym-v1", "quick", scores.records).card(
            reference="/nonexistent/ref.json"
        )
    raw = scores.metrics()
    assert list(raw["case"]) == list(scores.card().cases["case"])
    assert "mean_jct_s" in raw and "normalised" not in raw


def test_card_refuses_records_of_other_inputs(quick_card):
    scores, _ = quick_card
    records = scores.records.copy()
    records["provenance"] = [
        {**p, "inputs": {k: "0" * 64 for k in p["inputs"]}} for p in records["provenance"]
    ]
    tampered = Scores(scores.policy, SUITE, "quick", records)
    tiresias_case = get_suite(SUITE).quick[0].name
    with pytest.raises(ReferenceError, match=tiresias_case):
        tampered.card()


def test_the_best_heuristic_comes_from_the_given_set():
    """The baseline is the best of the heuristics passed (the suite's), not
    of every policy in the reference."""
    rows = []
    for policy, jct in (("a", 10.0), ("b", 5.0), ("oracle", 1.0)):
        for seed in (0, 1):
            rows.append(
                {"policy": policy, "case": "c", "seed": seed, "mean_jct_s": jct + seed,
                 "clairvoyant": policy == "oracle", "family": "f"}
            )  # fmt: skip
    reference = pd.DataFrame(rows)
    mine = pd.DataFrame(
        [{"case": "c", "seed": s, "mean_jct_s": 8.0, "family": "f"} for s in (0, 1)]
    )
    only_a = stats.normalised_card(mine, reference, ["a"], reps=50)
    assert only_a["cases"]["best"].iloc[0] == "a"
    assert only_a["cases"]["normalised"].iloc[0] == pytest.approx(8.0 / 10.5)
    both = stats.normalised_card(mine, reference, ["a", "b", "oracle"], reps=50)
    assert both["cases"]["best"].iloc[0] == "b"  # the oracle is clairvoyant: never a baseline
    with pytest.raises(ValueError, match="no reference record of a on c seed"):
        stats.normalised_card(mine.assign(seed=[0, 7]), reference, ["a"], reps=50)


def test_position_between_the_bound_and_the_best_heuristic():
    reference = pd.DataFrame(
        [{"policy": "h", "case": "c", "seed": s, "mean_jct_s": 10.0, "clairvoyant": False}
         for s in (0, 1)]
    )  # fmt: skip
    bounds = {("c", 0): 4.0, ("c", 1): 4.0}
    at = {"case": "c", "family": "f"}
    for jct, position in ((10.0, 1.0), (4.0, 0.0), (7.0, 0.5)):
        mine = pd.DataFrame([{**at, "seed": s, "mean_jct_s": jct} for s in (0, 1)])
        card = stats.normalised_card(mine, reference, ["h"], bounds, reps=50)
        assert card["cases"]["position"].iloc[0] == pytest.approx(position)
        assert card["aggregates"].loc["position mean", "value"] == pytest.approx(position)
    no_bound = stats.normalised_card(mine, reference, ["h"], None, reps=50)
    assert "position" not in no_bound["cases"]
    assert "position mean" not in no_bound["aggregates"].index


# -- statistics in core: rliable's numbers -------------------------------------------------------
def test_core_statistics_equal_rliables():
    metrics = pytest.importorskip("rliable.metrics")
    rng = np.random.default_rng(3)
    for shape in ((3, 11), (10, 5), (1, 4)):
        x = rng.lognormal(0.0, 0.4, size=shape)
        y = rng.lognormal(0.1, 0.4, size=shape)
        y[:, 0] = x[:, 0]  # a tied case
        assert stats.iqm(x) == float(metrics.aggregate_iqm(x))
        assert stats.mean(x) == float(metrics.aggregate_mean(x))
        assert stats.median(x) == float(metrics.aggregate_median(x))
        assert stats.optimality_gap(x) == float(metrics.aggregate_optimality_gap(-x, gamma=-1))
        got = stats.probability_of_improvement(x, y)
        assert got == float(metrics.probability_of_improvement(-x, -y))


def test_stats_import_without_rliable():
    """``ddl_gym.benchmarks.stats`` imports no optional package."""
    import subprocess
    import sys

    code = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] in ('rliable', 'matplotlib', 'torch'):\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import ddl_gym.benchmarks.stats, ddl_gym.benchmarks.reference\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the reference records -----------------------------------------------------------------------
def test_shipped_reference_round_trips():
    ref = load_reference(SUITE)
    assert ref.path == reference_path(SUITE)
    assert set(ref.splits) >= {"quick"}
    assert tuple(ref.heuristics) == get_suite(SUITE).heuristics
    for name, part in ref.splits.items():
        back = Reference.from_json(ref.to_json()).splits[name]
        assert back.records == part.records and back.bounds == part.bounds
        keys = {(r["policy"], r["case"], r["seed"]) for r in part.records}
        assert len(keys) == len(part.records)


def test_differences_name_the_policy_case_and_seed():
    stored = load_reference(SUITE)
    fresh = copy.deepcopy(stored)
    quick = fresh.splits["quick"]
    assert differences(stored, fresh) == []
    quick.records[0]["cpu_s"] = 123.0  # ignored
    quick.records[0]["provenance"]["commit"] = "f" * 40  # ignored
    assert differences(stored, fresh) == []
    r = quick.records[1]
    r["mean_jct_s"] *= 1 + 1e-12  # a last-bits move (another numpy/libm): not a difference
    assert differences(stored, fresh) == []
    r["mean_jct_s"] *= 1 + 1e-6
    diff = differences(stored, fresh)
    assert len(diff) == 1
    assert f"({r['policy']}, {r['case']}, seed {r['seed']})" in diff[0] and "mean_jct_s" in diff[0]


def test_reference_check_passes_on_quick(data_dir, capsys):
    from ddl_gym.cli.benchmark import register

    p = argparse.ArgumentParser()
    register(p.add_subparsers(dest="command"))
    argv = ["benchmark", "reference", "--suite", SUITE, "--split", "quick", "--check"]
    args = p.parse_args([*argv, "--no-progress"])
    assert args.func(args) == 0, capsys.readouterr().out
    assert "rerun equal" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["ddl-gym-v1", "ddl-gym-v2", "ddl-gym-v3"])
def test_shipped_reference_fits_its_suite(name):
    """A changed suite (its hash) needs its reference regenerated:
    ``ddl-gym benchmark reference --suite NAME``."""
    if not reference_path(name).is_file():
        pytest.skip(f"no reference records shipped for {name}")
    ref = load_reference(name)  # refuses a reference made for another suite hash
    suite = get_suite(name)
    assert tuple(ref.heuristics) == suite.heuristics
    for split, part in ref.splits.items():
        cases = suite.select("test" if split == "quick" else split, quick=split == "quick")
        want = {(h, c.name, s) for h in suite.heuristics for c in cases for s in c.seeds}
        assert {(r["policy"], r["case"], r["seed"]) for r in part.records} == want, split
        assert part.provenance["suite_hash"] == ref.suite_hash
