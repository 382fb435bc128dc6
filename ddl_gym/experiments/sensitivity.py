"""How much the two constants that drive the comparison tables move them:
the restore (checkpoint) cost per GPU of a preemption and the background
traffic on rack uplinks (the congestion level).

Each policy runs with its own engine settings except the restore cost, which
is scaled: a policy whose own cost is ``c`` s per GPU (1 for every policy but
Gandiva, whose migration the seed paper models as free) runs with
``c * factor``. Every (restore factor, congestion, policy, seed) is one
``simulate`` of a named workload of ``ddl_gym.experiments.grid`` on its
cluster (the bundled ``default``: seeds 0-2; a fixed trace such as
``seed-week``: seed 0, its policies being deterministic); the result is mean
JCT per setting and the policies' rank by it (mean over seeds).

    python -m ddl_gym.experiments.sensitivity                       # docs/model.md
    python -m ddl_gym.experiments.sensitivity --workload seed-week --data ../shared/data
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from ddl_gym.baselines import make_policy
from ddl_gym.engine import simulate
from ddl_gym.engine.simulate import PolicyEngineWarning, policy_engine_kwargs
from ddl_gym.experiments.grid import WORKLOADS, load_workload
from ddl_gym.report.stats import fmt_number

RESTORE_FACTORS = (0.5, 1.0, 2.0)
CONGESTIONS: tuple[str | float, ...] = ("none", 0.3, "moderate", 0.65, "heavy", 0.9)
POLICIES = ("fifo", "tiresias", "gandiva", "dally")
SEEDS = (0, 1, 2)


@dataclass(frozen=True)
class Setting:
    restore_factor: float
    congestion: str | float


def run_one(
    policy: str,
    setting: Setting,
    seed: int,
    workload: str = "default",
    data_dir: str | None = None,
) -> dict:
    """One simulation: ``policy`` with its restore cost scaled by the setting's factor."""
    trace, cluster = load_workload(workload, seed, data_dir, None)
    pol = make_policy(policy)
    own = float(policy_engine_kwargs(pol).get("restore_s_per_gpu", 1.0))
    with warnings.catch_warnings():
        # the scaled restore cost contradicts the policy's own on purpose
        warnings.simplefilter("ignore", PolicyEngineWarning)
        result = simulate(
            trace,
            cluster,
            pol,
            seed=seed,
            congestion=setting.congestion,
            restore_s_per_gpu=own * setting.restore_factor,
            record_series=False,
        )
    s = result.summary
    return {
        "restore_factor": setting.restore_factor,
        "congestion": str(setting.congestion),
        "policy": policy,
        "seed": seed,
        "mean_jct_h": s["mean_jct_s"] / 3600.0,
        "makespan_h": s["makespan_s"] / 3600.0,
        "preemptions": s["preemptions"],
        "restore_h": float(result.jobs["overhead_s"].sum()) / 3600.0,
    }


def sweep(
    factors: Sequence[float] = RESTORE_FACTORS,
    congestions: Sequence[str | float] = CONGESTIONS,
    policies: Sequence[str] = POLICIES,
    seeds: Sequence[int] = SEEDS,
    workload: str = "default",
    data_dir: str | None = None,
) -> pd.DataFrame:
    """Every run of the sweep, one row each (a fixed trace runs its first seed)."""
    if not WORKLOADS[workload].seeded:
        seeds = seeds[:1]
    rows = [
        run_one(p, Setting(f, c), s, workload, data_dir)
        for f in factors
        for c in congestions
        for p in policies
        for s in seeds
    ]
    return pd.DataFrame(rows)


def ranking_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per congestion level: each policy's mean JCT (h, mean over
    seeds) at every restore factor, ``"a / b / c"``, and the policies' order
    by mean JCT (best first) at each factor ("same" when it does not move)."""
    means = runs.groupby(["congestion", "policy", "restore_factor"], sort=False)[
        "mean_jct_h"
    ].mean()
    factors = list(dict.fromkeys(runs["restore_factor"]))
    rows = []
    for c in dict.fromkeys(runs["congestion"]):
        row: dict[str, str] = {"background": c}
        for p in sorted(set(runs["policy"])):
            row[f"{p} JCT h"] = " / ".join(fmt_number(means[(c, p, f)]) for f in factors)
        orders = [
            " < ".join(means[c].xs(f, level="restore_factor").sort_values().index) for f in factors
        ]
        row["rank (best first)"] = (
            orders[0]
            if len(set(orders)) == 1
            else "; ".join(f"x{f:g}: {o}" for f, o in zip(factors, orders, strict=True))
        )
        rows.append(row)
    return pd.DataFrame(rows)


def to_markdown(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ddl_gym.experiments.sensitivity")
    p.add_argument("--workload", default="default", choices=list(WORKLOADS))
    p.add_argument("--data", help="data dir with traces/ (fixed-trace workloads)")
    p.add_argument("--csv", help="also write every run to this CSV")
    args = p.parse_args(argv)
    data = args.data
    if data is None and WORKLOADS[args.workload].path is not None:
        from ddl_gym.traces import find_data_dir

        found = find_data_dir()
        data = str(found) if found else None
    start = time.process_time()
    runs = sweep(workload=args.workload, data_dir=data)
    if args.csv:
        runs.to_csv(args.csv, index=False)
    print(to_markdown(ranking_table(runs)))
    restore = runs.groupby(["policy", "restore_factor"])[["preemptions", "restore_h"]].mean()
    print("\nmean preemptions and restore hours (all jobs) per run:\n")
    print(restore.round(1).to_string())
    print(f"\n{len(runs)} runs, {time.process_time() - start:.0f} CPU-s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
