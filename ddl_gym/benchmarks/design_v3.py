"""The design runs of ddl-gym-v3 (ddl_gym/benchmarks/suite_v3.py).

``--scales``: each case's arrival-rate factor for its busy-load target
(``suite_v3.LOAD_TARGETS``, seed 0), printed as the ``_SCALES`` dict the
suite freezes. ``--run``: every heuristic of the suite on every seed of the
chosen cases (default: test, validation and quick), one process; writes the
design table (``ddl_gym/benchmarks/v3_design.json``): per case its source,
shape, fabric, congestion, busy load per seed, and per heuristic the mean
JCT, comm/compute ratio of multi-server jobs (min and max over seeds), max
preemptions, unfinished jobs, CPU seconds, and whether its mean JCT differs
between seeds. ``--comm-range``: the measured range of that ratio.

    nice -n 5 python scripts/design_v3.py --scales
    nice -n 5 python scripts/design_v3.py --run
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from ddl_gym.benchmarks.policies import resolve_policy
from ddl_gym.benchmarks.runner import run_case
from ddl_gym.benchmarks.suite import Case, get_suite
from ddl_gym.benchmarks.suite_v3 import LOAD_TARGETS, OVER_SEEDS
from ddl_gym.benchmarks.workload import arrival_scale_for, busy_load

OUT = Path(__file__).with_name("v3_design.json")


def comm_range() -> dict[str, float]:
    """Spread over packed iteration time, minus 1, per measured (job,
    placement) with the same GPU count packed on one server (Chronus: its
    ratio is already against the packed placement)."""
    from ddl_gym.fidelity.measured import load_measured
    from ddl_gym.traces import find_data_dir

    data = find_data_dir()
    if data is None:
        sys.exit("no data dir")
    df = load_measured(data)
    out: list[float] = []
    for _, g in df.groupby(["cluster", "job"]):
        multi = g[g["level"] == "multi-node"]
        if g["source"].iloc[0] == "chronus":
            out += list(multi["ratio"] - 1)
            continue
        machine = g[g["level"] == "machine"]
        packed = dict(zip(machine["gpus"], machine["ratio"], strict=True))
        pairs = zip(multi["gpus"], multi["ratio"], strict=True)
        out += [r / packed[n] - 1 for n, r in pairs if n in packed]
    x = np.array(out)
    q = {f"p{p}": float(np.percentile(x, p)) for p in (5, 50, 95)}
    return {"points": len(x), "min": float(x.min()), **q, "max": float(x.max())}


def scale_over_seeds(c: Case, target: float, digits: int = 3) -> float:
    """The arrival-rate factor whose busy load, averaged over the case's
    seeds, is ``target`` (for cases whose seeds swing far from seed 0's)."""
    n = c.cluster().num_gpus

    def load(k: float) -> float:
        w = dataclasses.replace(c.workload, arrival_scale=k)
        return float(np.mean([busy_load(w.build(s), n) for s in c.seeds]))

    lo, hi = 1e-3, 1e3
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if load(mid) < target else (lo, mid)
    return float(f"{math.sqrt(lo * hi):.{digits}g}")


def scales(cases: tuple[Case, ...], over_seeds: bool = False) -> None:
    print("_SCALES: dict[str, float] = {")
    for c in cases:
        if over_seeds or c.name in OVER_SEEDS:
            k = scale_over_seeds(c, LOAD_TARGETS[c.name])
        else:
            k = arrival_scale_for(c.workload, c.cluster().num_gpus, LOAD_TARGETS[c.name])
        print(f'    "{c.name}": {k},', flush=True)
    print("}")


def run(cases: tuple[Case, ...], heuristics: tuple[str, ...], out: Path) -> None:
    table = json.loads(out.read_text()) if out.is_file() else {}
    for c in cases:
        n = c.cluster().num_gpus
        loads = [busy_load(c.workload.build(s), n) for s in c.seeds]
        row: dict = {
            "split": c.split,
            "family": c.family,
            "source": c.workload.source,
            "shape": c.shape,
            "gpus": n,
            "fabric": c.fabric,
            "congestion": c.congestion,
            "seeds": list(c.seeds),
            "busy_load": [round(x, 3) for x in loads],
            "heuristics": {},
        }
        for h in heuristics:
            recs = [run_case(resolve_policy(h), c, s) for s in c.seeds]
            jct = [r["mean_jct_s"] for r in recs]
            comm = [r["multi_server_comm_overhead"] for r in recs if r["multi_server_jobs"] > 0]
            row["heuristics"][h] = {
                "mean_jct_h": round(float(np.mean(jct)) / 3600, 4),
                "jct_h_per_seed": [round(j / 3600, 4) for j in jct],
                "distinct_seeds": len(set(jct)) == len(jct),
                "comm_min": round(min(comm), 4) if comm else 0.0,
                "comm_max": round(max(comm), 4) if comm else 0.0,
                "max_preemptions": int(max(r["preemptions"] for r in recs)),
                "unfinished": int(sum(r["jobs"] - r["completed"] for r in recs)),
                "cpu_s": round(sum(r["cpu_s"] for r in recs), 2),
            }
        hs = row["heuristics"]
        best = min(hs, key=lambda h: hs[h]["mean_jct_h"])
        worst = max(hs, key=lambda h: hs[h]["mean_jct_h"])
        row |= {
            "best": best,
            "worst": worst,
            "spread": round(hs[worst]["mean_jct_h"] / hs[best]["mean_jct_h"], 3),
            "cpu_s": round(sum(v["cpu_s"] for v in hs.values()), 1),
        }
        table[c.name] = row
        print(
            f"{c.name}: load {np.mean(loads):.2f} best {best} worst {worst} spread {row['spread']}"
            f" comm {min(v['comm_min'] for v in hs.values()):.2f}-"
            f"{max(v['comm_max'] for v in hs.values()):.2f} pre "
            f"{max(v['max_preemptions'] for v in hs.values())} cpu {row['cpu_s']}",
            flush=True,
        )
        out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")


def markdown(table: dict) -> str:
    """The design table of docs/benchmark_v3_design.md."""
    lines = [
        "| case | split | source | shape (GPUs) | fabric | congestion | busy load | comm/compute "
        "(min-max over heuristics and seeds) | best (mean JCT h) | worst (mean JCT h) | spread "
        "| max preemptions | CPU s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    order = {"test": 0, "validation": 1, "train": 2, "quick": 3}

    def split_of(name: str) -> str:
        return "quick" if name.startswith("quick-") else table[name]["split"]

    for name, row in sorted(table.items(), key=lambda kv: (order[split_of(kv[0])], kv[0])):
        hs = row["heuristics"].values()
        split = split_of(name)
        src = row["source"].removeprefix("traces/")
        lo = min(v["comm_min"] for v in hs)
        hi = max(v["comm_max"] for v in hs)
        lines.append(
            f"| {name} | {split} | {src} | {row['shape']} ({row['gpus']}) | {row['fabric']} | "
            f"{row['congestion']} | {np.mean(row['busy_load']):.2f} | {lo:.2f}-{hi:.2f} | "
            f"{row['best']} ({row['heuristics'][row['best']]['mean_jct_h']:.1f}) | "
            f"{row['worst']} ({row['heuristics'][row['worst']]['mean_jct_h']:.1f}) | "
            f"{row['spread']:.2f} | "
            f"{max(v['max_preemptions'] for v in hs)} | {row['cpu_s']:.0f} |"
        )
    lines.append("")
    for split in ("test", "validation", "train", "quick"):
        rows = {n: r for n, r in table.items() if split_of(n) == split}
        if not rows:
            continue
        wins: dict[str, list[str]] = {}
        for n, r in sorted(rows.items()):
            wins.setdefault(r["best"], []).append(n)
        cpu = sum(r["cpu_s"] for r in rows.values())
        said = "; ".join(f"{h}: {', '.join(ns)}" for h, ns in sorted(wins.items()))
        lines.append(f"* {split}: {len(rows)} cases, CPU {cpu:.0f} s for every heuristic and seed;")
        lines.append(f"  best heuristic per case: {said}.")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--scales", action="store_true")
    ap.add_argument(
        "--over-seeds", action="store_true", help="--scales: the target is the mean over seeds"
    )
    ap.add_argument("--run", action="store_true")
    ap.add_argument("--comm-range", action="store_true")
    ap.add_argument("--markdown", action="store_true", help="print the design table")
    ap.add_argument("--split", default="test,validation,quick", help="comma-separated, or train")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    suite = get_suite("ddl-gym-v3")
    chosen: list[Case] = []
    for split in args.split.split(","):
        chosen += suite.select(quick=True) if split == "quick" else suite.select(split)
    if args.cases:
        names = set(args.cases.split(","))
        chosen = [c for c in (*suite.cases, *suite.quick) if c.name in names]
    t0 = time.process_time()
    if args.comm_range:
        print(json.dumps(comm_range(), indent=1))
    if args.scales:
        scales(tuple(chosen), args.over_seeds)
    if args.run:
        run(tuple(chosen), suite.heuristics, args.out)
    if args.markdown:
        print(markdown(json.loads(args.out.read_text())))
    print(f"CPU {time.process_time() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
