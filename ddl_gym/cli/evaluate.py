"""``ddl-gym evaluate``: trained agents against the heuristics on held-out
windows of a scenario's workload under its congestion
(``ddl_gym.agents.evaluate.evaluate``); with ``--suite``/``--policy``, any
policy on a benchmark suite split (``ddl-gym benchmark evaluate``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ddl_gym.cli.common import add_scenario_args, epilog, resolve_scenario
from ddl_gym.cli.names import POLICIES, listed
from ddl_gym.cli.workload import agent_trace_specs

# the baselines an agent is judged against by default (ddl_gym.agents.evaluate)
HEURISTICS = ("fifo", "tiresias", "gandiva", "dally")


def register(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser(
        "evaluate",
        help="compare a trained agent with the heuristics (ddl_gym.agents.evaluate)",
        description="Evaluate agents on held-out windows of the scenario's workload under its "
        "congestion.",
        epilog=epilog(
            "ddl-gym evaluate -s default --seeds 0 1",
            "ddl-gym evaluate -s seed-week-heavy --model runs/agent/best/best_model.zip",
            "ddl-gym evaluate -s default --baselines fifo dally --window-h 2",
            "ddl-gym evaluate --suite ddl-gym-v1 --split test --policy agent:my_model.zip",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scenario_args(e)
    e.add_argument("--model", type=Path, action="append", help="model .zip (repeatable)")
    e.add_argument(
        "--seeds",
        nargs="+",
        help="seeds as compare takes them (0-2, 0,1,2) or space-separated (default: 0-2; "
        "with --suite: each case's)",
    )
    add_evaluate_options(e)
    e.add_argument("--no-progress", action="store_true", help="no progress bar")
    bench = e.add_argument_group(
        "benchmark suite (as `ddl-gym benchmark evaluate`; --policy or --suite selects it)"
    )
    bench.add_argument("--suite", help="a benchmark suite, e.g. ddl-gym-v1")
    bench.add_argument("--split", default="test", choices=("train", "validation", "test"))
    bench.add_argument("--policy", help="a heuristic name, agent, agent:PATH or module:function")
    bench.add_argument("--out", type=Path, help="folder for the per-run JSON files")
    bench.add_argument("--resume", action="store_true", help="skip runs already in --out")
    bench.add_argument("--quick", action="store_true", help="the quick sub-suite")
    bench.add_argument("--backend", choices=("local", "ray"), default="local")
    e.set_defaults(func=run)


def add_evaluate_options(ap: argparse.ArgumentParser) -> None:
    """The options shared by ``ddl-gym evaluate`` and ``scripts/evaluate.py``
    (``ddl_gym.agents.evaluate.main``); here, so the command line's help
    imports no torch."""
    ap.add_argument(
        "--window-h",
        type=float,
        default=None,
        help="window length in hours (default: the agent's training window; "
        "0 = the whole test part)",
    )
    ap.add_argument(
        "--baselines",
        nargs="*",
        default=list(HEURISTICS),
        help=f"space-separated, of: {listed(POLICIES)} (default: {' '.join(HEURISTICS)})",
    )
    ap.add_argument("--csv", type=Path, help="write the per-window results here")


def _seeds(args: argparse.Namespace) -> list[int] | None:
    """``--seeds`` in any of compare's forms, also split over several words."""
    if not args.seeds:
        return None
    from ddl_gym.cli.common import parse_seeds

    return [seed for word in args.seeds for seed in parse_seeds(word)]


def run(args: argparse.Namespace) -> int:
    if args.suite or args.policy:
        return _run_suite(args)
    scenario = resolve_scenario(args, "evaluate").scenario
    from ddl_gym.cli.common import CliError
    from ddl_gym.model_env import ENV_SUFFIX, find_model_env

    for model in args.model or []:
        if find_model_env(model) is not None:
            # held-out windows are cut from a `ddl-gym train` run's own split
            raise CliError(
                f"{model}: a model saved with its env ({Path(model).stem}{ENV_SUFFIX}) has no "
                "training split to hold windows out of; run it with `ddl-gym compare "
                f"--policies dally,agent:{model}` or `ddl-gym evaluate --suite ddl-gym-v1 "
                f"--policy agent:{model}`"
            )
    import tempfile

    specs = agent_trace_specs(scenario, Path(tempfile.mkdtemp(prefix="ddl-gym-evaluate-")))
    from ddl_gym.agents.evaluate import evaluate  # torch: only when evaluating

    evaluate(
        args.model,
        specs,
        _seeds(args) or [0, 1, 2],
        args.window_h,
        scenario.congestion,
        args.baselines,
        args.csv,
        progress=not args.no_progress,
    )
    return 0


def _run_suite(args: argparse.Namespace) -> int:
    from ddl_gym.cli.benchmark import DEFAULT_SUITE, cmd_evaluate
    from ddl_gym.cli.common import CliError

    if not args.policy:
        raise CliError("--suite needs --policy (a heuristic name, agent:PATH or module:function)")
    chosen = _seeds(args)
    seeds = ",".join(map(str, chosen)) if chosen else None
    bench = argparse.Namespace(
        policy=args.policy,
        suite=args.suite or DEFAULT_SUITE,
        split=args.split,
        quick=args.quick,
        seeds=seeds,
        out=args.out,
        resume=args.resume,
        no_progress=args.no_progress,
        name=None,
        case=None,
        backend=args.backend,
        env_id=None,
        env_kwargs=None,
    )
    return cmd_evaluate(bench)
