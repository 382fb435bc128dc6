"""How far the replay portfolio's drawn sizes are from the true ones
(``python -m research.size_bias``).

Runs the shipped network inside the portfolio with switching off (margin
0.99), so every case sees the network's own states, and compares, at each
selection, every unfinished job's drawn size in the replay with its true
size (read here for the diagnostic only; the portfolio never reads it).

    python -m research.size_bias --split train --sizes km
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from ddl_gym.agents import portfolio as pm

from ddl_gym.benchmarks.suite import Case, get_suite
from ddl_gym.engine import EngineView, Status, simulate
from ddl_gym.traces import Trace


def log_ratios(case: Case, sizes: str, seed: int) -> np.ndarray:
    """log(drawn / true) of every unfinished job in every replay of one run
    of ``case`` (the shipped network inside the portfolio, switching off)."""
    out: list[float] = []
    portfolio = pm.make(margin=0.99, sizes=sizes)
    draw = portfolio.replay_trace

    def replay_and_compare(view: EngineView) -> Trace:
        trace = draw(view)
        in_system = (Status.PENDING, Status.RUNNING)
        true = {j.job_id: j.iterations for j in view.jobs if j.status in in_system}
        ids, drawn = trace.jobs["job_id"].tolist(), trace.jobs["iterations"].tolist()
        out.extend(float(np.log(d / true[i])) for i, d in zip(ids, drawn, strict=True) if i in true)
        return trace

    # the diagnostic sees each replay as the portfolio builds it
    portfolio.replay_trace = replay_and_compare  # type: ignore[method-assign]
    simulate(
        case.workload.build(seed), case.cluster(), portfolio, congestion=case.congestion, seed=seed
    )
    return np.array(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="the portfolio's drawn sizes against the true ones")
    ap.add_argument("--split", default="train")
    ap.add_argument("--sizes", default="finished", choices=pm.SIZE_MODELS)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    columns = ["case", "unfinished jobs replayed", "geometric mean drawn/true", "median"]
    columns.append("share drawn < true")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
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
