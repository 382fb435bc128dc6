"""Versioned benchmark suites: fixed cases split into train / validation / test.

A :class:`Case` is one workload (:class:`~ddl_gym.benchmarks.workload.Workload`:
a trace family's file or part of it, an arrival-rate factor) on one cluster
shape and fabric under one congestion level, run for a fixed tuple of seeds
(workload seed = the seed, plus the workload's ``seed_offset``; policy seed =
the seed). A :class:`Suite` is a name and its cases; its content hash
(:func:`suite_hash`, SHA-256 of the canonical JSON of every case's
definition, notes left out) is pinned in ``tests/test_benchmarks.py``:
changing a case means a new suite version, never an edit of ``ddl-gym-v1``.

``ddl-gym-v1``
--------------

Families (6): the seed's Helios-derived JSON (``seed``), Philly, Alibaba
openb, Pollux, Tiresias, and the synthetic heavy-tailed generator. Shapes
(5) on 4 fabrics: ``4x2x8`` on the seed authors' fabric (the seed's 64 GPUs, 16-GPU
racks), ``4x4x4`` and ``4x4x8`` on commodity PCIe/25 GbE (64 and 128 GPUs), ``4x4x8``
on V100 NVLink servers with one 100 GbE NIC each (128 GPUs),
``2x2x4`` PCIe (16 GPUs) and ``32x2x8`` NVSwitch/InfiniBand (512 GPUs in
16-GPU racks: every job larger than 16 GPUs crosses racks). Congestion: none,
moderate and heavy.

Loads: each case's ``arrival_scale`` was chosen (``arrival_scale_for``, at
design time; the number is frozen here) so that the jobs keep 90% of the
GPUs busy while they arrive (:func:`~ddl_gym.benchmarks.workload.busy_load`:
work past the last arrival is not counted; with heavy-tailed durations the
plain offered load, total work over the arrival span, says little about
queues). A case where every policy ties measures nothing, so each test and
validation case was kept only after the heuristics were run on it: the
design table (best and worst non-oracle heuristic, spread of mean JCT, the
comm overhead of multi-server jobs) is in ``docs/benchmark.md``, and
``tests/test_benchmarks.py`` checks that every test case still discriminates.

Disjointness (stated per case in ``Case.disjoint``):

* seed: by file. The 411-job files (``*proc-*``) and the 500-job files
  (``*jobsPday``) each share one job set with different arrival processes;
  train gets 3proc-week, 3proc-day and 25jobsPday, validation 75jobsPday,
  test 1proc-week and 100jobsPday (the split the shipped agent trained on).
* Philly, Alibaba: by time: the first 60% of the jobs (in arrival order) for
  train, the next 15% for validation, the last 25% for test.
* Pollux: by file: workloads 1-4 train, 5 validation, 6-8 test.
* Tiresias: its one 60-job file is test only (a held-out family).
* synthetic: by generator seed: train 0.., validation 500.., test 1000..
  (quick cases 2000..).

The ``quick`` sub-suite: three tiny test-like cases (seconds for all
heuristics) for CI and smoke runs; it is not a split of ``ddl-gym-v1`` and
not part of any leaderboard.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddl_gym.benchmarks.workload import SYNTHETIC, Workload, freeze
from ddl_gym.topology import Cluster, get_cluster

SPLITS = ("train", "validation", "test")
FAMILIES = ("seed", "philly", "alibaba", "pollux", "tiresias", "synthetic", "sia")
# The heuristics whose best defines the normalised score of ddl-gym-v1 and
# -v2 (``ddl_gym.baselines.HEURISTICS`` when they were designed), frozen
# here: a variant registered later never joins an old suite's baseline.
LEGACY_HEURISTICS = (
    "fifo",
    "consolidation",
    "tiresias",
    "gandiva",
    "dally-delay",
    "dally-1-2",
    "dally-6-12",
    "dally",
)


@dataclass(frozen=True)
class Case:
    """One benchmark case (see the module docstring).

    ``note`` (why the case is in) is documentation, left out of the hash.
    """

    name: str
    family: str
    split: str
    workload: Workload
    shape: str  # "RxSxG": racks x servers per rack x GPUs per server
    fabric: str
    congestion: str
    seeds: tuple[int, ...]
    disjoint: str
    note: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ValueError(f"case {self.name!r}: split must be one of {SPLITS}")
        if self.family not in FAMILIES:
            raise ValueError(f"case {self.name!r}: family must be one of {FAMILIES}")

    def cluster(self) -> Cluster:
        return get_cluster(self.shape, self.fabric)

    def definition(self) -> dict[str, Any]:
        """The case as plain JSON data (what the hash covers)."""
        out = dataclasses.asdict(self)
        out.pop("note")
        for key in ("resample", "iter_times"):  # added for v3: older cases keep their hash
            if not out["workload"][key]:
                out["workload"].pop(key)
        return out


@dataclass(frozen=True)
class Suite:
    name: str
    cases: tuple[Case, ...]
    quick: tuple[Case, ...] = ()
    # the non-oracle heuristics whose best mean JCT per case is the baseline
    # of the normalised score (consumers read this, not baselines.HEURISTICS)
    heuristics: tuple[str, ...] = LEGACY_HEURISTICS
    # the hash covers each input file's SHA-256: a suite is its data too.
    # True for every suite from ddl-gym-v3 on (the default, so a new suite
    # cannot forget it); v1 and v2 say False: their pinned hashes cover names.
    hash_inputs: bool = True

    def select(self, split: str = "test", quick: bool = False) -> tuple[Case, ...]:
        """The cases of ``split`` (``"all"``: every split); ``quick``: the quick
        sub-suite instead (whatever ``split``)."""
        if quick:
            return self.quick
        if split == "all":
            return self.cases
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; known: {', '.join(SPLITS)}, all")
        return tuple(c for c in self.cases if c.split == split)

    def case(self, name: str) -> Case:
        for c in self.cases + self.quick:
            if c.name == name:
                return c
        raise KeyError(f"suite {self.name!r} has no case {name!r}")

    def definition(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "cases": [c.definition() for c in self.cases],
            "quick": [c.definition() for c in self.quick],
        }
        if self.heuristics != LEGACY_HEURISTICS:  # v1/v2 keep their hash
            out["heuristics"] = list(self.heuristics)
        return out


def suite_hash(suite: Suite, data_dir: str | Path | None = None) -> str:
    """SHA-256 of the suite's canonical JSON (sorted keys, no whitespace).

    With ``suite.hash_inputs`` each case's definition also holds its input
    files' SHA-256 (``"inputs"``: relative path -> digest): as the data
    manifest pins them, or with ``data_dir`` as the files under it are, so
    that a changed byte of an input changes the hash."""
    definition = suite.definition()
    if suite.hash_inputs:
        from ddl_gym.benchmarks.provenance import actual_inputs, pinned_inputs

        for key, cases in (("cases", suite.cases), ("quick", suite.quick)):
            for case, entry in zip(cases, definition[key], strict=True):
                entry["inputs"] = (
                    pinned_inputs(case) if data_dir is None else actual_inputs(case, data_dir)
                )
    text = json.dumps(definition, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


# -- ddl-gym-v1 ------------------------------------------------------------------
_SEED = "traces/dally/sense_500jobs_"
_PHILLY = "traces/philly/philly_2017-11-13_to_2017-11-19.csv"
_ALIBABA = "traces/alibaba_openb/openb_pod_list_default_dev.csv"
_POLLUX = "traces/pollux_workloads/workload-"
_TIRESIAS = "traces/tiresias/60_job.csv"

# The heavy-tailed generator: Philly-like share of 1-GPU jobs, sizes up to 64
# GPUs (4 racks of the 512-GPU shape), log-normal durations (median 2 h,
# sigma 1.5, capped at 3 days), the Helios model mix.
_SYNTHETIC = freeze(
    {
        "n_jobs": 400,
        "arrival_rate_per_h": 10.0,
        "gpu_mix": {1: 30, 2: 10, 4: 15, 8: 25, 16: 10, 32: 7, 64: 3},
        "duration_median_s": 7200.0,
        "duration_sigma": 1.5,
        "max_duration_s": 3 * 86400.0,
    }
)
_SYNTHETIC_QUICK = freeze(
    {
        "n_jobs": 60,
        "arrival_rate_per_h": 10.0,
        "gpu_mix": {1: 30, 2: 10, 4: 30, 8: 30},
        "duration_median_s": 1800.0,
        "duration_sigma": 1.2,
        "max_duration_s": 86400.0,
    }
)

_SEEDS = (0, 1, 2)
_BY_FILE_SEED = (
    "by file: train 3proc-week/3proc-day/25jobsPday, val 75jobsPday, test 1proc-week/100jobsPday"
)
_BY_TIME = "by time: jobs [0, 60%) train, [60%, 75%) validation, [75%, 100%) test, in arrival order"
_BY_FILE_POLLUX = "by file: workloads 1-4 train, 5 validation, 6-8 test"
_BY_SEED = "by generator seed: train 0-2, validation 500-502, test 1000-1002"


def _case(
    name: str,
    family: str,
    split: str,
    workload: Workload,
    shape: str,
    fabric: str,
    congestion: str,
    disjoint: str,
    note: str = "",
) -> Case:
    return Case(name, family, split, workload, shape, fabric, congestion, _SEEDS, disjoint, note)


def _v1() -> Suite:
    seed, pcie, nvs, v100 = "seed", "pcie_25gbe", "nvswitch_ib", "v100_nvlink_100gbe"
    W = Workload
    syn = {"source": SYNTHETIC, "synthetic": _SYNTHETIC}
    cases = (
        # -- test ------------------------------------------------------------
        _case("seed-1proc-week@seed64", "seed", "test",
              W(_SEED + "poisson_1proc-week.json", arrival_scale=0.736),
              "4x2x8", seed, "moderate", _BY_FILE_SEED),
        _case("seed-100jobsPday@v100x128", "seed", "test",
              W(_SEED + "poisson-100jobsPday.json", arrival_scale=2.54),
              "4x4x8", v100, "heavy", _BY_FILE_SEED),
        _case("philly-test@xrack512", "philly", "test",
              W(_PHILLY, part=(0.75, 1.0), arrival_scale=6.35),
              "32x2x8", nvs, "heavy", _BY_TIME),
        _case("philly-test@v100x128", "philly", "test",
              W(_PHILLY, part=(0.75, 1.0), arrival_scale=0.514),
              "4x4x8", v100, "none", _BY_TIME),
        _case("alibaba-test@pcie64", "alibaba", "test",
              W(_ALIBABA, part=(0.75, 1.0), arrival_scale=17.6),
              "4x4x4", pcie, "moderate", _BY_TIME),
        _case("pollux-6@pcie128", "pollux", "test",
              W(_POLLUX + "6.csv", arrival_scale=5.34),
              "4x4x8", pcie, "moderate", _BY_FILE_POLLUX),
        _case("pollux-7@pcie64", "pollux", "test",
              W(_POLLUX + "7.csv", arrival_scale=0.332),
              "4x4x4", pcie, "none", _BY_FILE_POLLUX),
        _case("pollux-8@seed64", "pollux", "test",
              W(_POLLUX + "8.csv", arrival_scale=0.745),
              "4x2x8", seed, "heavy", _BY_FILE_POLLUX),
        _case("tiresias-60@pcie16", "tiresias", "test",
              W(_TIRESIAS, catalogue_iter_time=True, arrival_scale=1.08),
              "2x2x4", pcie, "moderate", "held-out family: its one file is test only"),
        _case("synthetic-test@xrack512", "synthetic", "test",
              W(**syn, seed_offset=1000, arrival_scale=1.53),
              "32x2x8", nvs, "heavy", _BY_SEED),
        _case("synthetic-test@v100x128", "synthetic", "test",
              W(**syn, seed_offset=1000, arrival_scale=0.269),
              "4x4x8", v100, "none", _BY_SEED),
        # -- validation ------------------------------------------------------
        _case("seed-75jobsPday@seed64", "seed", "validation",
              W(_SEED + "poisson-75jobsPday.json", arrival_scale=1.37),
              "4x2x8", seed, "moderate", _BY_FILE_SEED),
        _case("philly-val@pcie128", "philly", "validation",
              W(_PHILLY, part=(0.6, 0.75), arrival_scale=3.87),
              "4x4x8", pcie, "moderate", _BY_TIME),
        _case("alibaba-val@pcie64", "alibaba", "validation",
              W(_ALIBABA, part=(0.6, 0.75), arrival_scale=24.8),
              "4x4x4", pcie, "heavy", _BY_TIME),
        _case("pollux-5@pcie128", "pollux", "validation",
              W(_POLLUX + "5.csv", arrival_scale=1.14),
              "4x4x8", pcie, "moderate", _BY_FILE_POLLUX),
        _case("synthetic-val@xrack512", "synthetic", "validation",
              W(**syn, seed_offset=500, arrival_scale=1.43),
              "32x2x8", nvs, "heavy", _BY_SEED),
        # -- train -----------------------------------------------------------
        _case("seed-3proc-week@seed64", "seed", "train",
              W(_SEED + "poisson_3proc-week.json", arrival_scale=1.43),
              "4x2x8", seed, "heavy", _BY_FILE_SEED),
        _case("seed-3proc-day@v100x128", "seed", "train",
              W(_SEED + "poisson_3proc-day.json", arrival_scale=0.41),
              "4x4x8", v100, "moderate", _BY_FILE_SEED),
        _case("seed-25jobsPday@pcie64", "seed", "train",
              W(_SEED + "poisson-25jobsPday.json", arrival_scale=2.71),
              "4x4x4", pcie, "none", _BY_FILE_SEED),
        _case("philly-train@xrack512", "philly", "train",
              W(_PHILLY, part=(0.0, 0.6), arrival_scale=6.71),
              "32x2x8", nvs, "heavy", _BY_TIME),
        _case("philly-train@v100x128", "philly", "train",
              W(_PHILLY, part=(0.0, 0.6), arrival_scale=0.447),
              "4x4x8", v100, "none", _BY_TIME),
        _case("alibaba-train@pcie64", "alibaba", "train",
              W(_ALIBABA, part=(0.1, 0.6), arrival_scale=17.6),
              "4x4x4", pcie, "moderate",
              _BY_TIME + " (train starts at 10%: the first jobs are months apart)"),
        _case("pollux-1@pcie128", "pollux", "train",
              W(_POLLUX + "1.csv", arrival_scale=10.8),
              "4x4x8", pcie, "moderate", _BY_FILE_POLLUX),
        _case("pollux-2@pcie64", "pollux", "train",
              W(_POLLUX + "2.csv", arrival_scale=0.446),
              "4x4x4", pcie, "none", _BY_FILE_POLLUX),
        _case("pollux-3@seed64", "pollux", "train",
              W(_POLLUX + "3.csv", arrival_scale=2.94),
              "4x2x8", seed, "heavy", _BY_FILE_POLLUX),
        _case("pollux-4@pcie128", "pollux", "train",
              W(_POLLUX + "4.csv", arrival_scale=2.3),
              "4x4x8", pcie, "moderate", _BY_FILE_POLLUX),
        _case("synthetic-train@xrack512", "synthetic", "train",
              W(**syn, arrival_scale=2.71),
              "32x2x8", nvs, "heavy", _BY_SEED),
        _case("synthetic-train@v100x128", "synthetic", "train",
              W(**syn, arrival_scale=0.407),
              "4x4x8", v100, "none", _BY_SEED),
    )  # fmt: skip
    quick = (
        _case("quick-tiresias-60@pcie16", "tiresias", "test",
              W(_TIRESIAS, catalogue_iter_time=True, arrival_scale=1.08),
              "2x2x4", pcie, "moderate", "quick: the test case itself (60 jobs)"),
        _case("quick-pollux-6-head60@pcie32", "pollux", "test",
              W(_POLLUX + "6.csv", head=60, arrival_scale=0.731),
              "2x2x8", pcie, "moderate", "quick: the first 60 jobs of a test file"),
        _case("quick-synthetic@pcie16", "synthetic", "test",
              W(SYNTHETIC, synthetic=_SYNTHETIC_QUICK, seed_offset=2000, arrival_scale=0.353),
              "2x2x4", pcie, "heavy", "quick: generator seeds 2000-2002, never in a split"),
    )  # fmt: skip
    return Suite("ddl-gym-v1", cases, quick, hash_inputs=False)


# -- ddl-gym-v2 ------------------------------------------------------------------
_V2_SEEDS = tuple(range(10))


def _v2_disjoint(text: str) -> str:
    """v1's statement, with v2's ten validation generator seeds."""
    return text.replace("validation 500-502", "validation 500-509")


def _v2() -> Suite:
    """``ddl-gym-v1`` with a larger validation split; train, test and quick
    cases are v1's, unchanged (so v1's test records and cards hold for v2).

    Validation: v1's five cases plus five more, each built only from
    validation data (Pollux workload 5, Philly and Alibaba jobs [60%, 75%),
    the 75jobsPday seed file, synthetic seeds 500..) and put in a shape and
    congestion v1's validation lacks: two 16-GPU clusters (Tiresias best on
    Philly's jobs, Dally on Alibaba's, as on ``tiresias-60@pcie16``'s shape),
    the seed's 64-GPU fabric under heavy congestion (Tiresias best), and
    128 GPUs with no congestion / heavy (Gandiva best). Every validation
    case runs 10 seeds, not 3: on v1's five cases, choices 0.01 apart flipped
    between seeds 0-2 and 3-9 (docs/agents.md, "How noisy that choice was").
    Loads chosen as v1's (busy load 0.9 at seed 0)."""
    v1 = _v1()
    seed, pcie, v100 = "seed", "pcie_25gbe", "v100_nvlink_100gbe"
    W = Workload
    syn = {"source": SYNTHETIC, "synthetic": _SYNTHETIC}
    extra = (
        _case("pollux-5@seed64", "pollux", "validation",
              W(_POLLUX + "5.csv", arrival_scale=0.403),
              "4x2x8", seed, "heavy", _BY_FILE_POLLUX),
        _case("philly-val@pcie16", "philly", "validation",
              W(_PHILLY, part=(0.6, 0.75), arrival_scale=0.0263),
              "2x2x4", pcie, "moderate", _BY_TIME),
        _case("alibaba-val@pcie16", "alibaba", "validation",
              W(_ALIBABA, part=(0.6, 0.75), arrival_scale=2.27),
              "2x2x4", pcie, "moderate", _BY_TIME),
        _case("synthetic-val@v100x128", "synthetic", "validation",
              W(**syn, seed_offset=500, arrival_scale=0.233),
              "4x4x8", v100, "none", _BY_SEED),
        _case("seed-75jobsPday@v100x128", "seed", "validation",
              W(_SEED + "poisson-75jobsPday.json", arrival_scale=2.89),
              "4x4x8", v100, "heavy", _BY_FILE_SEED),
    )  # fmt: skip
    validation = tuple(
        dataclasses.replace(c, seeds=_V2_SEEDS, disjoint=_v2_disjoint(c.disjoint))
        for c in (*v1.select("validation"), *extra)
    )
    cases = (*v1.select("test"), *validation, *v1.select("train"))
    return Suite("ddl-gym-v2", cases, v1.quick, hash_inputs=False)


def _v3() -> Suite:
    from ddl_gym.benchmarks.suite_v3 import v3_suite  # it imports this module

    return v3_suite()


SUITES = {"ddl-gym-v1": _v1, "ddl-gym-v2": _v2, "ddl-gym-v3": _v3}


def get_suite(name: str = "ddl-gym-v1") -> Suite:
    try:
        return SUITES[name]()
    except KeyError:
        raise ValueError(f"unknown suite {name!r}; known: {', '.join(SUITES)}") from None
