"""Benchmarks: simulator speed and memory, env steps per second.

    python scripts/bench.py            # all cases, one line each
    python scripts/bench.py --repeat 5 # best of 5 runs per simulator case
    python scripts/bench_env.py --env ddl_gym/Small-v0 --steps 50000

Simulator cases run FIFO with the network model and contention on (moderate
background congestion, so cross-rack jobs share rack uplinks): (a) the seed's
411-job week on its 64-GPU cluster, (b) the Philly week (5,869 jobs) on 512
GPUs. Peak memory is Python's allocation peak during the run (tracemalloc).
The env case is a random valid-action policy on the Philly week (512 GPUs).
Needs ../shared/data (or DDL_GYM_DATA); cases without data are skipped.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import gymnasium as gym
import numpy as np

from ddl_gym.baselines.fifo import FifoPolicy
from ddl_gym.engine import simulate
from ddl_gym.traces import find_data_dir, load_trace

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

        env = ClusterEnv(trace="philly-week", cluster="nvswitch512")
        rate, steps, episodes = bench_env(env, args.env_steps, seed=0)
        print(
            f"env random-valid | Philly week, 512 GPUs, K=8 M=8: "
            f"{rate:,.0f} steps/s ({steps} steps)"
        )


def bench_env(env: gym.Env, steps: int, seed: int) -> tuple[float, int, int]:
    """(steps/s, steps, finished episodes) for a random valid policy; the
    episodes restart on termination or truncation and the reset time counts."""
    rng = np.random.default_rng(seed)
    _, info = env.reset(seed=seed)
    episodes = 0
    start = time.perf_counter()
    for _ in range(steps):
        valid = np.flatnonzero(info["action_mask"])
        action = int(valid[rng.integers(len(valid))])
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            episodes += 1
            _, info = env.reset()
    elapsed = time.perf_counter() - start
    return steps / elapsed, steps, episodes


def env_main(argv: list[str] | None = None) -> None:
    """``scripts/bench_env.py``: env speed of a random valid-action policy."""
    ap = argparse.ArgumentParser(description="Env speed: steps/s of a random valid policy.")
    ap.add_argument("--env", default="ddl_gym/PhillyWeek-v0", help="registered env id")
    ap.add_argument("--steps", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cluster", default=None, help="override the variant's cluster")
    ap.add_argument(
        "--make",
        action="store_true",
        help="build with gymnasium.make (adds its checker/order wrappers)",
    )
    args = ap.parse_args(argv)
    from ddl_gym.env import ClusterEnv

    kwargs = dict(gym.spec(args.env).kwargs)
    if args.cluster:
        kwargs["cluster"] = args.cluster
    env = gym.make(args.env, **kwargs) if args.make else ClusterEnv(**kwargs)
    base: ClusterEnv = env.unwrapped  # type: ignore[assignment]
    rate, steps, episodes = bench_env(env, args.steps, args.seed)
    print(
        f"{args.env} on {base.cluster.describe()}, K={base.K} M={base.M}: "
        f"{rate:,.0f} steps/s ({steps} steps, {episodes} finished episodes"
        f"{', via gymnasium.make' if args.make else ''})"
    )
