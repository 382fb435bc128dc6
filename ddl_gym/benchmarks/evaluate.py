"""Score any scheduler on a suite split with one call.

    from ddl_gym.benchmarks import evaluate
    scores = evaluate("tiresias", suite="ddl-gym-v1", split="test")
    scores = evaluate(my_policy, out_dir="runs/bench/mine", resume=True)
    print(scores.card())     # normalised against the shipped heuristic records
    scores.metrics()         # raw, per case: mean / p95 JCT, makespan, comm, preemptions

Each finished (case, seed) is written at once as one JSON file in
``out_dir`` (atomically: a file is either whole or absent), so Ctrl-C keeps
every finished run and ``resume=True`` skips them next time. ``backend="ray"``
runs the (case, seed) runs as Ray tasks (string policy specs only: each task
rebuilds the policy from its name).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ddl_gym.benchmarks.policies import PolicySpec, policy_failure, resolve_policy
from ddl_gym.benchmarks.provenance import (
    actual_inputs,
    check_inputs,
    foreign_field,
    suite_pins_inputs,
)
from ddl_gym.benchmarks.runner import OK, expected_provenance, run_case
from ddl_gym.benchmarks.stats import Card
from ddl_gym.benchmarks.suite import Case, get_suite

CARD_COLUMNS = ("mean_jct_s", "p95_jct_s", "makespan_s", "comm_overhead", "preemptions")


@dataclass(frozen=True)
class Scores:
    """One policy's records on a suite split: one row per (case, seed) it
    ran; ``unsupported``: the (case, seed) runs whose cluster it cannot act
    on, with the reason."""

    policy: str
    suite: str
    split: str
    records: pd.DataFrame
    unsupported: pd.DataFrame = field(default_factory=pd.DataFrame)

    def metrics(self) -> pd.DataFrame:
        """The raw metrics: per case, the mean over seeds of each metric
        (seconds; no normalisation)."""
        cols = [*CARD_COLUMNS, "multi_server_comm_overhead"]
        return self.records.groupby(["family", "case"], sort=False)[cols].mean().reset_index()

    def card(self, reference: Any = None, reps: int | None = None) -> Card:
        """The normalised score card (:class:`~ddl_gym.benchmarks.stats.Card`)
        against the suite's reference records of its heuristics (shipped with
        the package, or ``reference``: a path or a
        :class:`~ddl_gym.benchmarks.reference.Reference`): per case and
        aggregated (IQM, mean, median, optimality gap with 95% stratified
        bootstrap CIs, ``reps`` resamples), per family, the probability of
        improvement over the best heuristic of each case and, with bounds in
        the reference, the position between that heuristic and the bound.

        Raises :class:`~ddl_gym.benchmarks.reference.ReferenceError` (never
        falls back to raw metrics: :meth:`metrics` gives those) when there is
        no reference for this suite and split, or when the records ran on
        other input data or another suite content than the reference."""
        from ddl_gym.benchmarks import stats
        from ddl_gym.benchmarks.reference import Reference, ReferenceError, load_reference

        if self.records.empty:
            raise ValueError(f"{self.policy} has no finished run on {self.suite} {self.split}")
        ref = (
            reference if isinstance(reference, Reference) else load_reference(self.suite, reference)
        )
        heuristics = get_suite(self.suite).heuristics
        if tuple(ref.heuristics) != tuple(heuristics):
            raise ReferenceError(
                f"the reference of {self.suite} holds {list(ref.heuristics)}, the suite's "
                f"heuristics are {list(heuristics)}: regenerate it with "
                f"`ddl-gym benchmark reference --suite {self.suite}`"
            )
        part = ref.split(self.split)
        notes = _check_against(self.records, part.records, ref.suite_hash)
        parts = stats.normalised_card(
            self.records, part.frame(), heuristics, part.bounds, reps or stats.REPS
        )
        skipped = sorted(set(self.unsupported.get("case", ())) - set(self.records["case"]))
        if skipped:
            notes += (f"not scored (the policy cannot run them): {', '.join(skipped)}",)
        about = {**part.provenance, "path": str(ref.path), "heuristics": list(heuristics)}
        return Card(
            policy=self.policy,
            suite=self.suite,
            split=self.split,
            reference=about,
            reps=reps or stats.REPS,
            notes=notes,
            **parts,
        )

    def mean_jct_s(self) -> float:
        return float(self.records["mean_jct_s"].mean())


def _check_against(
    records: pd.DataFrame, reference: list[dict[str, Any]], suite_hash: str
) -> tuple[str, ...]:
    """Refuse records that ran on another suite content or other input data
    than the reference; a note when the records carry no provenance."""
    from ddl_gym.benchmarks.reference import ReferenceError

    if "provenance" not in records:
        return ("the policy's records carry no provenance: their input data is unchecked",)
    ref_inputs = {r["case"]: r["provenance"]["inputs"] for r in reference}
    for prov, case in zip(records["provenance"], records["case"], strict=True):
        if not isinstance(prov, dict):
            return ("some records carry no provenance: their input data is unchecked",)
        if prov.get("suite_hash") != suite_hash:
            raise ReferenceError(
                f"{case}: the record's suite hash {prov.get('suite_hash')} is not the "
                f"reference's {suite_hash}"
            )
        want = ref_inputs.get(case)
        if want is not None and prov.get("inputs") != want:
            raise ReferenceError(
                f"{case}: the policy read inputs {prov.get('inputs')}, the reference's "
                f"heuristics read {want}: the scores would compare other data "
                "(`ddl-gym data fetch` restores the suite's files)"
            )
    return ()


def slug(name: str) -> str:
    """A file-name-safe form of a policy name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "policy"


def result_path(out_dir: Path, case: Case, seed: int) -> Path:
    return out_dir / f"{case.name}__seed{seed}.json"


def _write_atomic(path: Path, record: dict[str, Any]) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
    os.replace(tmp, path)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # a damaged file counts as not done
    return record if isinstance(record, dict) and "status" in record else None


def run_one(
    policy: str, suite: str, case: str, seed: int, name: str | None = None
) -> dict[str, Any]:
    """One run from plain arguments (what a Ray task calls)."""
    s = get_suite(suite)
    return run_case(resolve_policy(policy, name), s.case(case), seed, suite=suite)


class ForeignRecordError(ValueError):
    """A finished record in ``out_dir`` is not a run of this evaluation."""


def _refuse_foreign(path: Path, record: dict[str, Any], expected: dict[str, Any]) -> None:
    """Raise :class:`ForeignRecordError` when ``record`` (read from ``path``)
    may not stand for the run whose provenance is ``expected``."""
    key = foreign_field(record, expected)
    if key is None:
        return
    if key == "provenance":
        what = "has no provenance (written before records carried one)"
    else:
        got = record["provenance"].get(key)
        if key in ("inputs", "engine"):
            diff = _diff_keys(got, expected[key])
            what = f"differs in {key} ({diff})"
        else:
            what = f"differs in {key}: {got!r} there, {expected[key]!r} now"
    raise ForeignRecordError(
        f"--resume: {path} {what}; it is not a run of this evaluation. Write to another "
        "--out (out_dir), or drop --resume (resume=False) to run everything again"
    )


def _diff_keys(got: Any, want: dict[str, Any]) -> str:
    got = got if isinstance(got, dict) else {}
    keys = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
    return ", ".join(f"{k}: {got.get(k)!r} there, {want.get(k)!r} now" for k in keys)


def evaluate(
    policy: Any,
    suite: str = "ddl-gym-v1",
    split: str = "test",
    seeds: Sequence[int] | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    progress: bool = True,
    quick: bool = False,
    name: str | None = None,
    cases: Sequence[str] | None = None,
    backend: str = "local",
    env_id: str | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
) -> Scores:
    """Run ``policy`` on every case of ``split`` (``quick``: the quick
    sub-suite) for the case's seeds (or ``seeds``) and return its
    :class:`Scores`.

    ``policy``: anything :func:`~ddl_gym.benchmarks.policies.resolve_policy`
    takes (a heuristic name, ``"agent"``, ``"agent:PATH"``,
    ``"module:function"``, a Policy object, a plain ``f(view) -> Action``).
    ``name`` overrides the name in the records. ``out_dir``: one JSON file per
    finished (case, seed); ``resume``: reuse those already there, refusing
    (:class:`ForeignRecordError`, naming the field) a record of another
    suite, suite hash, input data, ddl-gym version or commit, policy name
    or engine settings (a damaged file is run again). ``cases``:
    only these case names. ``env_id`` / ``env_kwargs``: for an SB3 zip
    without a saved config (``"agent:PATH"``), the env it was trained on; it
    runs only on cases of that cluster shape (the others are listed in
    ``Scores.unsupported``).

    Raises :class:`~ddl_gym.benchmarks.policies.PolicyFailure` (policy, case,
    seed, cause; a one-line message) when the policy fails: a ``module:function``
    spec does not import or name a policy, its code raises, it returns no
    valid action, it never places (an unknown policy name: ValueError).
    """
    spec: PolicySpec = resolve_policy(policy, name, env_id=env_id, env_kwargs=env_kwargs)
    the_suite = get_suite(suite)
    chosen = the_suite.select(split, quick=quick)
    if cases is not None:
        unknown = set(cases) - {c.name for c in chosen}
        if unknown:
            raise ValueError(f"no such case in {suite} {split}: {sorted(unknown)}")
        chosen = tuple(c for c in chosen if c.name in set(cases))
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    runs = [(c, s) for c in chosen for s in (seeds if seeds is not None else c.seeds)]
    if suite_pins_inputs(suite):  # refuse other data before any run, not midway
        for case in chosen:
            check_inputs(case, actual_inputs(case), suite)

    records: dict[int, dict[str, Any]] = {}
    todo: list[int] = []
    expected: dict[str, dict[str, Any]] = {}  # per case: the provenance a run gets now
    probe: Any = None  # one instance of the policy, for its engine settings
    for i, (case, seed) in enumerate(runs):
        path = result_path(out, case, seed) if out is not None else None
        done = _read(path) if (path is not None and resume) else None
        if path is None or done is None:
            todo.append(i)
            continue
        if case.name not in expected:
            probe = spec.factory() if probe is None else probe
            expected[case.name] = expected_provenance(spec, probe, case, suite, check=False)
        _refuse_foreign(path, done, expected[case.name])
        records[i] = done

    def keep(i: int, record: dict[str, Any]) -> None:
        records[i] = record
        if out is not None:
            case, seed = runs[i]
            _write_atomic(result_path(out, case, seed), record)

    if backend == "ray":
        if not isinstance(policy, str):
            raise ValueError("backend='ray' needs a policy given by name (a string spec)")
        from ddl_gym.experiments.ray_backend import run_cells

        cells = [
            {
                "policy": policy,
                "suite": suite,
                "case": runs[i][0].name,
                "seed": runs[i][1],
                "name": spec.name,
            }
            for i in todo
        ]
        run_cells(run_one, cells, on_result=lambda j, r: keep(todo[j], r))
    elif backend == "local":
        bar = _bar(len(runs), len(runs) - len(todo), spec.name, progress)
        try:
            for i in todo:
                case, seed = runs[i]
                if bar is not None:
                    bar.set_postfix_str(f"{case.name} s{seed}")
                try:
                    record = run_case(spec, case, seed, suite=suite)
                except Exception as err:  # one PolicyFailure naming policy, case and seed
                    failure = policy_failure(spec.name, case.name, seed, err)
                    if failure is None:  # the input data, not the policy
                        raise
                    if bar is not None:
                        bar.leave = False  # the error line alone stays on screen
                    raise failure from err
                keep(i, record)
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
    else:
        raise ValueError(f"unknown backend {backend!r}: 'local' or 'ray'")
    return _scores(
        spec.name, suite, "quick" if quick else split, [records[i] for i in sorted(records)]
    )


def _scores(policy: str, suite: str, split: str, rows: list[dict[str, Any]]) -> Scores:
    frame = pd.DataFrame(rows)
    if frame.empty or "status" not in frame:
        return Scores(policy, suite, split, frame)
    ok = frame["status"] == OK
    return Scores(
        policy,
        suite,
        split,
        frame[ok].reset_index(drop=True),
        frame.loc[~ok].reindex(columns=["case", "seed", "reason"]).reset_index(drop=True),
    )


def _bar(total: int, initial: int, name: str, show: bool):
    if not show:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, desc=name, unit="run")


def load_scores(out_dir: str | Path) -> list[Scores]:
    """Every policy's records found under ``out_dir`` (one sub-folder per
    policy, as ``ddl-gym benchmark evaluate`` and the leaderboard write them)."""
    root = Path(out_dir)
    found: list[Scores] = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        rows = [r for r in (_read(f) for f in sorted(folder.glob("*.json"))) if r is not None]
        if rows:
            found.append(_scores(str(rows[0]["policy"]), str(rows[0]["suite"]), "", rows))
    return found
