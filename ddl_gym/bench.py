"""Benchmarks: simulator speed and memory, env steps per second.

    python scripts/bench.py                      # FIFO cases + env (the quick check)
    python scripts/bench.py --philly             # every policy on the Philly week
    python scripts/bench.py --scale              # every policy, 10k/30k/100k jobs, 4,096 GPUs
    python scripts/bench.py --scale --jobs 100000 --policies fifo,dally
    python scripts/bench.py --scale --scale-regime fixed --jobs 10000,100000,1000000
    python scripts/bench_env.py --env ddl_gym/Small-v0 --steps 50000

All times are CPU seconds of the simulation alone (``time.process_time``:
the machines these benchmarks ran on are shared, wall time is noisy); the
workload is built before the clock starts.

* FIFO cases: the network model and contention on (moderate background
  congestion, so cross-rack jobs share rack uplinks): the seed's 411-job week
  on its 64-GPU cluster and the Philly week (5,869 jobs) on 512 GPUs; peak
  memory is Python's allocation peak during the run (tracemalloc).
* ``--philly``: every shipped policy (``ddl_gym.baselines.POLICY_NAMES``, each with
  its own ``engine_kwargs()``) on the Philly week, 512 GPUs, moderate
  congestion: jobs per CPU-second and event instants (decision points).
* ``--scale``: synthetic workloads of 10k / 30k / 100k jobs on 4,096 GPUs
  (64 racks x 8 servers x 8 GPUs, NVSwitch/InfiniBand, moderate congestion)
  at an offered load of 0.8 (see ``scale_trace``). Each run is a fresh
  process so that its peak resident memory (``ru_maxrss``) is its own.
* ``--scale-regime fixed``: the cluster grows with the workload so that the
  regime stays the same at every size: one GPU per ``JOBS_PER_GPU`` (10)
  jobs (10k jobs on 1,024 GPUs ... 1M jobs on 99,968 GPUs, racks of 8 x 8)
  and the same arrival rate per GPU (``FIXED_RATE_PER_GPU_H``), so the
  arrival window, the offered load (0.8) and the queue per GPU are the same
  at every size: cost per job should then stay flat. ``--scale-regime both``
  runs this series and the 4,096-GPU one. Rows give CPU microseconds per job
  and per event instant besides the totals.
* the env case: a random valid-action policy on the Philly week (512 GPUs),
  steps per CPU-second.

Needs ../shared/data (or DDL_GYM_DATA) for the real weeks; those cases are
skipped without it (the scale cases need no data).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
from scipy.special import erfc

from ddl_gym.baselines import POLICY_NAMES, make_policy
from ddl_gym.baselines.fifo import FifoPolicy
from ddl_gym.engine import Engine, EngineView, run_policy, simulate
from ddl_gym.topology import FABRICS, Cluster
from ddl_gym.traces import find_data_dir, load_trace, synthetic_trace
from ddl_gym.traces.synthetic import (
    PHILLY_DURATION_MEDIAN_S,
    PHILLY_DURATION_SIGMA,
    PHILLY_GPU_MIX,
)

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

SCALE_JOBS = (10_000, 30_000, 100_000)
SCALE_LOAD = 0.8
SCALE_REGIMES = ("cluster", "fixed")  # 4,096 GPUs at every size; GPUs grow with jobs
FIXED_JOBS = (10_000, 100_000, 1_000_000)
JOBS_PER_GPU = 10
_RACK_GPUS = 64  # 8 servers x 8 GPUs


def scale_cluster() -> Cluster:
    """4,096 GPUs: 64 racks of the Philly benchmark's racks (8 servers x 8)."""
    return Cluster(64, 8, 8, FABRICS["nvswitch_ib"])


def fixed_regime_cluster(n_jobs: int) -> Cluster:
    """The fixed-regime cluster of ``n_jobs`` jobs: one GPU per
    ``JOBS_PER_GPU`` jobs, in whole racks of 8 servers x 8 GPUs."""
    racks = max(1, round(n_jobs / (JOBS_PER_GPU * _RACK_GPUS)))
    return Cluster(racks, 8, 8, FABRICS["nvswitch_ib"])


def fixed_rate_per_gpu_h(load: float = SCALE_LOAD) -> float:
    """Arrivals per hour per GPU of the fixed regime: the rate whose offered
    load over the arrival window is ``load`` for ``JOBS_PER_GPU`` jobs per
    GPU (the window ``n / rate`` is then the same at every size)."""
    gpus = 1000
    return scale_arrival_rate(load, JOBS_PER_GPU * gpus, gpus) / gpus


def _survival(s: np.ndarray) -> np.ndarray:
    """P(duration > s) of the generator's log-normal (Philly median and sigma)."""
    z = (np.log(np.maximum(s, 1e-12)) - math.log(PHILLY_DURATION_MEDIAN_S)) / PHILLY_DURATION_SIGMA
    return 0.5 * erfc(z / math.sqrt(2.0))


def window_load(rate_per_s: float, n_jobs: int, num_gpus: int) -> float:
    """Expected offered load over the arrival window ``[0, T]``, ``T = n / rate``:
    the GPUs jobs would hold there if each started on arrival, over ``G * T``.

    A job arriving at ``a`` holds ``gpus`` GPUs for ``min(d, T - a)`` of the
    window, so the load is ``rate * E[gpus] / G * integral_0^T S(s) (1 - s/T) ds``
    with ``S`` the duration's survival function. With Philly's heavy tail
    (sigma 2) much of the work of a short trace lies beyond its window, so
    the nominal ``rate * E[gpus * d] / G`` would overstate how busy it is.
    """
    T = n_jobs / rate_per_s
    s = np.concatenate([[0.0], np.geomspace(1e-3, T, 4000)])
    integral = float(np.trapezoid(_survival(s) * (1.0 - s / T), s))
    return rate_per_s * _mean_gpus() / num_gpus * integral


def _mean_gpus() -> float:
    total = sum(PHILLY_GPU_MIX.values())
    return sum(g * w for g, w in PHILLY_GPU_MIX.items()) / total


def scale_arrival_rate(load: float, n_jobs: int, num_gpus: int) -> float:
    """Jobs per hour whose offered load over the arrival window is ``load``
    (bisection on ``window_load``, which grows with the rate)."""
    lo, hi = 1e-4, 1e3  # jobs per second
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        if window_load(mid, n_jobs, num_gpus) < load:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi) * 3600.0


def scale_trace(n_jobs: int, seed: int = 0, load: float = SCALE_LOAD):
    """Philly-shaped synthetic jobs (sizes, durations) at ``load`` on 4,096 GPUs."""
    cluster = scale_cluster()
    rate = scale_arrival_rate(load, n_jobs, cluster.num_gpus)
    return synthetic_trace(
        n_jobs=n_jobs, seed=seed, arrival_rate_per_h=rate, max_gpus=cluster.num_gpus
    )


def fixed_regime_trace(n_jobs: int, seed: int = 0, load: float = SCALE_LOAD):
    """Philly-shaped synthetic jobs on ``fixed_regime_cluster(n_jobs)`` at the
    fixed regime's arrival rate per GPU."""
    cluster = fixed_regime_cluster(n_jobs)
    rate = fixed_rate_per_gpu_h(load) * cluster.num_gpus
    return synthetic_trace(
        n_jobs=n_jobs, seed=seed, arrival_rate_per_h=rate, max_gpus=cluster.num_gpus
    )


def scale_case(n_jobs: int, regime: str = "cluster"):
    """(trace, cluster) of one scale case of ``regime`` (``SCALE_REGIMES``)."""
    if regime == "cluster":
        return scale_trace(n_jobs), scale_cluster()
    if regime == "fixed":
        return fixed_regime_trace(n_jobs), fixed_regime_cluster(n_jobs)
    raise ValueError(f"unknown scale regime {regime!r}; known: {', '.join(SCALE_REGIMES)}")


def offered_load(trace, num_gpus: int) -> float:
    """Realised ``window_load`` of a trace: GPU-seconds its jobs would hold
    within the arrival window if each started on arrival, over ``G * T``."""
    jobs = trace.jobs
    arrival = jobs["arrival_s"].to_numpy()
    duration = (jobs["iterations"] * jobs["iter_time_s"] / jobs["gpus"]).to_numpy()
    t0, t1 = arrival.min(), arrival.max()
    held = np.minimum(arrival + duration, t1) - arrival
    return float((held * jobs["gpus"].to_numpy()).sum() / (num_gpus * (t1 - t0)))


def window_utilization(series: pd.DataFrame, trace, num_gpus: int) -> float:
    """Realised GPU utilisation over the arrival window ``[t0, t1]``: the
    time average of the used GPUs (the series holds the count after each
    instant) over ``G * (t1 - t0)``. With heavy-tailed durations the
    summary's utilisation (over the whole makespan) is low even when the
    cluster was busy while jobs arrived: a few jobs run on for days after."""
    arrival = trace.jobs["arrival_s"].to_numpy()
    t0, t1 = float(arrival.min()), float(arrival.max())
    if not t1 > t0 or series.empty:
        return float("nan")
    times = np.clip(np.append(series["time_s"].to_numpy(), t1), t0, t1)
    used = series["used_gpus"].to_numpy()
    return float((used * np.diff(times)).sum() / (num_gpus * (t1 - t0)))


def run_measured(trace, cluster, policy_name: str, congestion: str = "moderate") -> dict:
    """One run: CPU seconds of the simulation, event instants, summary."""
    policy = make_policy(policy_name)
    kwargs = {**policy.engine_kwargs(), "congestion": congestion}
    start = time.process_time()
    engine = Engine(trace, cluster, **kwargs)
    policy.reset(EngineView(engine), seed=0)
    run_policy(engine, policy)
    result = engine.result()
    cpu = time.process_time() - start
    return {
        "policy": policy_name,
        "jobs": len(trace),
        "gpus": engine.cluster.num_gpus,
        "cpu_s": cpu,
        "jobs_per_cpu_s": len(trace) / cpu,
        "us_per_job": 1e6 * cpu / len(trace),
        "us_per_event": 1e6 * cpu / max(1, engine.instant),
        "events": engine.instant,
        "makespan_h": result.summary["makespan_s"] / 3600,
        "utilization": result.summary["gpu_utilization"],
        "window_utilization": window_utilization(
            result.series, engine.trace, engine.cluster.num_gpus
        ),
        "mean_jct_h": result.summary["mean_jct_s"] / 3600,
    }


def bench_sim(trace, cluster: str, repeat: int) -> tuple[float, float, dict]:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        result = simulate(trace, cluster, FifoPolicy(), congestion="moderate")
        best = min(best, time.process_time() - start)
    tracemalloc.start()
    simulate(trace, cluster, FifoPolicy(), congestion="moderate")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return best, peak / 2**20, result.summary


def philly_rows(data: Path, policies: list[str], repeat: int = 1) -> list[dict]:
    """Every policy on the Philly week; the best (least CPU) of ``repeat`` runs."""
    trace = load_trace(data / CASES[1][1])
    rows = []
    for name in policies:
        row = min(
            (run_measured(trace, "nvswitch512", name) for _ in range(max(1, repeat))),
            key=lambda r: r["cpu_s"],
        )
        rows.append(row)
        print(
            f"Philly week | {name:14s} {row['cpu_s']:7.2f} CPU-s "
            f"{row['jobs_per_cpu_s']:9,.0f} jobs/CPU-s {row['events']:9,d} events",
            flush=True,
        )
    return rows


def _scale_child(
    n_jobs: int, policy: str, cpu_limit_s: float | None = None, regime: str = "cluster"
) -> None:
    """Run one scale case in this (fresh) process; print one JSON line. With
    ``cpu_limit_s`` the process is stopped (SIGXCPU) past that much CPU time."""
    if cpu_limit_s:
        limit = math.ceil(cpu_limit_s)
        resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 5))
    trace, cluster = scale_case(n_jobs, regime)
    row = run_measured(trace, cluster, policy)
    row["regime"] = regime
    row["offered_load"] = offered_load(trace, cluster.num_gpus)
    # ru_maxrss: KiB on Linux; the whole process (interpreter, trace, run)
    row["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(row))


def _scale_run(
    n: int, name: str, cpu_limit_s: float | None, regime: str = "cluster"
) -> dict | None:
    """One scale case in a fresh process (None: stopped at ``cpu_limit_s``)."""
    arg = f"{n},{name},{regime}" + (f",{cpu_limit_s}" if cpu_limit_s else "")
    out = subprocess.run(
        [sys.executable, "-m", "ddl_gym.bench", "--scale-child", arg],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        # SIGXCPU (SIGKILL at the hard limit)
        if not cpu_limit_s or out.returncode not in (-24, -9):
            raise RuntimeError(f"scale run {n} jobs {name} failed:\n{out.stderr}")
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def scale_rows(
    jobs: list[int],
    policies: list[str],
    cpu_limit_s: float | None = None,
    repeat: int = 1,
    regime: str = "cluster",
) -> list[dict]:
    """One fresh process per (jobs, policy, repeat), the least CPU of
    ``repeat`` kept (the machine is shared: the others ran slower for
    reasons outside the run); a case stopped at ``cpu_limit_s`` CPU seconds
    every time gives a row with ``cpu_s = None`` (shown as "> limit"). The
    policies alternate within each size, so a slow spell of the shared
    machine falls on all of them."""
    rows = []
    for n in jobs:
        gpus = (scale_cluster() if regime == "cluster" else fixed_regime_cluster(n)).num_gpus
        where = f"scale {n:>9,} jobs, {gpus:>7,} GPUs"
        for name in policies:
            runs = [_scale_run(n, name, cpu_limit_s, regime) for _ in range(max(1, repeat))]
            done = [r for r in runs if r is not None]
            if not done:
                rows.append(
                    {
                        "policy": name,
                        "jobs": n,
                        "gpus": gpus,
                        "regime": regime,
                        "cpu_s": None,
                        "limit": cpu_limit_s,
                    }
                )
                print(f"{where} | {name:14s} > {cpu_limit_s:.0f} CPU-s (stopped)", flush=True)
                continue
            row = min(done, key=lambda r: r["cpu_s"])
            row["runs"] = len(runs)
            rows.append(row)
            print(
                f"{where} | {name:14s} {row['cpu_s']:8.2f} CPU-s "
                f"{row['us_per_job']:6,.0f} us/job {row['us_per_event']:5,.0f} us/event "
                f"{row['events']:10,d} events "
                f"peak {row['peak_rss_mib']:6,.0f} MiB load {row['offered_load']:.2f} "
                f"busy {row['window_utilization']:.2f} (util {row['utilization']:.2f})"
                + (f" (best of {len(runs)})" if len(runs) > 1 else ""),
                flush=True,
            )
    return rows


def markdown(rows: list[dict], with_memory: bool) -> str:
    """A markdown table of ``rows``; ``with_memory`` (the scale rows): GPUs,
    cost per job and per event, peak RSS and the busy share too."""
    if not with_memory:
        lines = ["| jobs | policy | CPU s | jobs / CPU-s | events |", "|---:|---|---:|---:|---:|"]
        for r in rows:
            if r["cpu_s"] is None:
                lines.append(f"| {r['jobs']:,} | {r['policy']} | > {r['limit']:.0f} | - | - |")
                continue
            lines.append(
                f"| {r['jobs']:,} | {r['policy']} | {r['cpu_s']:.2f} | "
                f"{r['jobs_per_cpu_s']:,.0f} | {r['events']:,} |"
            )
        return "\n".join(lines)
    lines = [
        "| jobs | GPUs | policy | CPU s | µs / job | µs / event | events | peak MiB | busy |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        gpus = f"{r['gpus']:,}" if "gpus" in r else "-"
        if r["cpu_s"] is None:
            lines.append(
                f"| {r['jobs']:,} | {gpus} | {r['policy']} | > {r['limit']:.0f} |" + " - |" * 5
            )
            continue
        lines.append(
            f"| {r['jobs']:,} | {gpus} | {r['policy']} | {r['cpu_s']:.2f} | "
            f"{r['us_per_job']:,.0f} | {r['us_per_event']:,.1f} | {r['events']:,} | "
            f"{r['peak_rss_mib']:,.0f} | {r['window_utilization']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--env-steps", type=int, default=100_000)
    ap.add_argument("--philly", action="store_true", help="every policy on the Philly week")
    ap.add_argument("--scale", action="store_true", help="synthetic 10k-100k jobs, 4,096 GPUs")
    ap.add_argument("--jobs", default=None, help="scale job counts (default per regime)")
    ap.add_argument(
        "--scale-regime",
        choices=(*SCALE_REGIMES, "both"),
        default="cluster",
        help="cluster: 4,096 GPUs at every size; fixed: GPUs grow with the jobs (one per "
        f"{JOBS_PER_GPU}), same load and arrival rate per GPU; both",
    )
    ap.add_argument("--policies", default=",".join(POLICY_NAMES), help="policies to run")
    ap.add_argument("--markdown", action="store_true", help="also print markdown tables")
    ap.add_argument(
        "--cpu-limit",
        type=float,
        default=None,
        help="stop a scale run past this many CPU seconds (reported as '> limit')",
    )
    ap.add_argument(
        "--scale-repeat",
        type=int,
        default=1,
        help="fresh processes per scale case; the least CPU time is reported",
    )
    ap.add_argument("--scale-child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.scale_child:
        n, policy, regime, *limit = args.scale_child.split(",")
        _scale_child(int(n), policy, float(limit[0]) if limit else None, regime)
        return
    try:
        run_benchmarks(
            repeat=args.repeat,
            env_steps=args.env_steps,
            philly=args.philly,
            scale=args.scale,
            jobs=[int(x) for x in args.jobs.split(",") if x] if args.jobs else None,
            policies=[p for p in args.policies.split(",") if p],
            markdown_tables=args.markdown,
            cpu_limit=args.cpu_limit,
            scale_repeat=args.scale_repeat,
            scale_regime=args.scale_regime,
        )
    except ValueError as err:
        ap.error(str(err))


def run_benchmarks(
    *,
    repeat: int = 3,
    env_steps: int = 100_000,
    philly: bool = False,
    scale: bool = False,
    jobs: Sequence[int] | None = None,
    policies: Sequence[str] = POLICY_NAMES,
    markdown_tables: bool = False,
    cpu_limit: float | None = None,
    scale_repeat: int = 1,
    scale_regime: str = "cluster",
) -> None:
    """``--philly`` and / or ``--scale`` (``philly``, ``scale``), else the
    FIFO cases and the env case; prints one line per case as it finishes.
    ``scale_regime``: ``cluster``, ``fixed`` or ``both`` (``SCALE_REGIMES``);
    ``jobs`` defaults to ``SCALE_JOBS`` (cluster) or ``FIXED_JOBS`` (fixed)."""
    regimes = list(SCALE_REGIMES) if scale_regime == "both" else [scale_regime]
    unknown_regimes = [r for r in regimes if r not in SCALE_REGIMES]
    if unknown_regimes:
        raise ValueError(
            f"unknown scale regime {unknown_regimes[0]!r}; known: {', '.join(SCALE_REGIMES)}, both"
        )
    policies = list(policies)
    unknown = [p for p in policies if p not in POLICY_NAMES]
    if unknown:
        raise ValueError(f"unknown policies {unknown}; known: {', '.join(POLICY_NAMES)}")
    data = find_data_dir()
    if philly or scale:
        if philly:
            if data is None:
                print("../shared/data not found (set DDL_GYM_DATA): Philly week skipped")
            else:
                rows = philly_rows(data, policies, repeat)
                if markdown_tables:
                    print(markdown(rows, with_memory=False))
        if scale:
            for regime in regimes:
                default: Sequence[int] = FIXED_JOBS if regime == "fixed" else SCALE_JOBS
                sizes = list(jobs or default)
                rows = scale_rows(sizes, policies, cpu_limit, scale_repeat, regime)
                if markdown_tables:
                    print(markdown(rows, with_memory=True))
        return
    if data is None:
        print("../shared/data not found (set DDL_GYM_DATA): nothing to benchmark")
        return
    for label, rel, cluster in CASES:
        trace = load_trace(data / rel)
        seconds, peak_mb, summary = bench_sim(trace, cluster, repeat)
        print(
            f"simulate FIFO | {label}: {seconds:.3f} CPU-s, {len(trace) / seconds:,.0f} "
            f"jobs/CPU-s, peak {peak_mb:.1f} MiB (makespan {summary['makespan_s'] / 86400:.2f} "
            f"d, mean JCT {summary['mean_jct_s'] / 3600:.2f} h)"
        )
    if env_steps:
        from ddl_gym.env import ClusterEnv

        env = ClusterEnv(trace="philly-week", cluster="nvswitch512")
        rate, steps, episodes = bench_env(env, env_steps, seed=0)
        print(
            f"env random-valid | Philly week, 512 GPUs, K=8 M=8: "
            f"{rate:,.0f} steps/CPU-s ({steps} steps)"
        )


def bench_env(env: gym.Env, steps: int, seed: int) -> tuple[float, int, int]:
    """(steps per CPU-second, steps, finished episodes) for a random valid
    policy; the episodes restart on termination or truncation and the reset
    time counts."""
    rng = np.random.default_rng(seed)
    _, info = env.reset(seed=seed)
    episodes = 0
    start = time.process_time()  # CPU time: the machines are shared
    for _ in range(steps):
        valid = np.flatnonzero(info["action_mask"])
        action = int(valid[rng.integers(len(valid))])
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            episodes += 1
            _, info = env.reset()
    elapsed = time.process_time() - start
    return steps / elapsed, steps, episodes


def env_main(argv: list[str] | None = None) -> None:
    """``scripts/bench_env.py``: env speed of a random valid-action policy."""
    ap = argparse.ArgumentParser(
        description="Env speed: steps per CPU-second of a random valid policy."
    )
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
        f"{rate:,.0f} steps/CPU-s ({steps} steps, {episodes} finished episodes"
        f"{', via gymnasium.make' if args.make else ''})"
    )


if __name__ == "__main__":
    main()
