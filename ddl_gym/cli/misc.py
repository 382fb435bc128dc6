"""``ddl-gym scenarios``, ``calibrate``, ``bench``, ``train``, ``evaluate``.

``calibrate``, ``train`` and ``evaluate`` delegate to the modules that own
them (``ddl_gym.report.calibration``, ``ddl_gym.agents.train``,
``ddl_gym.agents.evaluate``; ``scripts/*.py`` call the same ``main``); the
scenario becomes their arguments.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from ddl_gym.cli.common import (
    CliError,
    add_scenario_args,
    epilog,
    make_policy,
    progress,
    resolve_scenario,
    seed_arg,
    text_table,
)
from ddl_gym.experiments.cells import run_simulation
from ddl_gym.scenarios import SCENARIOS, to_toml

RAW = argparse.RawDescriptionHelpFormatter


# -- scenarios ---------------------------------------------------------------
def register_scenarios(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "scenarios",
        help="list the named scenarios (or show one as TOML)",
        description="The named scenarios: ready experiments (workload, cluster, fabric, "
        "congestion, engine settings). `show` prints one as a TOML file to start your own.",
        epilog=epilog(
            "ddl-gym scenarios",
            "ddl-gym scenarios show small > my.toml   # edit, then: ddl-gym simulate -s my.toml",
            "ddl-gym scenarios show my.toml           # validate a file",
        ),
        formatter_class=RAW,
    )
    p.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    p.add_argument("scenario", nargs="?", help="scenario name or TOML file (for show)")
    p.set_defaults(func=run_scenarios)


def run_scenarios(args: argparse.Namespace) -> int:
    if args.action == "show":
        if not args.scenario:
            raise CliError("show needs a scenario name or file")
        ns = argparse.Namespace(
            scenario=args.scenario, config=None, trace=None, jobs=None, cluster=None, fabric=None
        )
        print(to_toml(resolve_scenario(ns, "scenarios").scenario.to_dict()), end="")
        return 0
    rows = [
        {
            "name": s.name,
            "workload": s.trace + (f" (first {s.jobs})" if s.jobs else ""),
            "cluster": s.cluster + (f"/{s.fabric}" if s.fabric else ""),
            "congestion": str(s.congestion),
            "description": s.description,
        }
        for s in SCENARIOS.values()
    ]
    print(text_table(pd.DataFrame(rows)))
    return 0


# -- calibrate ---------------------------------------------------------------
def register_calibrate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate",
        help="fidelity of the network model against measurements (scripts/calibrate.py)",
        description="Fit fabric presets to the measured placement tables and write the fidelity "
        "report. The scenario's fabric (if it is a built-in preset) is the base of the fits.",
        epilog=epilog(
            "ddl-gym calibrate --no-save --out /tmp/cal",
            "ddl-gym calibrate -s small --loss soft_l1 --no-save --out /tmp/cal",
            "ddl-gym calibrate --clusters gavel_k80,chronus --no-save --out /tmp/cal",
        ),
        formatter_class=RAW,
    )
    add_scenario_args(p)
    p.add_argument("--data", type=Path, help="data dir (default: ../shared/data)")
    p.add_argument("--out", type=Path, help="where calibration.md/.png go (default: docs/)")
    p.add_argument("--loss", choices=["linear", "soft_l1", "cauchy"])
    p.add_argument("--seed", type=seed_arg)
    p.add_argument(
        "--draws",
        type=int,
        help="seeded draws of the calibration rows the leave-one-cluster-out figure at k > 0 "
        "is the median of (default 9)",
    )
    p.add_argument("--no-save", action="store_true", help="do not save fitted presets")
    p.add_argument("--clusters", help="measured clusters to use, comma-separated (default: all)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (tqdm, with ETA)")
    p.set_defaults(func=run_calibrate)


def run_calibrate(args: argparse.Namespace) -> int:
    from ddl_gym.report import calibration as calibrate
    from ddl_gym.topology import FABRICS

    argv: list[str] = []
    if args.scenario or args.config:
        fabric = resolve_scenario(args, "calibrate").scenario.build_cluster().fabric.name
        if fabric in FABRICS:
            argv += ["--base", fabric]
    for flag, value in (
        ("--data", args.data),
        ("--out", args.out),
        ("--loss", args.loss),
        ("--seed", args.seed),
        ("--draws", args.draws),
        ("--clusters", args.clusters),
    ):
        if value is not None:
            argv += [flag, str(value)]
    if args.no_save:
        argv.append("--no-save")
    if args.no_progress:
        argv.append("--no-progress")
    if args.data is None and calibrate.default_data_dir().is_dir() is False:
        raise CliError("no data dir found (../shared/data or $DDL_GYM_DATA); give --data")
    return _delegate(calibrate.main, argv, "calibrate")


# -- bench -------------------------------------------------------------------
def register_bench(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="simulator speed and memory on a scenario",
        description="Time one policy on a scenario's workload (best of --repeat runs, CPU "
        "seconds) and its peak Python memory. --suite runs scripts/bench.py's standard cases "
        "instead; --philly every policy on the Philly week; --scale every policy on synthetic "
        "10k/30k/100k-job workloads on 4,096 GPUs at offered load 0.8.",
        epilog=epilog(
            "ddl-gym bench -s seed-week-heavy",
            "ddl-gym bench -s philly-week-512 --policy fifo --repeat 5",
            "ddl-gym bench --suite",
            "ddl-gym bench --philly",
            "ddl-gym bench --scale --scale-jobs 100000 --policies fifo,tiresias,gandiva,dally",
        ),
        formatter_class=RAW,
    )
    add_scenario_args(p)
    p.add_argument("-p", "--policy", default="fifo")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=seed_arg, default=0)
    p.add_argument("--suite", action="store_true", help="run scripts/bench.py (needs the data dir)")
    p.add_argument("--philly", action="store_true", help="every policy on the Philly week")
    p.add_argument("--scale", action="store_true", help="synthetic jobs on 4,096 GPUs")
    p.add_argument(
        "--scale-jobs", default=None, help="--scale job counts (default 10000,30000,100000)"
    )
    p.add_argument(
        "--scale-repeat",
        type=int,
        default=1,
        help="--scale: fresh processes per case, the least CPU time reported",
    )
    p.add_argument("--policies", default=None, help="--philly/--scale policies (default: all)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run_bench)


def run_bench(args: argparse.Namespace) -> int:
    if args.suite or args.philly or args.scale:
        from ddl_gym import bench

        argv = ["--philly"] * args.philly + ["--scale"] * args.scale
        argv += ["--repeat", str(args.repeat), "--scale-repeat", str(args.scale_repeat)]
        if args.scale_jobs:
            argv += ["--jobs", args.scale_jobs]
        if args.policies:
            argv += ["--policies", args.policies]
        return _delegate(bench.main, argv, "bench")
    if args.repeat < 1:
        raise CliError("--repeat must be >= 1")
    scenario = resolve_scenario(args, "bench").scenario
    trace_jobs = len(scenario.build_trace(args.seed))
    best = float("inf")
    with progress(args.repeat + 1, "bench", args.no_progress, unit="run") as bar:
        for _ in range(args.repeat):
            start = time.process_time()  # CPU time: wall time is noisy on shared machines
            sim = run_simulation(scenario, make_policy(args.policy, scenario), args.seed, False)
            best = min(best, time.process_time() - start)
            bar.update()
        tracemalloc.start()
        run_simulation(scenario, make_policy(args.policy, scenario), args.seed, False)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        bar.update()
    row = {
        "scenario": scenario.name,
        "policy": args.policy,
        "jobs": trace_jobs,
        "gpus": sim.cluster.num_gpus,
        "seconds": best,
        "jobs_per_s": trace_jobs / best,
        "peak_mib": peak / 2**20,
        "makespan_h": sim.result.summary["makespan_s"] / 3600,
    }
    print(text_table(pd.DataFrame([row])))
    print("(seconds: CPU, best of --repeat, including workload generation/loading)")
    return 0


# -- train / evaluate ----------------------------------------------------------
def register_train_evaluate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a MaskablePPO agent (scripts/train.py)",
        description="Train an agent on the scenario's cluster, fabric, congestion and engine "
        "settings (its workload is the training trace). Arguments after `--` go to "
        "scripts/train.py unchanged.",
        epilog=epilog(
            "ddl-gym train -s default --out runs/agent --timesteps 20000",
            "ddl-gym train -s seed-week-heavy --out runs/agent -- --vec-env dummy",
        ),
        formatter_class=RAW,
    )
    add_scenario_args(p)
    p.add_argument("--out", type=Path, required=True, help="run directory")
    p.add_argument("--timesteps", type=int)
    p.add_argument("--seed", type=seed_arg)
    p.add_argument("--train-config", type=Path, help="a TrainConfig TOML to start from")
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=run_train)

    e = sub.add_parser(
        "evaluate",
        help="compare a trained agent with the heuristics (scripts/evaluate.py)",
        description="Evaluate agents on held-out windows of the scenario's workload under its "
        "congestion. Arguments after `--` go to scripts/evaluate.py unchanged.",
        epilog=epilog(
            "ddl-gym evaluate -s default --seeds 0 1",
            "ddl-gym evaluate -s seed-week-heavy --model runs/agent/best/best_model.zip",
        ),
        formatter_class=RAW,
    )
    add_scenario_args(e)
    e.add_argument("--model", type=Path, action="append", help="model .zip (repeatable)")
    e.add_argument("--seeds", type=int, nargs="+")
    e.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    e.set_defaults(func=run_evaluate)


def _trace_spec(scenario) -> str:
    """The scenario's workload as the agents' trace spec."""
    from ddl_gym.scenarios import DATA_TRACES
    from ddl_gym.traces import find_data_dir

    if scenario.trace == "default":
        return "default:0-9"
    if scenario.trace in DATA_TRACES:
        data = find_data_dir()
        if data is None:
            raise CliError(f"workload {scenario.trace!r} needs the data dir")
        return str(data / DATA_TRACES[scenario.trace])
    if scenario.trace == "synthetic":
        raise CliError("agents train on trace files or the default workload, not [synthetic] specs")
    return scenario.trace


def _rest(args: argparse.Namespace) -> list[str]:
    rest = list(args.rest or [])
    return rest[1:] if rest[:1] == ["--"] else rest


def run_train(args: argparse.Namespace) -> int:
    import tomllib

    scenario = resolve_scenario(args, "train").scenario
    if scenario.stragglers:
        raise CliError(
            f"scenario {scenario.name!r}: [stragglers] is not supported by train yet "
            "(the env builds its cluster by name); remove it or use compare/simulate"
        )
    base: dict = {}
    if args.train_config is not None:
        if not args.train_config.is_file():
            raise CliError(f"{args.train_config}: no such file")
        try:
            base = tomllib.loads(args.train_config.read_text())
        except tomllib.TOMLDecodeError as err:
            raise CliError(f"{args.train_config}: not valid TOML: {err}") from None
    env = dict(base.get("env", {}))
    env.update(cluster=scenario.cluster, congestion=scenario.congestion)
    for key in ("fabric", "lease_s", "tick_s", "restore_s_per_gpu"):
        if getattr(scenario, key) is not None:
            env[key] = getattr(scenario, key)
    split = dict(base.get("split", {}))
    split["traces"] = [_trace_spec(scenario)]
    config = {**base, "env": env, "split": split}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "train_config.toml"
    path.write_text(to_toml(config))
    argv = ["--config", str(path), "--out", str(args.out)]
    for flag, value in (("--timesteps", args.timesteps), ("--seed", args.seed)):
        if value is not None:
            argv += [flag, str(value)]
    from ddl_gym.agents import train

    return _delegate(train.main, argv + _rest(args), "train")


def run_evaluate(args: argparse.Namespace) -> int:
    scenario = resolve_scenario(args, "evaluate").scenario
    argv = ["--congestion", str(scenario.congestion), "--traces", _trace_spec(scenario)]
    for model in args.model or []:
        argv += ["--model", str(model)]
    if args.seeds:
        argv += ["--seeds", *map(str, args.seeds)]
    from ddl_gym.agents import evaluate

    return _delegate(evaluate.main, argv + _rest(args), "evaluate")


def _delegate(main: Callable, argv: list[str], name: str) -> int:
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse errors in the delegate
        code = exit_.code
    if isinstance(code, str):
        print(code, file=sys.stderr)
        return 1
    return int(code or 0)
