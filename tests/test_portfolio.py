"""The replay portfolio (ddl_gym.agents.portfolio): what it may know, what it
replays, and that switching policies mid-run loses no job."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("sb3_contrib")

from ddl_gym.agents.portfolio import (  # noqa: E402
    ReplayPortfolio,
    ReplayScore,
    make,
    replay_scores,
)
from ddl_gym.baselines import make_policy  # noqa: E402

from ddl_gym.benchmarks.suite import get_suite  # noqa: E402
from ddl_gym.engine import simulate  # noqa: E402
from ddl_gym.engine.engine import Engine  # noqa: E402
from ddl_gym.traces import Trace  # noqa: E402

CASE = "pollux-3@seed64"  # a train case where Tiresias beats the agent by 1.9x


@pytest.fixture(scope="module")
def case(data_dir):  # (data_dir: skipped without data, the case reads a Pollux trace)
    return get_suite().case(CASE)


def _run(case, trace, portfolio):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return simulate(trace, case.cluster(), portfolio, congestion=case.congestion, seed=0)


def test_switching_mid_run_completes_every_job_once(case):
    trace = case.workload.build(0)
    portfolio = make()
    result = _run(case, trace, portfolio)
    chosen = [c.chosen for c in portfolio.choices]
    assert "tiresias" in chosen  # it did switch (the case's best heuristic)
    assert result.summary["completed"] == len(trace)
    assert result.jobs["end_s"].notna().all() and len(set(result.jobs["job_id"])) == len(trace)
    # every choice was made on replays of jobs that had arrived by then
    arrivals = trace.jobs["arrival_s"].to_numpy()
    for c in portfolio.choices:
        assert c.arrivals == int((arrivals <= c.time).sum())


def test_choices_ignore_future_arrivals_and_unfinished_sizes(case):
    trace = case.workload.build(0)
    first = make()
    _run(case, trace, first)
    t0 = first.choices[0].time
    jobs = trace.jobs.copy()
    later = jobs["arrival_s"] > t0
    # the future changes: later jobs 3x larger and every other one dropped
    jobs.loc[later, "iterations"] *= 3
    drop = jobs.index[later][::2]
    changed = Trace("changed", jobs.drop(index=drop).reset_index(drop=True))
    second = make()
    _run(case, changed, second)
    assert second.choices[0].time == t0
    assert second.choices[0].so_far_s == first.choices[0].so_far_s
    assert second.choices[0].full_s == first.choices[0].full_s
    assert second.choices[0].chosen == first.choices[0].chosen


@pytest.mark.parametrize("sizes", ["finished", "km"])
def test_an_unfinished_jobs_true_size_is_not_read(case, sizes):
    """Making a job that is still running at the first selection 10x longer
    leaves that selection's replay scores exactly as they were (with "km"
    the unfinished jobs enter the size estimate by their done work only)."""
    trace = case.workload.build(0)
    first = make(sizes=sizes)
    result = _run(case, trace, first)
    t0 = first.choices[0].time
    ends = result.jobs.set_index("job_id")["end_s"]
    arrivals = trace.jobs.set_index("job_id")["arrival_s"]
    unfinished = [j for j in arrivals.index if arrivals[j] <= t0 < ends[j]]
    assert unfinished
    jobs = trace.jobs.copy()
    jobs.loc[jobs["job_id"] == unfinished[0], "iterations"] *= 10
    second = make(sizes=sizes)
    _run(case, Trace("longer", jobs), second)
    assert second.choices[0].so_far_s == first.choices[0].so_far_s
    assert second.choices[0].full_s == first.choices[0].full_s


def _two_hours_of_gandiva(case):
    from ddl_gym.engine import EngineView, Wait

    engine = Engine(
        case.workload.build(0), case.cluster(), congestion=case.congestion, **make().engine_kwargs()
    )
    view = EngineView(engine)
    gandiva = make_policy("gandiva")
    gandiva.reset(view)
    while engine.now < 2 * 3600 and not engine.done:
        a = gandiva.act(view)
        if isinstance(a, Wait):
            engine.advance()
        else:
            engine.apply(a)
    return engine, view


def test_the_replay_keeps_known_sizes_and_draws_the_others_above_the_work_done(case):
    from ddl_gym.engine import Status

    engine, view = _two_hours_of_gandiva(case)
    p = make()
    p.reset(view, seed=0)
    replay = p.replay_trace(view).jobs.set_index("job_id")
    by_id = {j.job_id: j for j in engine.jobs}
    assert any(by_id[i].status == Status.DONE for i in replay.index)
    for job_id, row in replay.iterrows():
        job = by_id[job_id]
        assert job.status != Status.FUTURE  # nothing from the future
        assert row["arrival_s"] == job.arrival and row["gpus"] == job.gpus
        if job.status == Status.DONE:
            assert row["iterations"] == pytest.approx(job.iterations, abs=1.0)
        else:
            assert row["iterations"] >= job.progress
    in_system = {j.job_id for j in engine.jobs if j.status in (Status.PENDING, Status.RUNNING)}
    assert in_system <= set(replay.index)


def _hour_jobs(ids: list[str], arrivals: list[float], gpus: list[int]) -> Trace:
    """resnet50 jobs of 3,600 one-second iterations (1 h on one GPU)."""
    n = len(ids)
    return Trace(
        "by-hand",
        pd.DataFrame(
            {
                "job_id": ids,
                "arrival_s": arrivals,
                "gpus": gpus,
                "model": ["resnet50"] * n,
                "iterations": [3600] * n,
                "iter_time_s": [1.0] * n,
            }
        ),
    )


def test_future_repeat_adds_the_window_once_more_after_the_present(case):
    """future="repeat": the replay as without it, plus a stand-in for every
    job of the window, shifted by one constant to arrive after the present,
    with its original's GPUs, model and (known or drawn) size."""
    from ddl_gym.agents.portfolio import NEXT

    _, view = _two_hours_of_gandiva(case)
    plain, repeat = make(window_jobs=30), make(future="repeat", window_jobs=30)
    plain.reset(view, seed=0)
    repeat.reset(view, seed=0)
    base = plain.replay_trace(view).jobs
    both = repeat.replay_trace(view).jobs
    stand_ins = both[both["job_id"].str.endswith(NEXT)]
    assert both[~both["job_id"].str.endswith(NEXT)].reset_index(drop=True).equals(base)
    window = base.sort_values("arrival_s").tail(len(stand_ins))
    assert len(stand_ins) == 30 and set(stand_ins["job_id"]) == {i + NEXT for i in window["job_id"]}
    originals = base.set_index("job_id").loc[[i[: -len(NEXT)] for i in stand_ins["job_id"]]]
    shift = stand_ins["arrival_s"].to_numpy() - originals["arrival_s"].to_numpy()
    assert np.allclose(shift, shift[0]) and (stand_ins["arrival_s"] > view.now).all()
    for col in ("gpus", "model", "iterations", "iter_time_s"):
        assert stand_ins[col].tolist() == originals[col].tolist()


def test_stand_ins_are_load_not_scored():
    """Job a (1 GPU, 1 h) from 0; a stand-in x for the whole 16-GPU cluster
    at 100 s; b (1 GPU, 1 h) at 0.5 h. FIFO: x waits for a (until 1 h),
    then does its 3,600 one-second iterations over 16 GPUs in 225 s; b waits
    behind x and runs 3,825-7,425 s (JCT 5,625 s). Scored: a and b only."""
    from ddl_gym.agents.portfolio import NEXT

    trace = _hour_jobs(["a", "x" + NEXT, "b"], [0.0, 100.0, 1800.0], [1, 16, 1])
    score = replay_scores(
        trace, Engine(trace, "2x2x4"), make_policy("fifo"), {"restore_s_per_gpu": 0.0}, 2700.0
    )
    assert score.so_far_s == pytest.approx((2700.0 + 900.0) / 2)
    assert score.full_s == pytest.approx((3600.0 + 5625.0) / 2)


def test_replay_scores_by_hand():
    """Two 1-GPU jobs of 1 h, arriving at 0 and 0.5 h on a 16-GPU cluster:
    both run at once (one GPU each: no slowdown), so the mean JCT is 1 h;
    up to 0.75 h the first has spent 0.75 h and the second 0.25 h."""
    trace = _hour_jobs(["a", "b"], [0.0, 1800.0], [1, 1])
    real = Engine(trace, "2x2x4")
    settings = {"restore_s_per_gpu": 0.0}
    score = replay_scores(trace, real, make_policy("fifo"), settings, now=2700.0)
    assert score.full_s == pytest.approx(3600.0, rel=1e-6)
    assert score.so_far_s == pytest.approx((2700.0 + 900.0) / 2)
    late = replay_scores(trace, real, make_policy("fifo"), settings, now=1e6)
    assert late.so_far_s == pytest.approx(late.full_s)  # all done by then


def test_a_switch_needs_the_margin_on_every_measure_of_the_criterion():
    factories = {n: (lambda n=n: make_policy(n)) for n in ("fifo", "sjf", "tiresias")}
    both = ReplayPortfolio(factories, "fifo", {}, margin=0.1)
    scores = {
        "fifo": [ReplayScore(100.0, 100.0)],
        "sjf": [ReplayScore(50.0, 95.0)],  # far better so far, within the margin in full
        "tiresias": [ReplayScore(85.0, 88.0)],  # better by > 10 % on both
    }
    assert both._better_than_active(scores) == "tiresias"
    assert both._better_than_active({**scores, "tiresias": [ReplayScore(85.0, 91.0)]}) == "fifo"
    so_far = ReplayPortfolio(factories, "fifo", {}, margin=0.1, criterion="so_far")
    assert so_far._better_than_active(scores) == "sjf"
    with pytest.raises(ValueError, match="criterion"):
        ReplayPortfolio(factories, "fifo", {}, criterion="mean")


def test_bad_settings_are_refused():
    factory = {"fifo": lambda: make_policy("fifo")}
    with pytest.raises(ValueError, match="first='agent'"):
        ReplayPortfolio(factory, "agent", {})
    with pytest.raises(ValueError, match="margin"):
        ReplayPortfolio(factory, "fifo", {}, margin=1.0)
    with pytest.raises(ValueError, match="future"):
        ReplayPortfolio(factory, "fifo", {}, future="oracle")
    with pytest.raises(ValueError, match="sizes"):
        ReplayPortfolio(factory, "fifo", {}, sizes="oracle")
    with pytest.raises(ValueError, match="every_jobs"):
        ReplayPortfolio(factory, "fifo", {}, every_jobs=0)
    assert np.isfinite(ReplayPortfolio(factory, "fifo", {}).margin)


def _selection_arrivals(trace: Trace, warmup: int, gap) -> list[int]:
    """The arrival counts at which a selection is due, from the trace alone:
    the first arrival instant at which the count reaches the next threshold."""
    counts = trace.jobs["arrival_s"].value_counts().sort_index().cumsum().to_numpy()
    due, at = [], warmup
    for n in counts:
        if n >= at:
            due.append(int(n))
            at = n + gap(int(n))
    return due


def test_max_every_jobs_caps_the_gap_between_selections(case):
    """Geometric growth spaces selections out (x2 here); the cap keeps them at
    most ``max_every_jobs`` arrivals apart, late in the trace too."""
    trace = case.workload.build(0)
    factories = {n: (lambda n=n: make_policy(n)) for n in ("fifo", "tiresias")}
    free = ReplayPortfolio(
        factories, "fifo", {}, warmup_jobs=10, every_jobs=10, growth=2.0, max_every_jobs=None
    )
    capped = ReplayPortfolio(
        factories, "fifo", {}, warmup_jobs=10, every_jobs=10, growth=2.0, max_every_jobs=25
    )
    _run(case, trace, free)
    _run(case, trace, capped)
    got_free = [c.arrivals for c in free.choices]
    got_capped = [c.arrivals for c in capped.choices]
    assert got_free == _selection_arrivals(trace, 10, lambda n: max(10, n))
    assert got_capped == _selection_arrivals(trace, 10, lambda n: min(max(10, n), 25))
    assert len(got_capped) > len(got_free) and got_capped[-1] >= len(trace) - 25
    with pytest.raises(ValueError, match="max_every_jobs"):
        ReplayPortfolio(factories, "fifo", {}, every_jobs=20, max_every_jobs=10)


def test_the_benchmark_knows_the_portfolio_by_name():
    from ddl_gym.benchmarks.policies import resolve_policy

    spec = resolve_policy("portfolio")
    assert spec.name == "portfolio"
    policy = spec.factory()
    assert isinstance(policy, ReplayPortfolio)
    assert set(policy.candidates) == {"agent", "tiresias", "gandiva"}
    assert policy.engine_kwargs() == make().engine_kwargs()


def test_suite_report_passes_its_portfolio_options():
    from ddl_gym.agents.policy import DEFAULT_MODEL

    from research.suite_report import _factory

    policy = _factory(DEFAULT_MODEL, portfolio=True, options={"warmup_jobs": 7, "margin": 0.2})()
    assert isinstance(policy, ReplayPortfolio)
    assert (policy.warmup_jobs, policy.margin) == (7, 0.2)
    assert policy.every_jobs == make().every_jobs  # the rest as shipped


def test_heuristic_options_build_each_candidate_with_its_settings():
    from ddl_gym.baselines.tiresias import TiresiasPolicy

    from research.suite_report import _factory

    policy = make(heuristic_options={"tiresias": {"sensitivity": 1.0}})
    tiresias = policy.candidates["tiresias"]()
    assert isinstance(tiresias, TiresiasPolicy) and tiresias.sensitivity == 1.0
    assert policy.candidates["tiresias"]() is not tiresias  # a fresh one each time
    assert make(heuristic_options={}).candidates["tiresias"]().sensitivity == 2.0
    # the shipped portfolio keeps rack-fitting jobs in one rack; Gandiva as registered
    shipped = make()
    assert shipped.candidates["tiresias"]().sensitivity == 1.0
    assert type(shipped.candidates["gandiva"]()) is type(make_policy("gandiva"))
    # through suite_report's --portfolio-options, as the test split runs it
    from ddl_gym.agents.policy import DEFAULT_MODEL

    options = {"heuristic_options": {"tiresias": {"sensitivity": 1.0}}}
    built = _factory(DEFAULT_MODEL, portfolio=True, options=options)()
    assert built.candidates["tiresias"]().sensitivity == 1.0
    with pytest.raises(ValueError, match="dally"):
        make(heuristic_options={"dally": {}})


def test_with_several_draws_a_switch_needs_the_margin_in_every_draw():
    """Draws are paired (draw d of every candidate replays the same sizes):
    a candidate 20 % better in one draw but only 5 % in the other stays out."""
    factories = {n: (lambda n=n: make_policy(n)) for n in ("fifo", "tiresias")}
    portfolio = ReplayPortfolio(factories, "fifo", {}, margin=0.1, draws=2)
    fifo = [ReplayScore(100.0, 100.0), ReplayScore(200.0, 200.0)]
    assert portfolio._better_than_active({"fifo": fifo, "tiresias": [
        ReplayScore(80.0, 80.0), ReplayScore(190.0, 190.0)]}) == "fifo"  # fmt: skip
    # 160/200 = 0.8 in the second draw though 160 > 100: ratios are per draw
    assert portfolio._better_than_active({"fifo": fifo, "tiresias": [
        ReplayScore(85.0, 85.0), ReplayScore(160.0, 160.0)]}) == "tiresias"  # fmt: skip
    with pytest.raises(ValueError, match="draws"):
        ReplayPortfolio(factories, "fifo", {}, draws=0)


def test_several_draws_replay_the_same_jobs_with_other_drawn_sizes(case, monkeypatch):
    """Each draw replays the same jobs at the same arrival times; only the
    sizes of jobs still in the system differ, and every candidate sees the
    same draws."""
    import ddl_gym.agents.portfolio as portfolio_module

    seen: list[tuple[str, pd.DataFrame]] = []
    real_scores = portfolio_module.replay_scores

    def spy(trace, engine, policy, settings, now):
        seen.append((getattr(policy, "name", type(policy).__name__), trace.jobs))
        return real_scores(trace, engine, policy, settings, now)

    monkeypatch.setattr(portfolio_module, "replay_scores", spy)
    portfolio = make(draws=3, margin=0.99)  # never switches: the agent's own states
    _run(case, case.workload.build(0), portfolio)
    per_selection = 3 * len(portfolio.candidates)
    assert len(seen) == per_selection * len(portfolio.choices)
    some_differ = False
    for k in range(len(portfolio.choices)):
        batch = seen[k * per_selection : (k + 1) * per_selection]
        draws = [jobs for _, jobs in batch[:3]]  # the first candidate's three
        for jobs in draws[1:]:
            assert jobs["job_id"].tolist() == draws[0]["job_id"].tolist()
            assert jobs["arrival_s"].tolist() == draws[0]["arrival_s"].tolist()
            some_differ |= not jobs["iterations"].equals(draws[0]["iterations"])
        for c in range(1, len(portfolio.candidates)):  # the others replay the same three
            for d in range(3):
                assert batch[3 * c + d][1] is draws[d]
    assert some_differ


def test_kaplan_meier_sizes_by_hand():
    """Ended 1 and 3, one job known to exceed 2: at 1, three at risk and one
    ends (S = 2/3); at 3, one at risk and it ends (S = 0). The unfinished
    job's share moves to the right: masses 1/3 at 1 and 2/3 at 3."""
    from ddl_gym.agents.portfolio import SizeEstimate

    km = SizeEstimate.kaplan_meier(np.array([3.0, 1.0]), np.array([2.0]))
    assert km.values.tolist() == [1.0, 3.0]
    assert km.masses == pytest.approx([1 / 3, 2 / 3]) and km.tail == 0.0
    # no censoring: the plain empirical distribution
    plain = SizeEstimate.kaplan_meier(np.array([1.0, 2.0, 3.0]), np.array([]))
    assert plain.masses == pytest.approx([1 / 3] * 3)
    # a job running longer than any that ended leaves mass beyond them:
    # at 1, two at risk (S = 1/2); nothing ends after
    longer = SizeEstimate.kaplan_meier(np.array([1.0]), np.array([5.0]))
    assert longer.masses == pytest.approx([0.5]) and longer.tail == pytest.approx(0.5)
    rng = np.random.default_rng(0)
    assert {km.draw_above(2.0, rng) for _ in range(20)} == {3.0}  # only 3 exceeds 2
    draws = [km.draw_above(0.5, rng) for _ in range(3000)]
    assert np.mean(np.array(draws) == 3.0) == pytest.approx(2 / 3, abs=0.03)
    # beyond every size seen to end: twice the larger of the work done and that size
    assert longer.draw_above(7.0, rng) == 14.0
    assert {longer.draw_above(0.0, rng) for _ in range(50)} == {1.0, 2.0}
    empty = SizeEstimate.kaplan_meier(np.array([]), np.array([4.0]))
    assert empty.draw_above(4.0, rng) == 8.0
