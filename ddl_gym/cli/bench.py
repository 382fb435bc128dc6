"""``ddl-gym bench``: simulator speed and memory on a scenario, or the
standard benchmark suites of ``ddl_gym.bench``."""

from __future__ import annotations

import argparse
import time
import tracemalloc

from ddl_gym.cli import names
from ddl_gym.cli.common import (
    CliError,
    add_scenario_args,
    epilog,
    make_policy,
    progress,
    resolve_scenario,
    seed_arg,
    split_list,
    text_table,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="simulator speed and memory on a scenario",
        description="Time one policy on a scenario's workload (best of --repeat runs, CPU "
        "seconds) and its peak Python memory. --suite runs the standard cases of ddl_gym.bench "
        "instead; --philly every policy on the Philly week; --scale every policy on synthetic "
        "10k/30k/100k-job workloads on 4,096 GPUs at offered load 0.8; --scale --scale-regime "
        "fixed grows the cluster with the jobs (10k jobs on 1,024 GPUs ... 1M on 99,968) at the "
        "same load and arrival rate per GPU.",
        epilog=epilog(
            "ddl-gym bench -s seed-week-heavy",
            "ddl-gym bench -s philly-week-512 --policy fifo --repeat 5",
            "ddl-gym bench --suite",
            "ddl-gym bench --philly",
            "ddl-gym bench --scale --scale-jobs 100000 --policies fifo,tiresias,gandiva,dally",
            "ddl-gym bench --scale --scale-regime fixed --scale-jobs 10000,100000,1000000",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scenario_args(p)
    p.add_argument(
        "-p", "--policy", default="fifo", help=f"a policy: {names.listed(names.POLICIES)}"
    )
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=seed_arg, default=0)
    p.add_argument(
        "--suite",
        action="store_true",
        help="the standard cases of ddl_gym.bench (needs the data dir)",
    )
    p.add_argument("--philly", action="store_true", help="every policy on the Philly week")
    p.add_argument("--scale", action="store_true", help="synthetic jobs on 4,096 GPUs")
    p.add_argument(
        "--scale-jobs", default=None, help="--scale job counts (default 10000,30000,100000)"
    )
    p.add_argument(
        "--scale-regime",
        choices=("cluster", "fixed", "both"),
        default="cluster",
        help="--scale: cluster = 4,096 GPUs at every size (default 10k/30k/100k jobs); fixed = "
        "one GPU per 10 jobs, same load and arrival rate per GPU (default 10k/100k/1M jobs); both",
    )
    p.add_argument(
        "--scale-repeat",
        type=int,
        default=1,
        help="--scale: fresh processes per case, the least CPU time reported",
    )
    p.add_argument(
        "--policies",
        default=None,
        help=f"--philly/--scale policies, comma-separated, of: {names.listed(names.POLICIES)} "
        "(default: all)",
    )
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.repeat < 1:
        raise CliError("--repeat must be >= 1")
    if args.suite or args.philly or args.scale:
        return _suites(args)
    import pandas as pd

    from ddl_gym.experiments.cells import run_simulation

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


def _suites(args: argparse.Namespace) -> int:
    """``--suite`` / ``--philly`` / ``--scale``: ``ddl_gym.bench.run_benchmarks``."""
    from ddl_gym import bench

    kwargs = {}
    scale_jobs: str | None = args.scale_jobs
    if scale_jobs:
        try:
            kwargs["jobs"] = [int(x) for x in split_list(scale_jobs)]
        except ValueError:
            raise CliError(f"--scale-jobs: integers, comma-separated, got {scale_jobs!r}") from None
    if args.policies:
        kwargs["policies"] = split_list(args.policies)
    bench.run_benchmarks(
        repeat=args.repeat,
        philly=args.philly,
        scale=args.scale,
        scale_repeat=args.scale_repeat,
        scale_regime=args.scale_regime,
        **kwargs,
    )
    return 0
