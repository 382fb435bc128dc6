"""The restore-cost / congestion sensitivity sweep of docs/model.md."""

from __future__ import annotations

import pandas as pd

from ddl_gym.experiments.sensitivity import Setting, ranking_table, run_one


def test_restore_factor_scales_each_policys_own_cost():
    cheap = run_one("tiresias", Setting(0.5, "heavy"), 0)
    dear = run_one("tiresias", Setting(2.0, "heavy"), 0)
    assert cheap["preemptions"] > 0
    # restore hours per preemption: 0.5 and 2 s per GPU
    assert dear["restore_h"] / dear["preemptions"] > 3 * cheap["restore_h"] / cheap["preemptions"]
    # Gandiva's migration is free in the paper's model; scaled, it stays free
    assert run_one("gandiva", Setting(2.0, "heavy"), 0)["restore_h"] == 0.0


def test_ranking_table_says_when_the_order_moves():
    rows = [
        # at factor 1 a beats b; at factor 2 b beats a
        ("a", 1.0, 1.0), ("b", 1.0, 2.0), ("a", 2.0, 3.0), ("b", 2.0, 2.5),
    ]  # fmt: skip
    runs = pd.DataFrame(
        [
            {"restore_factor": f, "congestion": "heavy", "policy": p, "seed": 0, "mean_jct_h": j}
            for p, f, j in rows
        ]
    )
    row = ranking_table(runs).iloc[0]
    assert row["a JCT h"] == "1.00 / 3.00"
    assert row["rank (best first)"] == "x1: a < b; x2: b < a"
    same = ranking_table(runs[runs["restore_factor"] == 1.0]).iloc[0]
    assert same["rank (best first)"] == "a < b"
