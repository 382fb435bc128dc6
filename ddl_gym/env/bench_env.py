"""``BenchEnv``: the episodes of a benchmark suite split, as one Gymnasium env.

``gymnasium.make("ddl_gym/Bench-v3", split="train")``: each ``reset(seed=...)``
draws a case of the split and one of its seeds, and runs that case as the
benchmark does (its workload for that seed, its cluster and fabric, its
congestion) with the size-free observation of ``SetClusterEnv``, so one
agent trained here runs on every case of the suite, whatever its shape.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ddl_gym.engine import Engine
from ddl_gym.env.set_env import SetClusterEnv
from ddl_gym.env.sources import EpisodeSource
from ddl_gym.traces import Trace

DEFAULT_SUITE = "ddl-gym-v3"
QUICK = "quick"  # split= name of the suite's quick sub-suite (smoke runs, datasets' tests)
# arguments the case sets; giving them to the bench env is an error
CASE_ARGUMENTS = ("trace", "cluster", "fabric", "congestion")
# (case, seed) episode sources kept (each holds its trace, and for whole-case
# episodes its engine, reset rather than rebuilt); the oldest is dropped past this
_CACHE = 8


class BenchEnv(SetClusterEnv):
    """Schedule the jobs of one benchmark case per episode, drawn from a suite split.

    ## Description

    Every ``reset(seed=...)`` draws a case of ``split`` of ``suite`` (uniformly),
    then one of the case's seeds (uniformly), from the env's RNG, so the same
    seed gives the same episode. The episode is the benchmark's run of that
    (case, seed) (``ddl_gym.benchmarks.runner.run_case``): the trace
    ``case.workload.build(seed)``, the cluster ``case.cluster()``, the
    congestion ``case.congestion``, and the engine settings of this env
    (``tick_s``, ``lease_s``, ``restore_s_per_gpu``), which a model trained
    here keeps when it is evaluated (``ddl_gym.agents.save_model`` /
    ``load_policy`` and ``ddl_gym.benchmarks.evaluate``: a learned policy runs
    the benchmark with its own env's engine settings, as each heuristic runs
    with its own). ``info["case"]`` and ``info["case_seed"]`` name the
    episode; ``reset(options={"case": name, "seed": s})`` picks it instead of
    drawing (either key alone: the other is drawn).

    Cases differ in cluster shape (16 to 1,024 GPUs in ``ddl-gym-v3``) and
    episode length (tens to thousands of jobs, up to tens of thousands of
    decisions). For training on a budget, ``cases=`` picks a subset,
    ``window_s`` cuts each episode to a random window of that many seconds of
    arrivals, ``max_jobs`` to a random run of that many consecutive jobs, and
    ``max_steps`` / ``max_time_s`` truncate it.

    **Splits.** Train on ``"train"`` (the default). ``"validation"`` is for
    choosing among trained models; ``"test"`` is the benchmark's score.
    Training (or tuning) on validation or test cases voids the comparison the
    benchmark makes: the env allows them only so that a model can be watched
    on them.

    ## Action Space

    ``Discrete(1 + 3K + M)``: ``0`` WAIT, ``1 + 3k + l`` place pending row
    ``k`` at level ``l`` (0 machine, 1 rack, 2 network), ``1 + 3K + j``
    preempt running row ``j`` (``SetClusterEnv``). ``action_masks()`` and
    ``info["action_mask"]`` give the valid ones.

    ## Observation Space

    ``Box(0, 1, (K * 23 + M * 21 + 13,), float32)``: ``SetClusterEnv``'s padded
    set of pending and running jobs plus cluster-wide fractions. Its shape
    depends on ``K`` and ``M`` only, never on the case's cluster.

    ## Rewards

    ``ClusterEnv``'s (``reward``: ``"jct"`` by default, minus the jobs in the
    system times the elapsed time in ``time_scale_s`` units, so a whole
    episode's return is minus the case's total JCT in hours).

    ## Episode End

    Terminated when every job of the episode's trace (or window) is done;
    truncated by ``max_steps`` / ``max_time_s``. The last ``info`` holds the
    engine's ``"summary"``.

    ## Arguments

    * ``suite`` (``"ddl-gym-v3"``): a suite name (``ddl_gym.benchmarks.get_suite``).
    * ``split`` (``"train"``): ``"train"``, ``"validation"`` or ``"test"``
      (see Splits above); ``"quick"``: the suite's quick sub-suite (tiny
      test-like cases for smoke runs, in no split).
    * ``cases``: names of cases of the split to draw from (default: all).
    * ``seeds``: workload seeds to draw from (default: each case's own seeds,
      the ones the benchmark runs). Other seeds of a case of a generator
      family may be another split's draws (synthetic test cases are the
      train generator at offset seeds): keep the default unless you know the
      suite's seed layout.
    * ``max_jobs``: each episode a random run of this many consecutive jobs
      (arrival order) of the case's trace, arrivals shifted to start at 0.
    * ``window_s``, ``max_steps``, ``max_time_s``, ``K`` (64), ``M`` (64),
      ``preempt_budget``, ``tick_s`` (1800), ``lease_s``, ``restore_s_per_gpu``,
      ``reward``, ``reward_scale``, ``time_scale_s``, ``queue_order``,
      ``render_mode``, ``strict``: as ``SetClusterEnv`` / ``ClusterEnv``.
    * ``typed``: the typed layout (``SetClusterEnv``); default: whether any
      selected case's cluster has GPU types (every episode then has it).
      ``trace``, ``cluster``, ``fabric`` and ``congestion`` are the case's
      and cannot be given.

    The arguments are checked in the constructor, and so are every selected
    case's input files: a missing one raises ``DataMissingError`` naming the
    command that fetches it, and for a suite that pins its inputs
    (``Suite.hash_inputs``, ``ddl-gym-v3``) a file whose SHA-256 is not the
    data manifest's raises ``InputChecksumError``, as the benchmark's runs do.
    """

    def __init__(
        self,
        suite: str = DEFAULT_SUITE,
        split: str = "train",
        cases: Sequence[str] | None = None,
        seeds: Sequence[int] | None = None,
        max_jobs: int | None = None,
        **kwargs: Any,
    ) -> None:
        from ddl_gym.benchmarks.provenance import (
            actual_inputs,
            case_inputs,
            check_inputs,
            suite_pins_inputs,
        )
        from ddl_gym.benchmarks.suite import SPLITS, get_suite
        from ddl_gym.benchmarks.workload import data_path

        given = sorted(set(kwargs) & set(CASE_ARGUMENTS))
        if given:
            raise ValueError(
                f"BenchEnv: {', '.join(given)} come(s) from each case; pick cases with "
                "cases=[...] instead"
            )
        if split not in (*SPLITS, QUICK):
            raise ValueError(f"unknown split {split!r}; known: {', '.join(SPLITS)}, {QUICK}")
        the_suite = get_suite(suite)  # unknown suite: ValueError naming the known ones
        chosen = the_suite.select(split, quick=split == QUICK)
        if cases is not None:
            if isinstance(cases, str):
                cases = [cases]
            names = {c.name for c in chosen}
            unknown = [c for c in cases if c not in names]
            if unknown:
                raise ValueError(
                    f"no such case in {suite} {split}: {', '.join(map(repr, unknown))}; "
                    f"known: {', '.join(sorted(names))}"
                )
            chosen = tuple(c for c in chosen if c.name in set(cases))
        if not chosen:
            raise ValueError(f"{suite} {split}: no cases selected")
        if seeds is not None:
            seeds = tuple(int(s) for s in seeds)
            if not seeds:
                raise ValueError("seeds: empty (None: each case's own seeds)")
        if max_jobs is not None and not max_jobs >= 1:
            raise ValueError(f"max_jobs must be >= 1 or None, got {max_jobs}")
        if max_jobs is not None and kwargs.get("window_s") is not None:
            raise ValueError("give max_jobs or window_s, not both")
        # fail now on missing or foreign data, not at the first reset
        for case in chosen:
            for rel in case_inputs(case):
                data_path(rel, suite)
            if suite_pins_inputs(suite):  # a v3-style suite: its inputs' SHA-256 pinned
                check_inputs(case, actual_inputs(case), suite)
        first = chosen[0]
        # the typed layout when any case is typed (a typed agent acts on untyped cases too)
        kwargs.setdefault("typed", any(case.cluster().typed for case in chosen))
        super().__init__(
            trace=_probe_trace(), cluster=first.cluster(), congestion=first.congestion, **kwargs
        )
        self.suite = suite
        self.split = split
        self.cases = chosen
        self.seeds = seeds
        self.max_jobs = max_jobs
        self.case_name = ""
        self.case_seed = 0
        self._sources: OrderedDict[tuple[str, int], EpisodeSource] = OrderedDict()
        self._pick: dict[str, Any] = {}
        self._source = self  # type: ignore[assignment]  # reset() asks next_engine() here

    # -- episodes ----------------------------------------------------------
    def case_seeds(self, case: Any) -> tuple[int, ...]:
        """The workload seeds episodes of ``case`` draw from."""
        return self.seeds if self.seeds is not None else tuple(case.seeds)

    def next_engine(self, rng: np.random.Generator) -> Engine:
        """The engine of the next episode (``ClusterEnv.reset`` calls it with
        the env's seeded RNG): a (case, seed), then its window or job run."""
        pick = self._pick
        by_name = {c.name: c for c in self.cases}
        if "case" in pick:
            if pick["case"] not in by_name:
                raise ValueError(
                    f"reset option case={pick['case']!r} is not a case of this env; "
                    f"known: {', '.join(by_name)}"
                )
            case = by_name[pick["case"]]
        else:
            case = self.cases[int(rng.integers(len(self.cases)))]
        if "seed" in pick:
            seed = int(pick["seed"])
        else:
            options = self.case_seeds(case)
            seed = options[int(rng.integers(len(options)))]
        self.case_name, self.case_seed = case.name, seed
        source = self._episode_source(case, seed)
        if self.max_jobs is None:
            engine = source.next_engine(rng)
        else:
            engine = source._engine(_job_run(source.pool[0], self.max_jobs, rng))  # noqa: SLF001
        self.cluster = engine.cluster
        return engine

    def _episode_source(self, case: Any, seed: int) -> EpisodeSource:
        key = (case.name, seed)
        source = self._sources.get(key)
        if source is None:
            engine_kwargs = {**self._engine_kwargs, "congestion": case.congestion}
            source = EpisodeSource(
                case.workload.build(seed), case.cluster(), engine_kwargs, self.window_s
            )
            self._sources[key] = source
            if len(self._sources) > _CACHE:
                self._sources.popitem(last=False)
        else:
            self._sources.move_to_end(key)
        return source

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:  # type: ignore[override]
        """Start an episode (see the class docstring); ``options``: ``case``
        and/or ``seed`` pick the episode's case and workload seed."""
        options = dict(options or {})
        unknown = sorted(set(options) - {"case", "seed"})
        if unknown:
            raise ValueError(f"unknown reset option(s) {unknown}; known: case, seed")
        self._pick = options
        try:
            obs, info = super().reset(seed=seed)
        finally:
            self._pick = {}
        info["case"] = self.case_name
        info["case_seed"] = self.case_seed
        return obs, info  # type: ignore[return-value]


# BenchEnv's own arguments: which episodes, not what the agent observes
EPISODE_ARGUMENTS = ("suite", "split", "cases", "seeds", "max_jobs")


def probe_env(**kwargs: Any) -> SetClusterEnv:
    """A ``SetClusterEnv`` with the observation, action codec and engine
    settings of ``BenchEnv(**kwargs)``, on a one-job trace: what a model
    trained in the bench env needs to act (``ddl_gym.agents.external``),
    without the suite's data."""
    rest = {k: v for k, v in kwargs.items() if k not in EPISODE_ARGUMENTS}
    given = sorted(set(rest) & set(CASE_ARGUMENTS))
    if given:
        raise ValueError(f"BenchEnv: {', '.join(given)} come(s) from each case")
    rest.pop("window_s", None)  # episode arguments of the base env: not needed here
    return SetClusterEnv(trace=_probe_trace(), cluster="2x2x4", **rest)


def trace_files(**kwargs: Any) -> list[str]:
    """The trace files (relative to the data dir) the episodes of
    ``BenchEnv(**kwargs)`` come from, sorted; generated cases have none.
    What ``save_model`` records as a model's training jobs. Reads no data."""
    from ddl_gym.benchmarks.suite import get_suite
    from ddl_gym.benchmarks.workload import SYNTHETIC

    suite = get_suite(kwargs.get("suite", DEFAULT_SUITE))
    split = kwargs.get("split", "train")
    chosen = suite.select(split, quick=split == QUICK)
    cases = kwargs.get("cases")
    if cases is not None:
        wanted = {cases} if isinstance(cases, str) else set(cases)
        chosen = tuple(c for c in chosen if c.name in wanted)
    return sorted({c.workload.source for c in chosen} - {SYNTHETIC})


def _probe_trace() -> Trace:
    """One 1-GPU job: what the base env's constructor checks; never run."""
    from ddl_gym.traces.schema import make_trace

    job = {"job_id": "probe", "arrival_s": 0.0, "gpus": 1, "model": "resnet18"}
    frame = pd.DataFrame([{**job, "iterations": 1.0, "iter_time_s": 1.0}])
    return make_trace("probe", frame, None)


def _job_run(trace: Trace, n: int, rng: np.random.Generator) -> Trace:
    """``n`` consecutive jobs (arrival order) from a random start, shifted to t = 0."""
    from ddl_gym.traces import shift_to_zero

    jobs = trace.jobs.sort_values("arrival_s", kind="stable").reset_index(drop=True)
    if len(jobs) <= n:
        return shift_to_zero(Trace(trace.name, jobs, trace.source))
    start = int(rng.integers(len(jobs) - n + 1))
    part = jobs.iloc[start : start + n].reset_index(drop=True)
    return shift_to_zero(Trace(f"{trace.name}[jobs {start}:{start + n}]", part, trace.source))
