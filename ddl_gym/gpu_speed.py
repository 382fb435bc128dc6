"""Per-GPU-type speed model: a job's throughput on type B from type A.

The prediction is ``thr_B = thr_A * ratio(A -> B)``. The ratio is learnt from
measured 1-GPU throughputs of other job types (a job type is a model at one
batch size, Gavel's unit):

1. ``family``: the same model family (e.g. ResNet-50) at the nearest measured
   batch size (distance in log batch size; ties: geometric mean). Batch size
   decides how compute-bound a step is, so the nearest one carries the ratio
   best.
2. ``global``: no measured job of the family: the median ratio over all
   measured job types.
3. ``datasheet``: a type pair with no measurement: the catalogue speeds
   (:mod:`ddl_gym.gpu_types`).

:func:`cross_validate` holds out one job type at a time (``"job"``) or a
whole family (``"family"``, a network never measured) and scores every
ordered type pair.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .fidelity.measured import MeasuredTableError
from .gpu_types import GAVEL_NAMES, get_gpu_type

__all__ = [
    "GAVEL_FLAT",
    "CvResult",
    "CvRow",
    "GAVEL_PHYSICAL",
    "SpeedModel",
    "cross_validate",
    "job_family",
    "campaign_difference",
    "read_gavel_json_single_gpu",
    "read_gavel_single_gpu",
]

GAVEL_FLAT = "profiles/gavel/isolated_throughputs_flat.csv"
# Gavel's second measuring campaign (same job types, 66 of the 78 1-GPU values differ)
GAVEL_PHYSICAL = "profiles/gavel/physical_cluster_throughputs.json"

# {(job type, catalogue type name): 1-GPU iterations per second}
Throughputs = Mapping[tuple[str, str], float]

_JOB = re.compile(r"^(?P<family>.+?)(?: \(batch size (?P<bsz>\d+)\))?$")


def job_family(job: str) -> tuple[str, float | None]:
    """``'ResNet-50 (batch size 64)'`` -> ``('ResNet-50', 64.0)``; no batch -> None."""
    m = _JOB.match(job)
    assert m is not None  # the pattern matches any string
    return m["family"], float(m["bsz"]) if m["bsz"] else None


def read_gavel_single_gpu(path: str | Path) -> dict[tuple[str, str], float]:
    """1-GPU, one-server throughputs from Gavel's flattened table.

    Keys are ``(job type, catalogue type name)``; zeros (not profiled) are
    left out. Bad input raises :class:`MeasuredTableError` naming row and field.
    """
    path = Path(path)
    if not path.is_file():
        raise MeasuredTableError(path, "file not found")
    required = ("gpu_type", "consolidated", "job_type", "num_gpus", "steps_per_sec")
    out: dict[tuple[str, str], float] = {}
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise MeasuredTableError(path, f"missing column(s) {', '.join(missing)}")
        for i, cells in enumerate(reader, start=1):
            gpu = (cells["gpu_type"] or "").strip().lower()
            if gpu not in GAVEL_NAMES:
                raise MeasuredTableError(
                    path, f"unknown GPU type {cells['gpu_type']!r}", i, "gpu_type"
                )
            if (cells["consolidated"] or "").strip() != "1":
                continue
            if (cells["num_gpus"] or "").strip() != "1":
                continue
            try:
                thr = float(cells["steps_per_sec"])
            except (TypeError, ValueError):
                raise MeasuredTableError(
                    path, f"not a number: {cells['steps_per_sec']!r}", i, "steps_per_sec"
                ) from None
            if not math.isfinite(thr) or thr < 0:
                raise MeasuredTableError(path, f"must be >= 0, got {thr}", i, "steps_per_sec")
            if thr > 0:
                out[((cells["job_type"] or "").strip(), GAVEL_NAMES[gpu])] = thr
    if not out:
        raise MeasuredTableError(path, "no 1-GPU one-server rows")
    return out


_KEY = re.compile(r"^\('(?P<job>[^']+)', (?P<gpus>\d+)\)$")


def read_gavel_json_single_gpu(path: str | Path) -> dict[tuple[str, str], float]:
    """1-GPU, one-server (consolidated) throughputs from one of Gavel's JSON
    tables (``{worker_type: {"('<job>', <gpus>)": {"null": thr, ...}}}``);
    zeros (not profiled) are left out. Rows are named by their key path."""
    path = Path(path)
    if not path.is_file():
        raise MeasuredTableError(path, "file not found")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise MeasuredTableError(path, f"not valid JSON: {err}") from err
    if not isinstance(data, dict):
        raise MeasuredTableError(path, "top level must be an object {worker_type: {...}}")
    out: dict[tuple[str, str], float] = {}
    for worker in GAVEL_NAMES:
        jobs = data.get(worker)
        if not isinstance(jobs, dict):
            raise MeasuredTableError(path, "missing or not an object", worker)
        for key, entry in jobs.items():
            m = _KEY.match(key)
            if not m:
                raise MeasuredTableError(path, "bad job key", f"{worker}/{key}", "key")
            if m["gpus"] != "1":
                continue
            value = entry.get("null") if isinstance(entry, dict) else None
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise MeasuredTableError(
                    path, f"not a throughput: {value!r}", f"{worker}/{key}", "null"
                )
            if value > 0:
                out[(m["job"], GAVEL_NAMES[worker])] = float(value)
    if not out:
        raise MeasuredTableError(path, "no 1-GPU rows")
    return out


def campaign_difference(first: Throughputs, second: Throughputs) -> list[float]:
    """Per job type and ordered type pair measured in both campaigns, how far
    the second campaign's throughput ratio is from the first's
    (``|r2 / r1 - 1|``): the floor no ratio model can beat."""
    out = []
    jobs = sorted({j for j, _ in first} & {j for j, _ in second})
    types = sorted({t for _, t in first} & {t for _, t in second})
    for j in jobs:
        for a, b in itertools.permutations(types, 2):
            keys = ((j, a), (j, b))
            if all(k in first and k in second for k in keys):
                r1 = first[(j, b)] / first[(j, a)]
                r2 = second[(j, b)] / second[(j, a)]
                out.append(abs(r2 / r1 - 1))
    return out


Source = Literal["family", "global", "datasheet"]


@dataclass(frozen=True)
class SpeedModel:
    """Ratios learnt from ``throughputs`` (see the module docstring)."""

    throughputs: Mapping[tuple[str, str], float]

    def _jobs_on(self, a: str, b: str) -> list[str]:
        jobs = {j for j, _ in self.throughputs}
        return sorted(j for j in jobs if (j, a) in self.throughputs and (j, b) in self.throughputs)

    def _log_ratio(self, job: str, a: str, b: str) -> float:
        return math.log(self.throughputs[(job, b)] / self.throughputs[(job, a)])

    def ratio(self, job: str, a: str, b: str) -> tuple[float, Source]:
        """Throughput ratio ``thr_b / thr_a`` for ``job`` and where it came from."""
        a, b = get_gpu_type(a).name, get_gpu_type(b).name
        if a == b:
            return 1.0, "family"
        both = self._jobs_on(a, b)
        family, bsz = job_family(job)
        same = [j for j in both if job_family(j)[0] == family]
        if same:
            if bsz is not None:
                dist = {j: abs(math.log((job_family(j)[1] or bsz) / bsz)) for j in same}
                best = min(dist.values())
                same = [j for j in same if dist[j] <= best + 1e-12]
            return math.exp(statistics.fmean(self._log_ratio(j, a, b) for j in same)), "family"
        if both:
            return math.exp(statistics.median(self._log_ratio(j, a, b) for j in both)), "global"
        sa, sb = get_gpu_type(a).speed, get_gpu_type(b).speed
        if sa is None or sb is None:
            raise KeyError(f"no speed for GPU type {a if sa is None else b!r} (undisclosed)")
        return sb / sa, "datasheet"

    def predict(self, job: str, a: str, thr_a: float, b: str) -> float:
        """Throughput of ``job`` on ``b`` given ``thr_a`` measured on ``a``."""
        return thr_a * self.ratio(job, a, b)[0]


@dataclass(frozen=True)
class CvRow:
    job: str
    a: str
    b: str
    measured: float
    predicted: float
    source: Source

    @property
    def rel_error(self) -> float:
        return abs(self.predicted - self.measured) / self.measured


@dataclass(frozen=True)
class CvResult:
    holdout: Literal["job", "family"]
    rows: tuple[CvRow, ...]

    @property
    def median_error(self) -> float:
        return statistics.median(r.rel_error for r in self.rows)

    def median_by(self, key: Literal["family", "pair"]) -> dict[str, float]:
        """Median relative error per model family or per ordered type pair."""
        groups: dict[str, list[float]] = {}
        for r in self.rows:
            k = job_family(r.job)[0] if key == "family" else f"{r.a} -> {r.b}"
            groups.setdefault(k, []).append(r.rel_error)
        return {k: statistics.median(v) for k, v in sorted(groups.items())}


def cross_validate(throughputs: Throughputs, holdout: Literal["job", "family"] = "job") -> CvResult:
    """Leave one job type (or one family) out; predict each held-out job on
    every type from its measured throughput on every other type."""
    jobs = sorted({j for j, _ in throughputs})
    types = sorted({t for _, t in throughputs})
    rows = []
    for held in jobs:
        fam = job_family(held)[0]
        train = {
            k: v
            for k, v in throughputs.items()
            if (k[0] != held if holdout == "job" else job_family(k[0])[0] != fam)
        }
        model = SpeedModel(train)
        for a, b in itertools.permutations(types, 2):
            if (held, a) not in throughputs or (held, b) not in throughputs:
                continue
            r, src = model.ratio(held, a, b)
            rows.append(CvRow(held, a, b, throughputs[(held, b)], throughputs[(held, a)] * r, src))
    return CvResult(holdout, tuple(rows))


def measured_speeds(throughputs: Throughputs, reference: str = "V100-16GB") -> dict[str, float]:
    """Per type, the median over job types of the 1-GPU throughput ratio to
    ``reference`` (the catalogue's measured ``speed``)."""
    types = sorted({t for _, t in throughputs})
    jobs = sorted({j for j, _ in throughputs})
    out = {}
    for t in types:
        ratios = [
            throughputs[(j, t)] / throughputs[(j, reference)]
            for j in jobs
            if (j, t) in throughputs and (j, reference) in throughputs
        ]
        out[t] = statistics.median(ratios)
    return out
