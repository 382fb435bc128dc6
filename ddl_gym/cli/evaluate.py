"""``ddl-gym evaluate``: trained agents against the heuristics on held-out
windows of a scenario's workload under its congestion
(``ddl_gym.agents.evaluate.evaluate``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ddl_gym.cli.common import add_scenario_args, epilog, resolve_scenario
from ddl_gym.cli.workload import agent_trace_spec

HEURISTICS = ("fifo", "tiresias", "gandiva", "dally")  # as ddl_gym.agents.evaluate


def register(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser(
        "evaluate",
        help="compare a trained agent with the heuristics (scripts/evaluate.py)",
        description="Evaluate agents on held-out windows of the scenario's workload under its "
        "congestion.",
        epilog=epilog(
            "ddl-gym evaluate -s default --seeds 0 1",
            "ddl-gym evaluate -s seed-week-heavy --model runs/agent/best/best_model.zip",
            "ddl-gym evaluate -s default --baselines fifo dally --window-h 2",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scenario_args(e)
    e.add_argument("--model", type=Path, action="append", help="model .zip (repeatable)")
    e.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    e.add_argument(
        "--window-h",
        type=float,
        default=None,
        help="window length in hours (default: the agent's training window; "
        "0 = the whole test part)",
    )
    e.add_argument("--baselines", nargs="*", default=list(HEURISTICS))
    e.add_argument("--csv", type=Path, help="write the per-window results here")
    e.add_argument("--no-progress", action="store_true", help="no progress bar")
    e.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    scenario = resolve_scenario(args, "evaluate").scenario
    spec = agent_trace_spec(scenario)
    from ddl_gym.agents.evaluate import evaluate  # torch: only when evaluating

    evaluate(
        args.model,
        [spec],
        args.seeds,
        args.window_h,
        scenario.congestion,
        args.baselines,
        args.csv,
        progress=not args.no_progress,
    )
    return 0
