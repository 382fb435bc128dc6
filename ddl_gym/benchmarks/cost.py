"""CPU cost of a whole suite split per policy (``scripts/bench.py --suite``).

    python scripts/bench.py --suite ddl-gym-v1 --split test --policies fifo,dally

For each policy: the CPU time (``time.process_time``) of the whole split,
workload building included, and of the simulations alone (the records'
``cpu_s``). The budget is 10 CPU-minutes per heuristic on the test split.
"""

from __future__ import annotations

import argparse
import time

from ddl_gym.baselines import HEURISTICS, ORACLES
from ddl_gym.benchmarks.evaluate import evaluate

BUDGET_S = 600.0


def split_cpu_s(policy: str, suite: str, split: str) -> tuple[float, float, int]:
    """(total CPU s, simulation CPU s, runs) of ``policy`` on the split."""
    t0 = time.process_time()
    scores = evaluate(policy, suite=suite, split=split, progress=False)
    total = time.process_time() - t0
    return total, float(scores.records["cpu_s"].sum()), len(scores.records)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--suite", default="ddl-gym-v1")
    ap.add_argument("--split", default="test")
    ap.add_argument("--policies", default=",".join((*HEURISTICS, *ORACLES)))
    args = ap.parse_args(argv)
    print(f"{args.suite} {args.split}: CPU seconds per policy (budget {BUDGET_S:.0f} s)")
    print(f"{'policy':14s} {'total':>8s} {'simulate':>9s} {'runs':>5s}")
    for policy in args.policies.split(","):
        total, sim, runs = split_cpu_s(policy, args.suite, args.split)
        flag = "" if total <= BUDGET_S else "  OVER BUDGET"
        print(f"{policy:14s} {total:8.1f} {sim:9.1f} {runs:5d}{flag}", flush=True)
