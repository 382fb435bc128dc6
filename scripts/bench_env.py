"""Env speed: steps per second of a random valid-action policy on one core.

    python scripts/bench_env.py                       # Philly week on nvswitch512
    python scripts/bench_env.py --env ddl_gym/Small-v0 --steps 50000
    python scripts/bench_env.py --make                # through gymnasium.make's wrappers

The policy draws uniformly among the valid actions (``info["action_mask"]``);
episodes restart on termination or truncation and the reset time counts.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# Run from a checkout without relying on how (or whether) the package is
# installed: the venv's editable install may predate ddl_gym/__init__.py.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import ddl_gym  # noqa: E402, F401  (registers the envs)
from ddl_gym.env import ClusterEnv  # noqa: E402


def bench(env: gym.Env, steps: int, seed: int) -> tuple[float, int, int]:
    """(steps/s, steps, finished episodes) for a random valid policy."""
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="ddl_gym/PhillyWeek-v0", help="registered env id")
    ap.add_argument("--steps", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cluster", default=None, help="override the variant's cluster")
    ap.add_argument(
        "--make",
        action="store_true",
        help="build with gymnasium.make (adds its checker/order wrappers)",
    )
    args = ap.parse_args()
    kwargs = dict(gym.spec(args.env).kwargs)
    if args.cluster:
        kwargs["cluster"] = args.cluster
    env = gym.make(args.env, **kwargs) if args.make else ClusterEnv(**kwargs)
    base: ClusterEnv = env.unwrapped  # type: ignore[assignment]
    rate, steps, episodes = bench(env, args.steps, args.seed)
    print(
        f"{args.env} on {base.cluster.describe()}, K={base.K} M={base.M}: "
        f"{rate:,.0f} steps/s ({steps} steps, {episodes} finished episodes"
        f"{', via gymnasium.make' if args.make else ''})"
    )


if __name__ == "__main__":
    main()
