"""A typed family of benchmark cases: GPU generations beside network locality.

**Not a suite yet.** :func:`typed_cases` returns cases designed as
``ddl-gym-v3``'s families were, ready to join the next suite version (a new
name in :data:`ddl_gym.benchmarks.suite.SUITES`, with its hash pinned); no
suite registers them today, and ``ddl-gym-v3`` (frozen) is unchanged. Their
best heuristic is taken over :data:`HEURISTICS_TYPED`: v3's nine type-blind
heuristics plus the four typed policies (``ddl_gym.baselines.TYPED_NAMES``).

Three groups of cases (docs/typed_family.md has the loads and the best
heuristic per case at seed 0). ``python -m ddl_gym.benchmarks.typed_family
--quick`` runs the quick cases' seed 0 with every heuristic and prints the
best per case (:func:`quick_best`); without ``--quick``, the ten cases:

* **generations** (``gen-*@vah384``): the v3 heavy-tailed generator (sizes
  1-64 GPUs, log-normal durations, Helios model mix, :data:`V100_TIMES`) on
  ``v100-a100-h100`` (128 each of V100-32GB, A100-80GB, H100; 8-GPU servers;
  ``a100_nvlink_ib``), with typed jobs drawn by :data:`GEN_TYPE_RULE`.
* **gavel** (``gavel-*@kpv108``): Gavel-like jobs on ``gavel-kpv`` (36 each
  of K80, P100, V100; 4-GPU servers; ``pcie_25gbe``): Gavel's seven models
  weighted as its 26 job templates (uniform over templates), multi-GPU jobs
  of its four distributed models only, Gavel's GPU counts (1/2/4/8 at
  70/10/15/5%; stanford-futuredata/gavel c4fa400 ``scheduler/utils.py``
  ``_generate_scale_factor``, ``_generate_duration``), log-normal
  durations (median 4.6 h, sigma 1.3, capped at 10^4 minutes) standing
  for Gavel's mix of log-uniform durations
  (80% in 10^1.5-10^3 minutes, 20% in 10^3-10^4: same median and cap).
  Gavel's jobs accept every type: the types differ only in speed.
* **openb** (``openb-*@openb``): Alibaba openb's pods on openb's own node
  list (``openb``: 6,212 GPUs of 7 types, ``pcie_25gbe``), every pod's
  ``gpu_spec`` honoured. ``openb-dev@openb`` is the developers' data dir's
  default dev cut (no pod names a type: speeds alone differ); the
  ``openb-spec33-*`` cases read ``openb_pod_list_gpuspec33.csv`` (a third of
  the pods name accepted types), which the developers' data dir lacks:
  ``ddl-gym data fetch`` brings it (its manifest entry pins the SHA-256);
  :func:`missing_data` says why a case cannot run.

Disjointness (per case, :attr:`Case.disjoint`):

* generations and gavel: by generator seed. Offsets 6000 (train), 6500
  (validation), 7000 (test), 7500 (quick) for generations; 6100, 6600,
  7100, 7600 for gavel; each seed a distinct draw, none equal to a v1-v3
  synthetic seed (0.., 500.., 1000.., 2000.., 4000..).
* openb: by time (creation time, as v3's Alibaba cases). The dev cut holds
  the pods created before 11,500,000 s; the gpuspec33 file holds the same
  pods (same names and times; it differs in ``gpu_spec``) around it, so
  its part that overlaps the dev cut is train too: gpuspec33's jobs
  [10%, 50%) train (all before 11,500,000 s), [50%, 75%) validation,
  [75%, 100%) test, in arrival order; the dev cut is train.

Every file case resamples its jobs' bodies per seed (``Workload.resample``,
the ``gpu_types`` column travels with the body); seeds: train 0-2,
validation and test 0-4 (as v3).

Loads: ``arrival_scale`` set by
:func:`~ddl_gym.benchmarks.workload.arrival_scale_for` at seed 0 to the
busy-load target in :data:`LOAD_TARGETS` on the cluster's V100-equivalent
capacity (:func:`v100_equivalent_gpus`: each type's GPUs times its
catalogue speed vs V100; jobs' iteration times are V100 times, so a plain
GPU count would leave a cluster of H100s mostly idle at "0.9").
:data:`_SCALES` holds the numbers; :func:`design_scales` recomputes them.
Targets: 0.9 on the generations cases (v3's busy target), 0.8 on the
Gavel-like ones and 0.7 on ``gavel-test`` (v3's rule: at most 10,000
preemptions per run, any heuristic, any seed: at 0.9 ``dally-1-2`` and
``gavel`` went past it). openb's whole-GPU pods cannot keep openb's
6,212 GPUs busy: at 1,000x their arrival rate they reach a busy load of
0.05-0.1, so the openb cases target 0.02 (queues form on the types pods
name, not on the whole cluster).
Comm/compute: each case's multi-server jobs under the heuristics stay in
v3's measured range (:data:`~ddl_gym.benchmarks.suite_v3.MEASURED_COMM_RANGE`),
checked at seed 0 by :func:`quick_best` (``comm`` per run).

Typed type rule of the generations cases (:data:`GEN_TYPE_RULE`, an
assumption, stated): each job independently accepts only A100-80GB and
H100 with probability 0.2 (code built on TF32/BF16 paths), and needs
40 GiB of GPU memory with probability 0.15 (a larger batch or longer
sequence than its V100 profile: only the 80 GB A100 and H100 hold it, so it
refuses the 32 GB V100 by the memory rule, not by name). Draws use
``numpy.random.default_rng([workload seed, stream])``.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ddl_gym.benchmarks.suite import _SYNTHETIC, Case
from ddl_gym.benchmarks.suite_v3 import HEURISTICS_V3, V100_TIMES, targeted_case
from ddl_gym.benchmarks.workload import (
    SYNTHETIC,
    DataMissingError,
    Workload,
    arrival_scale_for,
    data_path,
    freeze,
)
from ddl_gym.gpu_types import get_gpu_type
from ddl_gym.topology import Cluster
from ddl_gym.traces import Trace
from ddl_gym.traces.openb_types import NODE_LIST
from ddl_gym.traces.schema import make_trace

__all__ = [
    "GEN_TYPE_RULE",
    "HEURISTICS_TYPED",
    "LOAD_TARGETS",
    "TYPED_POLICIES",
    "TypedWorkload",
    "design_scales",
    "missing_data",
    "quick_best",
    "typed_cases",
    "v100_equivalent_gpus",
]

#: The four typed policies (``ddl_gym.baselines.TYPED_NAMES``, frozen here).
TYPED_POLICIES: tuple[str, ...] = ("gavel", "tiresias-typed", "gandiva-typed", "dally-typed")
#: The heuristics whose best mean JCT per case is the family's baseline.
HEURISTICS_TYPED: tuple[str, ...] = (*HEURISTICS_V3, *TYPED_POLICIES)

#: Generations cases: (accepted types joined by '|', probability) and
#: (GiB needed per GPU, probability), drawn independently per job.
GEN_TYPE_RULE: dict[str, tuple[tuple[str, float], ...] | tuple[tuple[float, float], ...]] = {
    "accept_only": (("A100-80GB|H100", 0.2),),
    "mem_gib": ((40.0, 0.15),),
}

# Mixed into the type draws' seed so they are not the generator's stream.
_TYPE_STREAM = 0x7E9E_D5EC
_MODEL_STREAM = 0x6A7E_1D15


@dataclass(frozen=True)
class TypedWorkload(Workload):
    """A :class:`Workload` whose jobs also get ``gpu_types`` / ``gpu_mem_gib``
    cells, drawn per job: ``accept_only`` = ``(types, probability)`` pairs
    (a job takes the first pair it draws), ``mem_gib`` = ``(GiB, probability)``
    pairs (likewise). Both empty: the workload's own jobs, unchanged."""

    accept_only: tuple[tuple[str, float], ...] = ()
    mem_gib: tuple[tuple[float, float], ...] = ()
    # data files the case reads besides its trace (openb's node list, which
    # the ``openb`` cluster is built from): a suite's hash covers them too
    extra_inputs: tuple[str, ...] = ()
    # (model, weight) pairs: a multi-GPU job of another model gets one of
    # these instead (Gavel draws multi-GPU jobs from distributed models only)
    multi_gpu_models: tuple[tuple[str, float], ...] = ()

    def input_files(self) -> tuple[str, ...]:
        """The data files (relative to the data dir) the case reads
        (:func:`ddl_gym.benchmarks.provenance.case_inputs` asks for them)."""
        own = () if self.source == SYNTHETIC else (self.source,)
        return (*own, *self.extra_inputs)

    def build(self, seed: int = 0) -> Trace:
        trace = super().build(seed)
        if not self.accept_only and not self.mem_gib and not self.multi_gpu_models:
            return trace
        jobs = trace.jobs.copy()
        if self.multi_gpu_models:
            self._redraw_multi_gpu_models(jobs, seed)
        rng = np.random.default_rng([self.seed_offset + seed, _TYPE_STREAM])
        n = len(jobs)
        if self.accept_only:
            jobs["gpu_types"] = _draw(rng, n, self.accept_only, "")
        if self.mem_gib:
            jobs["gpu_mem_gib"] = _draw(rng, n, self.mem_gib, float("nan"))
        return make_trace(trace.name, jobs, trace.source)

    def _redraw_multi_gpu_models(self, jobs: pd.DataFrame, seed: int) -> None:
        """In place: each multi-GPU job whose model is not in
        ``multi_gpu_models`` gets one drawn from it, keeping its work
        (iterations x iteration time)."""
        from ddl_gym.traces.schema import reference_iter_time

        names = [m for m, _ in self.multi_gpu_models]
        w = np.array([p for _, p in self.multi_gpu_models], dtype="float64")
        bad = np.flatnonzero((jobs["gpus"].to_numpy() > 1) & ~jobs["model"].isin(names).to_numpy())
        if not len(bad):
            return
        rng = np.random.default_rng([self.seed_offset + seed, _MODEL_STREAM])
        new = [names[i] for i in rng.choice(len(names), size=len(bad), p=w / w.sum())]
        times = dict(self.iter_times)
        t_new = np.array([times.get(m) or reference_iter_time(m) for m in new], dtype="float64")
        rows = jobs.index[bad]
        work = (jobs.loc[rows, "iterations"] * jobs.loc[rows, "iter_time_s"]).to_numpy()
        jobs.loc[rows, "model"] = new
        jobs.loc[rows, "iter_time_s"] = t_new
        jobs.loc[rows, "iterations"] = work / t_new


def _draw(rng: np.random.Generator, n: int, pairs: Sequence[tuple[Any, float]], other: Any) -> list:
    """Per job: the value of the first pair whose probability the job draws
    (consecutive slices of one uniform draw), else ``other``."""
    u = rng.random(n)
    out = [other] * n
    lo = 0.0
    for value, p in pairs:
        hit = np.flatnonzero((u >= lo) & (u < lo + p))
        for i in hit:
            out[i] = value
        lo += p
    return out


# -- data ------------------------------------------------------------------------
_DEV = "traces/alibaba_openb/openb_pod_list_default_dev.csv"
_SPEC33 = "traces/alibaba_openb/openb_pod_list_gpuspec33.csv"

TRAIN_SEEDS = (0, 1, 2)
EVAL_SEEDS = (0, 1, 2, 3, 4)
_SEEDS = {"train": TRAIN_SEEDS, "validation": EVAL_SEEDS, "test": EVAL_SEEDS}

_BY_SEED_GEN = "by generator seed: train 6000-6002, validation 6500-6504, test 7000-7004"
_BY_SEED_GAVEL = "by generator seed: train 6100-6102, validation 6600-6604, test 7100-7104"
_BY_TIME_OPENB = (
    "by time: openb's dev cut (created before 11,500,000 s) and gpuspec33's jobs [10%, 50%) "
    "train (all before 11,500,000 s), gpuspec33's [50%, 75%) validation, [75%, 100%) test"
)

# Gavel's job table (stanford-futuredata/gavel c4fa400, scheduler/job_table.py):
# 26 templates drawn uniformly, i.e. models weighted by their batch-size
# variants; multi-GPU jobs only from the distributed ones (ResNet-18/50,
# Transformer, LM: scheduler/utils.py generate_job). Catalogue names.
_GAVEL_MODELS: dict[str, float] = {
    "a3c": 1,
    "cyclegan": 1,
    "lstm_lm": 5,
    "recommendation": 5,
    "resnet18": 5,
    "resnet50": 4,
    "transformer": 5,
}
_GAVEL_DISTRIBUTED = freeze({"lstm_lm": 5, "resnet18": 5, "resnet50": 4, "transformer": 5})
_GAVEL_SYNTHETIC = freeze(
    {
        "n_jobs": 300,
        "arrival_rate_per_h": 10.0,
        "gpu_mix": {1: 70, 2: 10, 4: 15, 8: 5},
        "model_mix": _GAVEL_MODELS,
        "duration_median_s": 4.6 * 3600.0,
        "duration_sigma": 1.3,
        "max_duration_s": 600_000.0,  # 10^4 minutes, Gavel's longest
    }
)
_GEN_SYNTHETIC = _SYNTHETIC  # v3's generator settings (n_jobs 400, sizes 1-64)

#: Busy-load target each case's ``arrival_scale`` was set to at seed 0.
LOAD_TARGETS: dict[str, float] = {}
# The frozen arrival-rate factors (``design_scales()`` recomputes them).
_SCALES: dict[str, float] = {
    "gen-test@vah384": 3.65,
    "gavel-test@kpv108": 0.372,
    "openb-spec33-test@openb": 80.3,
    "gen-val@vah384": 3.22,
    "gavel-val@kpv108": 0.34,
    "openb-spec33-val@openb": 49.0,
    "gen-train@vah384": 3.66,
    "gavel-train@kpv108": 0.45,
    "openb-dev@openb": 35.9,
    "openb-spec33-train@openb": 31.9,
    "quick-gen@vah384": 4.57,
    "quick-gavel@kpv108": 0.675,
    "quick-openb-dev-head80@openb": 25.0,
}


_c = functools.partial(targeted_case, targets=LOAD_TARGETS, scales=_SCALES, split_seeds=_SEEDS)


def _gen(offset: int, spec: tuple[tuple[str, object], ...] = _GEN_SYNTHETIC) -> TypedWorkload:
    rule = GEN_TYPE_RULE
    return TypedWorkload(
        SYNTHETIC,
        synthetic=spec,
        seed_offset=offset,
        iter_times=V100_TIMES,
        accept_only=rule["accept_only"],  # type: ignore[arg-type]
        mem_gib=rule["mem_gib"],  # type: ignore[arg-type]
    )


def _gavel(offset: int) -> TypedWorkload:
    return TypedWorkload(
        SYNTHETIC,
        synthetic=_GAVEL_SYNTHETIC,
        seed_offset=offset,
        iter_times=V100_TIMES,
        multi_gpu_models=_GAVEL_DISTRIBUTED,  # type: ignore[arg-type]
    )


def _file(source: str, part: tuple[float, float] = (0.0, 1.0)) -> TypedWorkload:
    """An openb file on the ``openb`` cluster (its node list is an input too)."""
    return TypedWorkload(
        source, part=part, resample=True, iter_times=V100_TIMES, extra_inputs=(NODE_LIST,)
    )


def typed_cases(quick: bool = False) -> tuple[Case, ...]:
    """The family's cases (train, validation, test), or with ``quick`` its
    quick cases (one per group, smallest setting; never in a split)."""
    vah, kpv, ob = "v100-a100-h100", "gavel-kpv", "openb"
    ib, pcie = "a100_nvlink_ib", "pcie_25gbe"
    if quick:
        return (
            _c("quick-gen@vah384", "synthetic", "test",
               _gen(7500, freeze({**dict(_GEN_SYNTHETIC), "n_jobs": 80})),
               vah, ib, "moderate", "quick: generator seeds 7500-7504, never in a split", 0.4,
               seeds=EVAL_SEEDS),
            _c("quick-gavel@kpv108", "synthetic", "test",
               dataclasses.replace(_gavel(7600), synthetic=freeze(
                   {**_unfrozen(_GAVEL_SYNTHETIC), "n_jobs": 80})),
               kpv, pcie, "none", "quick: generator seeds 7600-7604, never in a split", 0.7,
               seeds=EVAL_SEEDS),
            _c("quick-openb-dev-head80@openb", "alibaba", "test",
               dataclasses.replace(_file(_DEV, (0.1, 0.6)), head=80),
               ob, pcie, "moderate", "quick: the train dev cut's first 80 jobs from 10%", 0.004,
               seeds=EVAL_SEEDS),
        )  # fmt: skip
    return (
        # -- test ----------------------------------------------------------------
        _c("gen-test@vah384", "synthetic", "test", _gen(7000),
           vah, ib, "moderate", _BY_SEED_GEN, 0.9,
           "three generations, 20% of jobs A100/H100 only, 15% needing 40 GiB"),
        _c("gavel-test@kpv108", "synthetic", "test", _gavel(7100),
           kpv, pcie, "none", _BY_SEED_GAVEL, 0.7,
           "Gavel-like jobs on K80/P100/V100; target 0.7: at 0.8, seed 4 (busy load 1.07) "
           "made gavel preempt 14,864 times, above v3's 10,000 per run"),
        _c("openb-spec33-test@openb", "alibaba", "test", _file(_SPEC33, (0.75, 1.0)),
           ob, pcie, "moderate", _BY_TIME_OPENB, 0.02,
           "gpuspec33 (needs `ddl-gym data fetch`): a third of the pods name their types"),
        # -- validation ----------------------------------------------------------
        _c("gen-val@vah384", "synthetic", "validation", _gen(6500),
           vah, ib, "moderate", _BY_SEED_GEN, 0.9),
        _c("gavel-val@kpv108", "synthetic", "validation", _gavel(6600),
           kpv, pcie, "none", _BY_SEED_GAVEL, 0.8),
        _c("openb-spec33-val@openb", "alibaba", "validation", _file(_SPEC33, (0.5, 0.75)),
           ob, pcie, "moderate", _BY_TIME_OPENB, 0.02, "gpuspec33 (needs `ddl-gym data fetch`)"),
        # -- train ---------------------------------------------------------------
        _c("gen-train@vah384", "synthetic", "train", _gen(6000),
           vah, ib, "moderate", _BY_SEED_GEN, 0.9),
        _c("gavel-train@kpv108", "synthetic", "train", _gavel(6100),
           kpv, pcie, "none", _BY_SEED_GAVEL, 0.8),
        _c("openb-dev@openb", "alibaba", "train", _file(_DEV, (0.1, 1.0)),
           ob, pcie, "moderate", _BY_TIME_OPENB, 0.02,
           "the developers' dev cut (always runs with the data dir); from 10%: the first "
           "jobs are months apart, as v3's Alibaba train case"),
        _c("openb-spec33-train@openb", "alibaba", "train", _file(_SPEC33, (0.1, 0.5)),
           ob, pcie, "moderate", _BY_TIME_OPENB, 0.02, "gpuspec33 (needs `ddl-gym data fetch`)"),
    )  # fmt: skip


def _unfrozen(pairs: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    return {k: dict(v) if k.endswith("_mix") else v for k, v in pairs}


def missing_data(case: Case) -> str | None:
    """Why ``case`` cannot run here (its trace file is not under the data
    dir, with the command that fetches it), or None."""
    if case.workload.source == SYNTHETIC and case.shape != "openb":
        return None
    try:
        if case.workload.source != SYNTHETIC:
            data_path(case.workload.source)
        if case.shape == "openb":
            case.cluster()  # reads the node list from the data dir
    except (DataMissingError, ValueError) as err:
        return str(err)
    return None


# -- design and quick runs ----------------------------------------------------------
def v100_equivalent_gpus(cluster: Cluster) -> float:
    """Sum over types of GPUs x speed vs V100 (the catalogue's median speed,
    or the type's assumed ``speed`` for undisclosed types); an untyped
    cluster: its GPU count."""
    if not cluster.typed:
        return float(cluster.num_gpus)
    total = 0.0
    for kind, gpus in zip(cluster.gpu_kinds, cluster.type_capacities(), strict=True):
        speed = kind.speed if kind.speed is not None else get_gpu_type(kind.name).speed
        if speed is None:
            raise ValueError(f"GPU type {kind.name} has no speed: give the kind one")
        total += gpus * speed
    return total


def design_scales(
    names: Sequence[str] | None = None, log: Callable[[str], None] = print
) -> dict[str, float]:
    """The arrival-rate factor of each case (``names``; default all, quick
    included) for its :data:`LOAD_TARGETS` at seed 0: what :data:`_SCALES`
    freezes. Cases whose data is missing are left out (logged)."""
    out = {}
    for case in (*typed_cases(), *typed_cases(quick=True)):
        if names is not None and case.name not in names:
            continue
        why = missing_data(case)
        if why:
            log(f"{case.name}: skipped: {why}")
            continue
        capacity = v100_equivalent_gpus(case.cluster())
        k = arrival_scale_for(case.workload, capacity, LOAD_TARGETS[case.name])  # type: ignore[arg-type]
        log(f"{case.name}: {k}")
        out[case.name] = k
    return out


def quick_best(
    cases: Sequence[Case] | None = None,
    heuristics: Sequence[str] = HEURISTICS_TYPED,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Run each case's ``seed`` with every heuristic; one row per case:
    ``case``, ``best`` (lowest mean JCT), ``mean_jct_s`` per heuristic,
    ``comm`` (multi-server comm/compute per heuristic), ``preemptions``
    (per heuristic), ``cpu_s`` (total
    process time), or ``skipped`` with the reason when its data is missing.
    Default cases: the quick ones (seconds each)."""
    from ddl_gym.baselines import make_policy
    from ddl_gym.benchmarks.policies import PolicySpec
    from ddl_gym.benchmarks.runner import run_case

    rows: list[dict[str, Any]] = []
    for case in typed_cases(quick=True) if cases is None else cases:
        why = missing_data(case)
        if why:
            rows.append({"case": case.name, "skipped": why})
            if log:
                log(f"{case.name}: skipped: {why}")
            continue
        t0 = time.process_time()
        jct: dict[str, float] = {}
        comm: dict[str, float] = {}
        preempt: dict[str, int] = {}
        for name in heuristics:
            spec = PolicySpec(name, lambda name=name: make_policy(name))
            rec = run_case(spec, case, seed)
            jct[name] = rec["mean_jct_s"]
            comm[name] = rec["multi_server_comm_overhead"]
            preempt[name] = int(rec["preemptions"])
        best = min(jct, key=lambda h: (jct[h], h))
        row = {
            "case": case.name,
            "best": best,
            "mean_jct_s": jct,
            "comm": comm,
            "preemptions": preempt,
            "cpu_s": time.process_time() - t0,
        }
        rows.append(row)
        if log:
            log(f"{case.name}: best {best} ({jct[best]:.0f} s), cpu {row['cpu_s']:.1f} s")
    return rows


if __name__ == "__main__":  # python -m ddl_gym.benchmarks.typed_family [--quick]
    import sys

    quick_best(None if "--quick" in sys.argv else typed_cases(), log=print)
