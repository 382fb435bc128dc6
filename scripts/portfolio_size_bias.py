"""How far the replay portfolio's drawn sizes are from the true ones.

Runs the shipped network inside the portfolio with switching off (margin
0.99), so every case sees the network's own states, and compares, at each
selection, every unfinished job's drawn size in the replay with its true
size (read here for the diagnostic only; the portfolio never reads it).

    python scripts/portfolio_size_bias.py --split train --sizes km
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from ddl_gym.agents import portfolio as pm

from ddl_gym.benchmarks.suite import get_suite
from ddl_gym.engine import Status, simulate


def log_ratios(case, sizes: str, seed: int) -> np.ndarray:
    """log(drawn / true) of every unfinished job in every replay of one run."""
    out: list[float] = []
    portfolio = pm.make(margin=0.99, sizes=sizes)
    draw = portfolio.replay_trace

    def spy(view):
        trace = draw(view)
        true = {
            j.job_id: j.iterations
            for j in view.jobs
            if j.status in (Status.PENDING, Status.RUNNING)
        }
        out.extend(
            float(np.log(row.iterations / true[row.job_id]))
            for row in trace.jobs.itertuples()
            if row.job_id in true
        )
        return trace

    portfolio.replay_trace = spy  # type: ignore[method-assign]
    simulate(
        case.workload.build(seed), case.cluster(), portfolio, congestion=case.congestion, seed=seed
    )
    return np.array(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="train")
    ap.add_argument("--sizes", default="finished", choices=pm.SIZE_MODELS)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    columns = ["case", "unfinished jobs replayed", "geometric mean drawn/true", "median"]
    columns.append("share drawn < true")
    print("| " + " | ".join(columns) + " |")
    print("|---|---|---|---|---|")
    for case in get_suite().select(args.split):
        r = log_ratios(case, args.sizes, args.seed)
        if len(r):
            print(
                f"| {case.name} | {len(r)} | {np.exp(r.mean()):.2f} | {np.exp(np.median(r)):.2f} "
                f"| {np.mean(r < 0):.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
