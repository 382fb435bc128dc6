"""Fuzz the public API: random env configurations x random and invalid actions,
``simulate()`` x every baseline, malformed trace files, scenario files and CLI
arguments (the harness is ``tests/fuzz.py``; ``tests/test_fuzz.py`` runs a
short profile in the test suite).

    python scripts/fuzz.py                 # the short profile (seconds)
    nice python scripts/fuzz.py --long     # 10^6 actions over 1,000 configurations
    python scripts/fuzz.py --long --seed 3 --json fuzz.json
    python scripts/fuzz.py --long --shard 0/3 & ... --shard 2/3   # in 3 processes

Exit status 1 if anything broke; each failure prints with the seed that replays it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo, for tests.fuzz

from tests.fuzz import LONG, SHORT, run_profile  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--long", action="store_true", help="the long profile (>= 10^6 actions)")
    p.add_argument("--seed", type=int, default=0, help="profile seed (default 0)")
    p.add_argument("--env-configs", type=int, help="override: env configurations")
    p.add_argument("--actions", type=int, help="override: actions per env configuration")
    p.add_argument("--simulate-configs", type=int, help="override: simulate() configurations")
    p.add_argument("--json", type=Path, help="write the figures and failures here")
    p.add_argument(
        "--shard", default="0/1", help="K/N: run every N-th case from K (parallel processes)"
    )
    args = p.parse_args(argv)
    profile = dataclasses.replace(LONG if args.long else SHORT, seed=args.seed)
    for key, value in (
        ("env_configs", args.env_configs),
        ("actions_per_config", args.actions),
        ("simulate_configs", args.simulate_configs),
    ):
        if value is not None:
            profile = dataclasses.replace(profile, **{key: value})
    try:
        shard, shards = (int(x) for x in args.shard.split("/"))
        assert 0 <= shard < shards
    except (ValueError, AssertionError):
        p.error(f"--shard must be K/N with 0 <= K < N, got {args.shard!r}")
    print(f"profile: {profile}, shard {shard}/{shards}", flush=True)
    cpu = time.process_time()
    with tempfile.TemporaryDirectory(prefix="ddl-gym-fuzz-") as folder:
        stats = run_profile(
            profile, Path(folder), lambda m: print(m, flush=True), shard=shard, shards=shards
        )
    cpu = time.process_time() - cpu
    summary = {**stats.summary(), "cpu_s": round(cpu, 1)}
    print(json.dumps(summary, indent=1))
    for failure in stats.failures:
        print("----", failure, sep="\n")
    if args.json:
        record = {
            "profile": dataclasses.asdict(profile),
            "shard": f"{shard}/{shards}",
            **summary,
            "failures": stats.failures,
        }
        args.json.write_text(json.dumps(record, indent=1))
    return 1 if stats.failures else 0


if __name__ == "__main__":
    sys.exit(main())
