"""The heuristics' records that ship with the package: what a policy's
normalised score is measured against.

``ddl_gym/benchmarks/reference/<suite>.json`` holds, for the test and
validation splits and the quick sub-suite, every record of each of the
suite's heuristics (``Suite.heuristics``) on each (case, seed), with its
provenance, and (when :mod:`ddl_gym.benchmarks.bounds` is there) the lower
bound on mean JCT of each (case, seed). Scoring a new policy then costs only
its own runs: ``evaluate(policy, suite, split).card()``.

    ddl-gym benchmark reference --suite ddl-gym-v1            # rerun, write
    ddl-gym benchmark reference --suite ddl-gym-v1 --check    # rerun, compare

``--check`` passes when the rerun gives the same records apart from
``cpu_s`` and the code commit, numbers to a relative 1e-9 (the engine is
deterministic; other numpy/libm builds move floats' last bits, 1e-15).

The file is compact JSON: per split, the provenance shared by every record
(suite, suite hash, ddl-gym version, commit) once, each case's input
checksums once, each distinct engine-settings dict once, and the records
as rows of a column list; :func:`Reference.records` rebuilds the records
exactly (the writer checks that it does).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

FORMAT = 1
REFERENCE_DIR = Path(__file__).with_name("reference")
REFERENCE_SPLITS = ("test", "validation", "quick")
COMMON = ("suite", "suite_hash", "ddl_gym", "commit")  # provenance shared by a split
IGNORED = ("cpu_s",)  # fields a rerun may change (besides the commit)


class ReferenceError(LookupError):
    """No reference records for what was asked, or records that do not fit."""


def reference_path(suite: str) -> Path:
    """Where the package keeps ``suite``'s reference records."""
    return REFERENCE_DIR / f"{suite}.json"


def regenerate_command(suite: str, split: str | None = None) -> str:
    return f"ddl-gym benchmark reference --suite {suite}" + (f" --split {split}" if split else "")


@dataclass(frozen=True)
class SplitReference:
    """One split's heuristic records and bounds."""

    records: list[dict[str, Any]]
    bounds: dict[tuple[str, int], float] = field(default_factory=dict)

    @property
    def provenance(self) -> dict[str, Any]:
        """The provenance every record of the split shares (suite, suite hash,
        ddl-gym version, commit)."""
        if not self.records:
            return {}
        return {k: self.records[0]["provenance"].get(k) for k in COMMON}

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.records)


@dataclass(frozen=True)
class Reference:
    """A suite's reference records: ``splits`` maps ``test`` / ``validation``
    / ``quick`` to a :class:`SplitReference`."""

    suite: str
    suite_hash: str
    heuristics: tuple[str, ...]
    splits: dict[str, SplitReference]
    path: Path | None = None

    def split(self, name: str) -> SplitReference:
        try:
            return self.splits[name]
        except KeyError:
            where = self.path or reference_path(self.suite)
            raise ReferenceError(
                f"{where} holds no reference records of {self.suite} {name} "
                f"(it holds {', '.join(self.splits) or 'none'}); make them with "
                f"`{regenerate_command(self.suite, name)}`"
            ) from None

    # -- JSON ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "suite": self.suite,
            "suite_hash": self.suite_hash,
            "heuristics": list(self.heuristics),
            "command": regenerate_command(self.suite),
            "splits": {name: _pack(part) for name, part in self.splits.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], path: Path | None = None) -> Reference:
        if data.get("format") != FORMAT:
            raise ReferenceError(f"{path}: reference format {data.get('format')!r}, want {FORMAT}")
        return cls(
            suite=str(data["suite"]),
            suite_hash=str(data["suite_hash"]),
            heuristics=tuple(data["heuristics"]),
            splits={name: _unpack(part) for name, part in data["splits"].items()},
            path=path,
        )

    def write(self, path: str | Path) -> Path:
        """Write the compact JSON (atomically); checks that it reads back as
        the very same records."""
        out = Path(path)
        data = self.to_json()
        back = Reference.from_json(data)
        for name, part in self.splits.items():
            if back.splits[name].records != part.records or back.splits[name].bounds != part.bounds:
                raise AssertionError(f"reference {name}: the compact form does not round-trip")
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data, separators=(",", ":"), sort_keys=True) + "\n")
        os.replace(tmp, out)
        return out


def _pack(part: SplitReference) -> dict[str, Any]:
    """One split as shared provenance + per-case inputs + distinct engine
    settings + rows."""
    records = part.records
    common = part.provenance
    inputs: dict[str, dict[str, str]] = {}
    engines: list[dict[str, Any]] = []
    engine_ids: dict[str, int] = {}
    columns = sorted({k for r in records for k in r if k != "provenance"})
    rows = []
    for r in records:
        prov = r["provenance"]
        extra = set(prov) - {*COMMON, "inputs", "engine", "policy"}
        if any(prov.get(k) != common[k] for k in COMMON) or extra or prov["policy"] != r["policy"]:
            raise ValueError(f"record {r['policy']} {r['case']} s{r['seed']}: mixed provenance")
        if inputs.setdefault(r["case"], prov["inputs"]) != prov["inputs"]:
            raise ValueError(f"case {r['case']}: records read different inputs")
        key = json.dumps(prov["engine"], sort_keys=True)
        if key not in engine_ids:
            engine_ids[key] = len(engines)
            engines.append(prov["engine"])
        if set(r) - {"provenance"} != set(columns):
            raise ValueError(f"record {r['policy']} {r['case']} s{r['seed']}: other fields")
        rows.append([r[c] for c in columns] + [engine_ids[key]])
    bounds: dict[str, dict[str, float]] = {}
    for (case, seed), value in sorted(part.bounds.items()):
        bounds.setdefault(case, {})[str(seed)] = value
    return {
        "provenance": common,
        "inputs": inputs,
        "engines": engines,
        "columns": columns,
        "rows": rows,
        "bounds": bounds,
    }


def _unpack(data: Mapping[str, Any]) -> SplitReference:
    columns = list(data["columns"])
    common = dict(data["provenance"])
    records = []
    for row in data["rows"]:
        r = dict(zip(columns, row[:-1], strict=True))
        r["provenance"] = {
            **common,
            "inputs": dict(data["inputs"][r["case"]]),
            "policy": r["policy"],
            "engine": dict(data["engines"][row[-1]]),
        }
        records.append(r)
    bounds = {
        (case, int(seed)): float(v)
        for case, per in data.get("bounds", {}).items()
        for seed, v in per.items()
    }
    return SplitReference(records, bounds)


# -- loading -----------------------------------------------------------------------------
@lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int) -> Reference:
    return Reference.from_json(json.loads(Path(path).read_text()), Path(path))


def load_reference(suite: str, path: str | Path | None = None) -> Reference:
    """``suite``'s reference records (the shipped file, or ``path``).
    Raises :class:`ReferenceError` when there is none, or when it was made
    for another content of the suite (its hash differs)."""
    from ddl_gym.benchmarks.provenance import suite_fingerprint

    where = Path(path) if path is not None else reference_path(suite)
    if not where.is_file():
        raise ReferenceError(
            f"no reference records for {suite} ({where} is missing); make them with "
            f"`{regenerate_command(suite)}`"
        )
    ref = _load_cached(str(where), where.stat().st_mtime_ns)
    if ref.suite != suite:
        raise ReferenceError(f"{where} holds the reference of {ref.suite}, not {suite}")
    now = suite_fingerprint(suite)
    if now is not None and ref.suite_hash != now:
        raise ReferenceError(
            f"{where} was made for {suite} with hash {ref.suite_hash}; the suite now hashes "
            f"{now}: regenerate it with `{regenerate_command(suite)}`"
        )
    return ref


# -- making and checking -----------------------------------------------------------------
def lower_bounds() -> Callable[[Any, int], float] | None:
    """``ddl_gym.benchmarks.bounds.case_lower_bound`` when that module is there."""
    try:
        from ddl_gym.benchmarks.bounds import case_lower_bound
    except ImportError:
        return None
    return case_lower_bound


def generate_split(suite: str, split: str, progress: bool = False) -> SplitReference:
    """Run every heuristic of ``suite`` on ``split`` (``quick``: the quick
    sub-suite) and, when the bound exists, compute each (case, seed)'s bound."""
    from ddl_gym.benchmarks.evaluate import evaluate
    from ddl_gym.benchmarks.suite import get_suite

    the_suite = get_suite(suite)
    quick = split == "quick"
    records: list[dict[str, Any]] = []
    for h in the_suite.heuristics:
        scores = evaluate(h, suite, "test" if quick else split, quick=quick, progress=progress)
        if not scores.unsupported.empty:
            raise ReferenceError(f"{h} cannot run every case of {suite} {split}")
        records += [_plain(r) for r in scores.records.to_dict("records")]
    bound = lower_bounds()
    bounds: dict[tuple[str, int], float] = {}
    if bound is not None:
        for case in the_suite.select(split, quick=quick):
            for seed in case.seeds:
                bounds[(case.name, seed)] = float(bound(case, seed))
    return SplitReference(records, bounds)


def _plain(record: Mapping[Any, Any]) -> dict[str, Any]:
    """A record as plain JSON data (a DataFrame row holds numpy scalars)."""
    return json.loads(json.dumps(record, default=lambda v: v.item()))


def generate(
    suite: str, splits: Sequence[str] = REFERENCE_SPLITS, progress: bool = False
) -> Reference:
    """Rerun the heuristics of ``suite`` on ``splits``."""
    from ddl_gym.benchmarks.provenance import suite_fingerprint
    from ddl_gym.benchmarks.suite import get_suite

    the_suite = get_suite(suite)
    parts = {split: generate_split(suite, split, progress) for split in splits}
    return Reference(suite, str(suite_fingerprint(suite)), tuple(the_suite.heuristics), parts)


def merged(old: Reference | None, new: Reference) -> Reference:
    """``new``'s splits over ``old``'s (kept only if made for the same suite
    content and heuristics)."""
    if old is None or (old.suite_hash, old.heuristics) != (new.suite_hash, new.heuristics):
        return new
    return Reference(new.suite, new.suite_hash, new.heuristics, {**old.splits, **new.splits})


def _comparable(record: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in record.items() if k not in IGNORED}
    out["provenance"] = {k: v for k, v in record["provenance"].items() if k != "commit"}
    return out


def differences(stored: Reference, fresh: Reference) -> list[str]:
    """One line per (split, policy, case, seed) whose fresh record differs
    from the stored one (``cpu_s`` and the commit aside), is missing or is
    new; and per differing bound. Empty: the reference holds."""
    out: list[str] = []
    if stored.suite_hash != fresh.suite_hash:
        out.append(f"suite hash: {stored.suite_hash} stored, {fresh.suite_hash} now")
    if stored.heuristics != fresh.heuristics:
        out.append(f"heuristics: {stored.heuristics} stored, {fresh.heuristics} now")
    for split, part in fresh.splits.items():
        if split not in stored.splits:
            out.append(f"{split}: not in the stored reference")
            continue
        old = _keyed(stored.splits[split].records)
        new = _keyed(part.records)
        for key in sorted(set(old) | set(new), key=str):
            policy, case, seed = key
            where = f"{split}: ({policy}, {case}, seed {seed})"
            if key not in new:
                out.append(f"{where}: stored, not rerun")
            elif key not in old:
                out.append(f"{where}: rerun, not stored")
            else:
                a, b = _comparable(old[key]), _comparable(new[key])
                if not same(a, b):
                    fields = _differing(a, b)
                    out.append(f"{where} differs in {', '.join(fields)}")
        ob, nb = stored.splits[split].bounds, part.bounds
        for key in sorted(set(ob) | set(nb), key=str):
            if not same(ob.get(key), nb.get(key)):
                out.append(
                    f"{split}: (bound, {key[0]}, seed {key[1]}): {ob.get(key)} stored, "
                    f"{nb.get(key)} now"
                )
    return out


# Stored and fresh numbers agree when equal to this relative tolerance: a
# different numpy/libm build moves the last bits of a float sum or a log-normal
# draw (1e-15 relative), which is not a change of behaviour.
REL_TOL = 1e-9


def same(a: Any, b: Any) -> bool:
    """``a == b``, floats to :data:`REL_TOL` (recursively in dicts and lists)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=REL_TOL, abs_tol=0.0) or (a != a and b != b)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return set(a) == set(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _keyed(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, int], Mapping[str, Any]]:
    return {(str(r["policy"]), str(r["case"]), int(r["seed"])): r for r in records}


def _differing(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    keys = sorted(set(a) | set(b))
    out = []
    for k in keys:
        if k == "provenance" and isinstance(a.get(k), Mapping) and isinstance(b.get(k), Mapping):
            out += [f"provenance.{f}" for f in _differing(a[k], b[k])]
        elif not same(a.get(k), b.get(k)):
            out.append(f"{k} ({a.get(k)!r} stored, {b.get(k)!r} now)")
    return out
