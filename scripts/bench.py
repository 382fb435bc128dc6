"""Benchmarks: simulator speed and memory, env steps per second.

    python scripts/bench.py            # all cases, one line each
    python scripts/bench.py --repeat 5 # best of 5 runs per simulator case

Simulator cases run FIFO with the network model and contention on (moderate
background congestion, so cross-rack jobs share rack uplinks): (a) the seed's
411-job week on its 64-GPU cluster, (b) the Philly week (5,869 jobs) on 512
GPUs. Peak memory is Python's allocation peak during the run (tracemalloc).
The env case is a random valid-action policy on the Philly week (512 GPUs).
Needs ../shared/data (or DDL_GYM_DATA); cases without data are skipped.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from baselines.fifo import FifoPolicy  # noqa: E402
from ddl_gym.engine import simulate  # noqa: E402
from ddl_gym.traces import find_data_dir, load_trace  # noqa: E402

CASES = (
    (
        "seed week (411 jobs), seed64",
        "traces/dally/sense_500jobs_poisson_1proc-week.json",
        "seed64",
    ),
    (
        "Philly week (5,869 jobs), 512 GPUs",
        "traces/philly/philly_2017-11-13_to_2017-11-19.csv",
        "nvswitch512",
    ),
)


def bench_sim(trace, cluster: str, repeat: int) -> tuple[float, float, dict]:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        result = simulate(trace, cluster, FifoPolicy(), congestion="moderate")
        best = min(best, time.perf_counter() - start)
    tracemalloc.start()
    simulate(trace, cluster, FifoPolicy(), congestion="moderate")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return best, peak / 2**20, result.summary


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--env-steps", type=int, default=100_000)
    args = ap.parse_args(argv)
    data = find_data_dir()
    if data is None:
        print("../shared/data not found (set DDL_GYM_DATA): nothing to benchmark")
        return
    for label, rel, cluster in CASES:
        trace = load_trace(data / rel)
        seconds, peak_mb, summary = bench_sim(trace, cluster, args.repeat)
        print(
            f"simulate FIFO | {label}: {seconds:.3f} s, {len(trace) / seconds:,.0f} jobs/s, "
            f"peak {peak_mb:.1f} MiB (makespan {summary['makespan_s'] / 86400:.2f} d, "
            f"mean JCT {summary['mean_jct_s'] / 3600:.2f} h)"
        )
    if args.env_steps:
        from ddl_gym.env import ClusterEnv
        from scripts.bench_env import bench

        env = ClusterEnv(trace="philly-week", cluster="nvswitch512")
        rate, steps, episodes = bench(env, args.env_steps, seed=0)
        print(
            f"env random-valid | Philly week, 512 GPUs, K=8 M=8: "
            f"{rate:,.0f} steps/s ({steps} steps)"
        )


if __name__ == "__main__":
    main()
