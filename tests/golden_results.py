"""Golden results: fingerprints of every shipped policy on the real weeks.

The simulator's speed-ups (lazy leases, incremental policy state, leaner
memory) must not change a single number. This module runs every policy of
``ddl_gym.baselines.POLICY_NAMES`` (with its own ``engine_kwargs()``, as ``compare``
and the CLI do) on the seed's week (seed64) and the Philly week (nvswitch512)
at the congestion levels the scenarios sweep, and reduces each run to a
fingerprint:

* the summary, every value exact (JSON keeps a float's shortest repr, which
  round-trips bit for bit);
* SHA-256 of the per-job table and of the placement history, floats written
  with ``repr`` (exact), plus a hash of the per-job table rounded to 1e-6 so
  that a failure says whether results moved by rounding or for real.

``tests/golden/results.json`` was written from the code *before* the
speed-ups; ``tests/test_golden.py`` compares the current code against it.

    python -m tests.golden_results            # rewrite tests/golden/results.json
    python -m tests.golden_results --check    # compare and list differences
    python -m tests.golden_results --policies dally,dally-1-2   # rewrite only those cells

Rewrite only the cells of a deliberate change of results, and check that
every other cell is unchanged (``--check``, or ``pytest --golden-full``).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

GOLDEN = Path(__file__).with_name("golden") / "results.json"

# (workload scenario, congestion levels); each scenario fixes trace and cluster
WORKLOADS: dict[str, tuple[str, ...]] = {
    "seed-week-heavy": ("none", "moderate", "heavy"),  # seed week on seed64
    "philly-week-512": ("none", "moderate", "heavy"),  # Philly week on nvswitch512
}


def _cell_repr(value: Any, digits: int | None) -> str:
    if isinstance(value, float):
        if digits is not None and math.isfinite(value):
            value = round(value, digits) + 0.0  # +0.0: no "-0.0"
        return repr(value)
    return repr(value)


def table_hash(df: pd.DataFrame, digits: int | None = None) -> str:
    """SHA-256 of a table, every float exact (``repr``) or rounded to ``digits``."""
    columns = [df[c].tolist() for c in df.columns]  # python scalars, not numpy
    h = hashlib.sha256(",".join(map(str, df.columns)).encode())
    for row in zip(*columns, strict=True):
        h.update(("\n" + ",".join(_cell_repr(v, digits) for v in row)).encode())
    return h.hexdigest()


def fingerprint(result) -> dict[str, Any]:
    return {
        "summary": {k: float(v) for k, v in result.summary.items()},
        "jobs_sha256": table_hash(result.jobs),
        "jobs_1e-6_sha256": table_hash(result.jobs, digits=6),
        "placements_sha256": table_hash(result.placements),
    }


@functools.cache
def _workload(scenario_name: str):
    """(scenario, trace, cluster), loaded once per process (runs never modify them)."""
    from ddl_gym.scenarios import get_scenario

    scenario, _ = get_scenario(scenario_name)
    return scenario, scenario.build_trace(0), scenario.build_cluster()


def run_one(scenario_name: str, congestion: str, policy_name: str) -> dict[str, Any]:
    """Fingerprint of one policy on one workload at one congestion level."""
    from ddl_gym.baselines import make_policy

    from ddl_gym.engine import simulate

    scenario, trace, cluster = _workload(scenario_name)
    scenario = scenario.replace(congestion=congestion)
    policy = make_policy(policy_name)
    kwargs = scenario.engine_kwargs(policy.engine_kwargs())
    result = simulate(trace, cluster, policy, seed=0, **kwargs)
    return fingerprint(result)


def cells(workloads: dict[str, tuple[str, ...]] = WORKLOADS) -> list[tuple[str, str, str]]:
    from ddl_gym.baselines import POLICY_NAMES

    return [(w, c, p) for w, levels in workloads.items() for c in levels for p in POLICY_NAMES]


def key(workload: str, congestion: str, policy: str) -> str:
    return f"{workload}/{congestion}/{policy}"


def load_golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text())


def differences(expected: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """What differs between two fingerprints, in words (empty: identical)."""
    out = []
    for name, value in expected["summary"].items():
        other = got["summary"].get(name)
        both_nan = other is not None and math.isnan(value) and math.isnan(other)
        same = other == value or both_nan
        if not same:
            out.append(f"summary {name}: {value!r} -> {other!r}")
    for field in ("jobs_sha256", "placements_sha256"):
        if expected[field] != got[field]:
            rounded = expected["jobs_1e-6_sha256"] == got["jobs_1e-6_sha256"]
            note = " (per-job table equal to 1e-6)" if field == "jobs_sha256" and rounded else ""
            out.append(f"{field} differs{note}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    ap.add_argument("--workload", choices=list(WORKLOADS), help="only this workload")
    ap.add_argument("--policies", help="only these policies (comma-separated)")
    ap.add_argument("--congestion", help="only these congestion levels (comma-separated)")
    args = ap.parse_args(argv)
    todo = cells({args.workload: WORKLOADS[args.workload]} if args.workload else WORKLOADS)
    if args.policies:
        todo = [c for c in todo if c[2] in args.policies.split(",")]
    if args.congestion:
        todo = [c for c in todo if c[1] in args.congestion.split(",")]
    if (
        (args.policies or args.congestion or args.workload)
        and not args.check
        and not GOLDEN.exists()
    ):
        ap.error(
            "--workload/--policies/--congestion write into an existing file (it holds every cell)"
        )
    golden = load_golden() if GOLDEN.exists() else {}
    bad = 0
    for cell in todo:
        start = time.process_time()
        got = run_one(*cell)
        cpu = time.process_time() - start
        k = key(*cell)
        if args.check:
            diff = differences(golden[k], got)
            bad += bool(diff)
            print(f"{k}: {cpu:.2f} CPU-s {'OK' if not diff else '; '.join(diff)}", flush=True)
        else:
            golden[k] = got
            print(f"{k}: {cpu:.2f} CPU-s", flush=True)
    if not args.check:
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
