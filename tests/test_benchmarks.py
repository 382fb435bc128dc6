"""The benchmark suite (frozen content, discriminating cases), ``evaluate`` for
every kind of policy, the statistics and the ``ddl-gym benchmark`` command.

The check that every *test* case of ``ddl-gym-v1`` discriminates runs all
heuristics on the whole test split (~2 CPU-minutes): it runs with
``--golden-full`` or ``DDL_GYM_BENCH_FULL=1``; by default the same check runs
on the quick sub-suite.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os

import numpy as np
import pandas as pd
import pytest
from ddl_gym.baselines import HEURISTICS

from ddl_gym.benchmarks import evaluate, get_suite, resolve_policy, suite_hash
from ddl_gym.benchmarks.suite import FAMILIES, SPLITS
from ddl_gym.engine import WAIT, Place
from ddl_gym.perf import Level

# Changing a case of a suite changes its hash: add a new suite version instead.
PINNED = {
    "ddl-gym-v1": "550a8aa77543713fbe74c3f93c74541ed90b4953961b838752471dd9ba434228",
    "ddl-gym-v2": "749049df1707de1109e627a1c132661256064b73c6370165e5a2cb67cb8cf9fa",
    # v3's hash covers its input files' SHA-256 as the data manifest pins them
    "ddl-gym-v3": "e06698f061d54446a711a306035ec718d59332ea74edf52be210e13bfa90acc8",
}
MIN_SPREAD = 0.10  # worst / best non-oracle heuristic mean JCT - 1
MIN_NETWORK_EFFECT = 0.05  # comm / compute of multi-server jobs, largest over heuristics


# -- the suite -------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(PINNED))
def test_suite_hash_is_pinned(name):
    assert suite_hash(get_suite(name)) == PINNED[name]


@pytest.mark.needs_data
def test_v1_covers_families_shapes_and_congestion():
    suite = get_suite("ddl-gym-v1")
    test = suite.select("test")
    # every family v1 had (ddl-gym-v3 added "sia", a family v1 never had)
    assert {c.family for c in test} == set(FAMILIES) - {"sia"}
    shapes = {(c.shape, c.fabric) for c in test}
    assert len(shapes) >= 3
    big = [c for c in test if c.cluster().num_gpus >= 512]
    assert big, "a case on >= 512 GPUs"
    # on it, jobs must cross racks: some job is larger than a rack
    c = big[0]
    assert c.workload.build(0).jobs["gpus"].max() > c.cluster().gpus_per_rack
    assert {c.congestion for c in test} == {"none", "moderate", "heavy"}
    for split in SPLITS:
        assert suite.select(split), split
    names = [c.name for c in suite.cases + suite.quick]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("name", sorted(PINNED))
def test_splits_are_disjoint_per_source(name):
    """Time-split sources: train, validation and test parts do not overlap;
    file-split sources: no file is in two splits; generator seeds differ."""
    suite = get_suite(name)
    by_source: dict[str, dict[str, set]] = {}
    for c in suite.cases:
        w = c.workload
        key = w.source
        by_source.setdefault(key, {}).setdefault(c.split, set()).add(
            (w.part, w.seed_offset) if w.source == "synthetic" or w.part != (0, 1) else None
        )
    for source, splits in by_source.items():
        if len(splits) == 1:
            continue
        if source == "synthetic":
            offsets = {s: {o for _, o in v} for s, v in splits.items()}
            for a in offsets:
                for b in offsets:
                    if a != b:
                        assert not offsets[a] & offsets[b], (source, a, b)
            continue
        # a file in several splits must be cut in parts that do not overlap
        parts = sorted((p, s) for s, v in splits.items() for p, _ in v)
        for (p1, s1), (p2, s2) in zip(parts, parts[1:], strict=False):
            if s1 != s2:
                assert p1[1] <= p2[0], (source, p1, p2)


def test_v2_is_v1_with_a_larger_validation_split():
    """Train, test and quick cases are v1's, so v1's test records hold for v2;
    validation keeps v1's cases (10 seeds each) and adds cases of every
    validation source only, on shapes and congestion v1's validation lacks."""
    v1, v2 = get_suite("ddl-gym-v1"), get_suite("ddl-gym-v2")
    for split in ("train", "test"):
        assert v2.select(split) == v1.select(split), split
    assert v2.quick == v1.quick
    val1, val2 = v1.select("validation"), v2.select("validation")
    assert all(c.seeds == tuple(range(10)) for c in val2)
    kept = val2[: len(val1)]  # v1's, with 10 seeds (the synthetic one says so)
    same = [
        dataclasses.replace(c, seeds=c1.seeds, disjoint=c1.disjoint)
        for c, c1 in zip(kept, val1, strict=True)
    ]
    assert same == list(val1)
    assert "validation 500-509" in v2.case("synthetic-val@xrack512").disjoint
    sources = {(c.workload.source, c.workload.part, c.workload.seed_offset) for c in val1}
    added = val2[len(val1) :]
    assert len(added) == 5
    for c in added:
        assert (c.workload.source, c.workload.part, c.workload.seed_offset) in sources, c.name
    regimes = {(c.shape, c.congestion) for c in val1}
    assert regimes.isdisjoint({(c.shape, c.congestion) for c in added})
    assert min(c.cluster().num_gpus for c in added) == 16  # a small cluster, as tiresias-60's


def test_time_parts_share_no_job(data_dir):
    suite = get_suite("ddl-gym-v1")
    ids = {}
    for name in ("philly-train@xrack512", "philly-val@pcie128", "philly-test@xrack512"):
        ids[name] = set(suite.case(name).workload.build(0).jobs["job_id"])
    names = list(ids)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not ids[a] & ids[b], (a, b)


# -- discrimination ----------------------------------------------------------------------
def _full(request) -> bool:
    return bool(request.config.getoption("--golden-full") or os.environ.get("DDL_GYM_BENCH_FULL"))


def _check_discriminates(cases, suite: str = "ddl-gym-v1", seeds=None) -> list[str]:
    bad = []
    for case in cases:
        jct, net = {}, 0.0
        for h in HEURISTICS:
            scores = evaluate(h, suite=suite, split=case.split, cases=[case.name], seeds=seeds,
                              quick=case.name.startswith("quick"), progress=False)  # fmt: skip
            jct[h] = scores.records["mean_jct_s"].mean()
            net = max(net, scores.records["multi_server_comm_overhead"].max())
        spread = max(jct.values()) / min(jct.values()) - 1
        if spread < MIN_SPREAD or net < MIN_NETWORK_EFFECT:
            bad.append(f"{case.name}: spread {spread:.3f}, network effect {net:.3f}")
    return bad


def test_quick_cases_discriminate(data_dir):
    assert _check_discriminates(get_suite("ddl-gym-v1").quick) == []


def test_every_test_case_discriminates(data_dir, request):
    if not _full(request):
        pytest.skip("whole test split: run with --golden-full or DDL_GYM_BENCH_FULL=1")
    assert _check_discriminates(get_suite("ddl-gym-v1").select("test")) == []


def test_every_v2_validation_case_discriminates(data_dir, request):
    if not _full(request):
        pytest.skip("whole validation split: run with --golden-full or DDL_GYM_BENCH_FULL=1")
    cases = get_suite("ddl-gym-v2").select("validation")
    assert _check_discriminates(cases, "ddl-gym-v2", seeds=[0]) == []


# -- evaluate ----------------------------------------------------------------------------
def first_fit(view):
    """A plain callable policy: place the oldest waiting job anywhere it fits."""
    for job in view.pending:
        if job.gpus <= view.total_free:
            return Place(job.index, Level.NETWORK)
    return WAIT


def test_evaluate_heuristic_name_writes_and_resumes(data_dir, tmp_path):
    out = tmp_path / "fifo"
    scores = evaluate("fifo", quick=True, out_dir=out, progress=False)
    cases = get_suite("ddl-gym-v1").quick
    assert len(scores.records) == sum(len(c.seeds) for c in cases)
    files = sorted(out.glob("*.json"))
    assert len(files) == len(scores.records)
    record = json.loads(files[0].read_text())
    assert record["policy"] == "fifo" and record["mean_jct_s"] > 0
    card = scores.card()
    assert list(card["case"]) == [c.name for c in cases]
    # resume: a finished run is read back, not run again
    record["mean_jct_s"] = -1.0
    files[0].write_text(json.dumps(record))
    again = evaluate("fifo", quick=True, out_dir=out, resume=True, progress=False)
    assert (again.records["mean_jct_s"] == -1.0).sum() == 1


def test_evaluate_callable_and_module_function(data_dir):
    case = get_suite("ddl-gym-v1").quick[0].name
    a = evaluate(first_fit, quick=True, cases=[case], seeds=[0], progress=False)
    b = evaluate(
        "tests.test_benchmarks:first_fit", quick=True, cases=[case], seeds=[0], progress=False
    )
    assert a.policy == "first_fit"
    assert a.records["mean_jct_s"].iloc[0] == b.records["mean_jct_s"].iloc[0]
    assert a.records["completed"].iloc[0] == a.records["jobs"].iloc[0]


def test_resolve_policy_kinds():
    assert resolve_policy("sjf").clairvoyant
    assert not resolve_policy("dally").clairvoyant
    assert resolve_policy("agent").name == "agent"
    assert resolve_policy("agent:m.zip").name == "agent:m.zip"
    fifo = resolve_policy("ddl_gym.baselines:FifoPolicy")
    assert fifo.factory() is not fifo.factory()  # a class: a fresh policy per run
    with pytest.raises(ValueError, match="unknown policy"):
        resolve_policy("no-such-policy")
    with pytest.raises(TypeError, match="not a policy"):
        resolve_policy(42)


def test_evaluate_shipped_agent(data_dir):
    pytest.importorskip("torch")
    pytest.importorskip("sb3_contrib")
    case = get_suite("ddl-gym-v1").quick[0].name
    scores = evaluate("agent", quick=True, cases=[case], seeds=[0], progress=False)
    assert scores.policy == "agent"
    assert scores.records["completed"].iloc[0] == scores.records["jobs"].iloc[0]


@pytest.fixture(scope="module")
def readme_sb3_zip(tmp_path_factory):
    """A MaskablePPO zip trained on ddl_gym/Small-v0 (a ClusterEnv id: the
    model observes one row per server, so it runs only on that cluster
    shape; 32 steps), and the env it was trained on."""
    pytest.importorskip("torch")
    sb3_contrib = pytest.importorskip("sb3_contrib")
    from stable_baselines3.common.env_util import make_vec_env

    env_id, env_kwargs = "ddl_gym/Small-v0", {"congestion": "heavy"}
    env = make_vec_env(env_id, n_envs=1, env_kwargs=env_kwargs)
    model = sb3_contrib.MaskablePPO("MultiInputPolicy", env, seed=0, n_steps=32, batch_size=32)
    model.learn(32)
    path = tmp_path_factory.mktemp("sb3") / "my_model.zip"
    model.save(path)
    env.close()
    return path, env_id, env_kwargs


def test_evaluate_sb3_zip_from_the_readme_recipe(data_dir, readme_sb3_zip):
    """Scored on the quick cases of its cluster shape (2x2x4), the others
    reported unsupported."""
    path, env_id, env_kwargs = readme_sb3_zip
    scores = evaluate(
        f"agent:{path}",
        quick=True,
        seeds=[0],
        env_id=env_id,
        env_kwargs=env_kwargs,
        progress=False,
    )
    shapes = {c.name: c.shape for c in get_suite().quick}
    assert {shapes[c] for c in scores.records["case"]} == {"2x2x4"}
    assert len(scores.records) == 2
    assert list(scores.unsupported["case"]) == ["quick-pollux-6-head60@pcie32"]
    assert (scores.records["completed"] == scores.records["jobs"]).all()


# -- statistics --------------------------------------------------------------------------
def _records(rows):
    cols = ["policy", "case", "family", "seed", "mean_jct_s", "clairvoyant"]
    return pd.DataFrame(rows, columns=cols)


def test_normalised_score_is_a_ratio_of_means():
    from ddl_gym.benchmarks import stats

    rows = [
        # case a: fifo 10, 30 (mean 20); tiresias 8, 16 (mean 12: the baseline)
        ("fifo", "a", "f", 0, 10.0, False),
        ("fifo", "a", "f", 1, 30.0, False),
        ("tiresias", "a", "f", 0, 8.0, False),
        ("tiresias", "a", "f", 1, 16.0, False),
        # the oracle is better but never the baseline
        ("sjf", "a", "f", 0, 1.0, True),
        ("sjf", "a", "f", 1, 1.0, True),
        ("mine", "a", "f", 0, 6.0, False),
        ("mine", "a", "f", 1, 18.0, False),
    ]
    rec = _records(rows)
    base = stats.baseline_jct(rec)
    assert base["a"] == 12.0 and base.attrs["best"]["a"] == "tiresias"
    norm = stats.normalised(rec, base)
    mine = norm[norm["policy"] == "mine"]
    # mean of the per-seed ratios = mean JCT / baseline mean JCT = 12 / 12
    assert mine["normalised_jct"].mean() == pytest.approx(1.0)
    assert list(mine["normalised_jct"]) == [0.5, 1.5]
    fifo = norm[norm["policy"] == "fifo"]["normalised_jct"].mean()
    assert fifo == pytest.approx(20 / 12)


def test_aggregates_by_hand():
    from ddl_gym.benchmarks import stats

    x = np.array([[1.0, 2.0, 3.0, 4.0]])  # one seed, four cases
    assert stats.mean(x) == pytest.approx(2.5)
    assert stats.iqm(x) == pytest.approx(2.5)  # middle half: 2, 3
    assert stats.optimality_gap(x) == pytest.approx((0 + 1 + 2 + 3) / 4)
    y = np.array([[2.0, 2.0, 2.0, 2.0]])
    # x lower (better) than y on case 0, tie on 1, worse on 2, 3
    assert stats.probability_of_improvement(x, y) == pytest.approx((1 + 0.5 + 0 + 0) / 4)


def test_tied_policies_are_listed_in_name_order():
    """Two policies with the very same runs (the portfolio where it never
    switches, say) keep one order whatever else is in the table."""
    from ddl_gym.benchmarks import stats

    same = np.array([[1.0, 2.0], [1.5, 0.5]])
    for names in (["zeta", "alpha", "mid"], ["mid", "zeta", "alpha"]):
        matrices = {n: same * (0.5 if n == "mid" else 1.0) for n in names}
        table, _ = stats.aggregate_table(matrices, reps=50)
        assert list(table["policy"]) == ["mid", "alpha", "zeta"]


def test_batched_metrics_equal_rliables():
    from ddl_gym.benchmarks import stats

    rng = np.random.default_rng(1)
    x = rng.lognormal(0.0, 0.6, size=(3, 7))
    y = np.round(rng.lognormal(0.0, 0.6, size=(3, 7)), 1)
    x[0, 0] = y[1, 0]  # a tie
    batch = stats.batch_aggregates(x[None])[0]
    singles = [f(x) for f in stats.AGGREGATES.values()]
    assert batch == pytest.approx(singles)
    assert stats.batch_improvement(x[None], y[None])[0, 0] == pytest.approx(
        stats.probability_of_improvement(x, y)
    )
    taus = np.array([0.5, 1.0, 2.0])
    assert stats.batch_profile(taus)(x[None])[0] == pytest.approx([(x <= t).mean() for t in taus])


def test_intervals_cover_the_point_and_shrink_with_more_cases():
    from ddl_gym.benchmarks import stats

    rng = np.random.default_rng(0)

    def iqm(a):
        return stats.batch_aggregates(a)[:, :1]

    small = rng.lognormal(0.0, 0.5, size=(3, 8))
    big = rng.lognormal(0.0, 0.5, size=(3, 128))
    (p1, c1), (p2, c2) = (stats.stratified_bootstrap([x], iqm, reps=500) for x in (small, big))
    assert c1[0][0] <= p1[0] <= c1[1][0]
    assert c2[0][0] <= p2[0] <= c2[1][0]
    assert c2[1][0] - c2[0][0] < c1[1][0] - c1[0][0]
    # seeded: the same numbers every time
    assert np.array_equal(stats.stratified_bootstrap([small], iqm, reps=500)[1], c1)
    # a constant matrix has a zero-width interval
    _, c0 = stats.stratified_bootstrap([np.ones((3, 5))], iqm, reps=50)
    assert c0[0][0] == c0[1][0] == 1.0


def test_leaderboard_report_on_quick(data_dir, tmp_path):
    """The quick page regenerated from nothing (empty --out, no resume): the
    command it states, the position column, the user's policy in it, and
    the heuristics' runs equal to the shipped reference records (cpu_s and
    the commit aside: the engine is deterministic; floats to the reference
    check's relative 1e-9, past which numpy/libm builds move last bits)."""
    from ddl_gym.benchmarks.leaderboard import leaderboard_command, write_leaderboard

    doc = tmp_path / "bench.md"
    img = tmp_path / "img" / "profile.png"
    pytest.importorskip("matplotlib")
    mine = "tests.test_benchmarks:first_fit"
    write_leaderboard(
        out_dir=tmp_path / "runs",
        doc=doc,
        img=img,
        quick=True,
        progress=False,
        reps=200,
        resume=False,
        extra=[mine],
    )
    text = doc.read_text()
    assert "IQM [95% CI]" in text and "n/a" not in text
    assert "dally-1-2" in text and "sjf (oracle)" in text
    assert img.is_file() and img.stat().st_size > 1000
    command = leaderboard_command(
        "ddl-gym-v1", quick=True, extra=[mine], reps=200, doc=doc, img=img
    )
    assert f"\n    {command}\n" in text and "--resume" not in command
    assert f"--policy {mine}" in command
    assert "| position [95% CI] |" in text and "lower bound on mean JCT" in text
    assert f"| {mine} |" in text
    assert f"content hash `{suite_hash(get_suite('ddl-gym-v1'))}`" in text  # the suite's own

    from ddl_gym.benchmarks.reference import load_reference

    stored = load_reference("ddl-gym-v1").split("quick").records
    runs = tmp_path / "runs" / "ddl-gym-v1" / "quick"
    heuristics = get_suite("ddl-gym-v1").heuristics
    assert {r["policy"] for r in stored} == set(heuristics)

    def comparable(record):
        out = {k: v for k, v in record.items() if k != "cpu_s"}
        out["provenance"] = {k: v for k, v in record["provenance"].items() if k != "commit"}
        return out

    from ddl_gym.benchmarks.reference import same  # floats to the reference check's tolerance

    for r in stored:
        path = runs / r["policy"] / f"{r['case']}__seed{r['seed']}.json"
        assert same(comparable(json.loads(path.read_text())), comparable(r)), path


# -- offline datasets: tests/test_datasets.py ------------------------------------------


# -- the command -------------------------------------------------------------------------
def _parser():
    from ddl_gym.cli import benchmark

    p = argparse.ArgumentParser(prog="ddl-gym")
    benchmark.register(p.add_subparsers(dest="command"))
    return p


def test_cli_show(capsys):
    args = _parser().parse_args(["benchmark", "show", "--split", "test", "--suite", "ddl-gym-v1"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert suite_hash(get_suite("ddl-gym-v1")) in out
    assert "philly-test@xrack512" in out and "pollux-5" not in out


def _cli_evaluate(argv, capsys) -> str:
    args = _parser().parse_args(
        ["benchmark", "evaluate", "--suite", "ddl-gym-v1", "--quick", "--no-progress", *argv]
    )
    assert args.func(args) == 0
    return capsys.readouterr().out


def test_cli_evaluate_callable_agent_and_sb3_zip(data_dir, readme_sb3_zip, capsys):
    case = ["--case", "quick-tiresias-60@pcie16", "--seeds", "0"]
    out = _cli_evaluate(["--policy", "tests.test_benchmarks:first_fit", *case], capsys)
    assert "tests.test_benchmarks:first_fit on ddl-gym-v1 quick: 1 runs" in out
    out = _cli_evaluate(["--policy", "agent", *case], capsys)
    assert "agent on ddl-gym-v1 quick: 1 runs" in out
    path, env_id, env_kwargs = readme_sb3_zip
    zip_args = ["--policy", f"agent:{path}", "--env-id", env_id]
    out = _cli_evaluate([*zip_args, "--env-kwargs", json.dumps(env_kwargs), "--seeds", "0"], capsys)
    assert ": 2 runs" in out and "skipped quick-pollux-6-head60@pcie32" in out


def test_cli_evaluate_quick(data_dir, tmp_path, capsys):
    out = tmp_path / "runs"
    argv = ["benchmark", "evaluate", "--policy", "tiresias", "--quick", "--out", str(out)]
    argv += ["--suite", "ddl-gym-v1"]
    args = _parser().parse_args([*argv, "--no-progress", "--seeds", "0"])
    assert args.func(args) == 0
    assert len(list(out.glob("*.json"))) == len(get_suite().quick)
    assert "quick-tiresias-60@pcie16" in capsys.readouterr().out


def test_ddl_gym_evaluate_suite_is_the_benchmark_command(data_dir, tmp_path, capsys):
    """``ddl-gym evaluate --suite S --policy P`` (the top-level command) runs
    the same benchmark evaluation, seeds given the evaluate way."""
    from ddl_gym.cli.main import main

    out = tmp_path / "runs"
    argv = ["evaluate", "--suite", "ddl-gym-v1", "--policy", "fifo", "--quick"]
    assert main([*argv, "--seeds", "0", "--out", str(out), "--no-progress"]) == 0
    assert len(list(out.glob("*.json"))) == len(get_suite().quick)
    assert "fifo on ddl-gym-v1" in capsys.readouterr().out


def test_load_policy_speaks_of_windows_and_clusters(readme_sb3_zip):
    """A Small-v0 model (2x2x4, K = M = 4) loads without its
    env's trace having to fit (the probe runs one small job), and a K or
    cluster mismatch is reported in the env's words, not as SB3's shape error."""
    from ddl_gym.agents import load_policy

    path, env_id, env_kwargs = readme_sb3_zip
    policy = load_policy(path, env_id=env_id, env_kwargs={**env_kwargs, "cluster": "2x2x4"})
    assert policy.cluster.num_gpus == 16
    with pytest.raises(ValueError, match="'pending' has shape .*K: pending rows"):
        load_policy(path, env_id=env_id, env_kwargs={**env_kwargs, "K": 8})
    with pytest.raises(ValueError, match="'(racks|servers)' has shape .*cluster"):
        load_policy(path, env_id=env_id, env_kwargs={**env_kwargs, "cluster": "4x2x4"})


def test_reference_numbers_agree_to_a_relative_1e9_and_no_further():
    from ddl_gym.benchmarks.reference import same

    assert same({"a": [1.0, {"b": 3.0}]}, {"a": [1.0 + 1e-15, {"b": 3.0 * (1 + 1e-12)}]})
    assert not same({"a": 1.0}, {"a": 1.0 + 1e-8})
    assert not same({"a": 1.0}, {"a": 1.0, "b": 2})
    assert same(float("nan"), float("nan")) and not same(0.0, 1e-300)
    assert not same([1.0], [1.0, 2.0]) and not same("x", "y")
