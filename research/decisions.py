"""What schedulers decide on a benchmark split: the action histogram.

For each policy (a heuristic name or a model path), every case of the split
is simulated (its first seed, or ``seeds``) and the decisions are counted:
``delays`` are WAITs returned while some waiting job fitted the free GPUs
(``heldout.CountingPolicy``), placements are counted by the level the job
actually got (the engine's ``alloc_*``), preemptions by the engine. Shares
are over all decisions of all cases, so busy cases weigh more.

    python -m research.decisions --split test --policies dally,tiresias,gandiva \
        --model sppo=runs/sppo/a-s0/best.zip
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

import pandas as pd

from ddl_gym.benchmarks.leaderboard import markdown_table
from research.heldout import HIST, CountingPolicy


def count_decisions(
    policies: Mapping[str, str],
    suite: str = "ddl-gym-v1",
    split: str = "test",
    seeds: int = 1,
) -> pd.DataFrame:
    """One row per (policy, case, seed): decision counts by kind. ``policies``
    maps a row name to anything ``benchmarks.resolve_policy`` takes (a
    heuristic name, ``agent:PATH``, ...)."""
    from ddl_gym.benchmarks.policies import resolve_policy
    from ddl_gym.benchmarks.suite import get_suite
    from ddl_gym.engine import simulate

    rows = []
    for name, spec in policies.items():
        make = resolve_policy(spec).factory
        for case in get_suite(suite).select(split):
            for seed in case.seeds[:seeds]:
                policy = CountingPolicy(make())
                result = simulate(
                    case.workload.build(seed),
                    case.cluster(),
                    policy,
                    seed=seed,
                    congestion=case.congestion,
                    record_series=False,
                    record_placements=False,
                )
                s = result.summary
                rows.append(
                    {"policy": name, "case": case.name, "seed": seed, "delays": policy.delays}
                    | {k: float(s[k]) for k in HIST if k in s}
                )
    return pd.DataFrame(rows)


def shares(counts: pd.DataFrame) -> pd.DataFrame:
    """Per policy, each kind's share of all its decisions, and their number."""
    out = []
    for name, g in counts.groupby("policy", sort=False):
        total = {k: float(g[k].sum()) for k in HIST}
        n = sum(total.values())
        out.append({"policy": name} | {k: v / n for k, v in total.items()} | {"n": int(n)})
    return pd.DataFrame(out)


def markdown(table: pd.DataFrame) -> str:
    return markdown_table(table[["policy", *HIST, "n"]], {k: "{:.3f}" for k in HIST})


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Decision histogram on a benchmark split.")
    ap.add_argument("--suite", default="ddl-gym-v1")
    ap.add_argument("--split", default="test")
    ap.add_argument("--seeds", type=int, default=1, help="case seeds per case (first N)")
    ap.add_argument("--policies", default="dally,tiresias,gandiva", help="heuristic names")
    ap.add_argument("--model", action="append", default=[], help="NAME=PATH.zip (repeatable)")
    args = ap.parse_args(argv)
    from ddl_gym.agents.threads import one_thread

    one_thread()
    policies = {m.split("=", 1)[0]: "agent:" + m.split("=", 1)[1] for m in args.model}
    policies |= {p: p for p in args.policies.split(",") if p}
    counts = count_decisions(policies, args.suite, args.split, args.seeds)
    print(markdown(shares(counts)))


if __name__ == "__main__":
    main()
