"""Simulate one policy on one workload and print its summary.

    python scripts/simulate.py                                  # FIFO, default workload, seed64
    python scripts/simulate.py --trace ../shared/data/traces/dally/sense_500jobs_poisson_1proc-week.json \
        --cluster seed64 --congestion heavy --policy fifo
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ddl_gym.engine import simulate  # noqa: E402
from ddl_gym.traces import default_trace, load_trace  # noqa: E402


def make_policy(name: str):
    try:
        from baselines import make_policy as registry
    except ImportError:
        registry = None
    if registry is not None:
        return registry(name)
    if name != "fifo":
        raise SystemExit(f"unknown policy {name!r}")
    from baselines.fifo import FifoPolicy

    return FifoPolicy()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--trace", default="default", help="'default' or a trace file")
    ap.add_argument("--cluster", default="seed64")
    ap.add_argument("--congestion", default="heavy")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    trace = default_trace(seed=args.seed) if args.trace == "default" else load_trace(args.trace)
    policy = make_policy(args.policy)
    extra = policy.engine_kwargs() if hasattr(policy, "engine_kwargs") else {}
    result = simulate(
        trace, args.cluster, policy, seed=args.seed, congestion=args.congestion, **extra
    )
    print(
        f"{args.policy} on {trace.name} ({len(trace)} jobs), {args.cluster}, congestion {args.congestion}"
    )
    width = max(map(len, result.summary))
    for key, value in result.summary.items():
        print(f"  {key:<{width}}  {value:,.4g}")


if __name__ == "__main__":
    main()
