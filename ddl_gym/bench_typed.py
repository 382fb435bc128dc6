"""What GPU types cost the simulator: the same trace on an untyped cluster
and on typed ones of the same shape, CPU time, alternating runs.

Three clusters of the fixed-regime scale benchmark's shape
(``ddl_gym.bench.fixed_regime_cluster``):

* ``untyped``: the benchmark's own cluster;
* ``typed-mixable``: its racks split between V100-16GB and V100-32GB (both
  run at V100 speed) with mixed placements allowed: the schedule and every
  result are the untyped ones (a test checks it), so the CPU ratio is the
  typed machinery's own cost (per-type free counts and indexes);
* ``typed-same-speed``: the same without mixing: a job runs on one type, so
  the schedule changes (jobs wait for GPUs of one type) and the policy's own
  work with it;
* ``typed-k80-p100-v100``: racks split in thirds between K80, P100 and V100:
  jobs run at each type's speed, so the schedule differs too.

Every job accepts every type. Each policy runs on every cluster (on typed
ones type-blind: the engine's type rule places it), and its typed variant
(``ddl_gym.baselines.TYPED_PARENT``) on the typed ones; the ratio is to the
policy on the untyped cluster.

    python scripts/bench.py --typed [--jobs 10000] [--policies fifo,tiresias] [--repeat 3]
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from ddl_gym.bench import fixed_regime_cluster, fixed_regime_trace, run_measured
from ddl_gym.topology import Cluster, GpuKind


def typed_variant(cluster: Cluster, names: tuple[str, ...]) -> Cluster:
    """``cluster`` with its racks split in contiguous, near-equal blocks
    between the GPU types ``names``."""
    kinds = tuple(GpuKind(n) for n in names)
    per_rack = [r * len(names) // cluster.racks for r in range(cluster.racks)]
    server_kind = tuple(per_rack[s // cluster.servers_per_rack] for s in range(cluster.num_servers))
    return replace(cluster, gpu_kinds=kinds, server_kind=server_kind)


def clusters(n_jobs: int) -> dict[str, Cluster]:
    base = fixed_regime_cluster(n_jobs)
    return {
        "untyped": base,
        "typed-mixable": replace(typed_variant(base, ("V100-16GB", "V100-32GB")), mix_types=True),
        "typed-same-speed": typed_variant(base, ("V100-16GB", "V100-32GB")),
        "typed-k80-p100-v100": typed_variant(base, ("K80", "P100", "V100-16GB")),
    }


def main(argv: list[str] | None = None) -> None:
    from ddl_gym.baselines import TYPED_PARENT

    typed_of = {parent: typed for typed, parent in TYPED_PARENT.items()}
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--typed", action="store_true", help="(selects this benchmark)")
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--policies", default="fifo,tiresias,gandiva,dally")
    p.add_argument("--repeat", type=int, default=3, help="alternating rounds")
    args = p.parse_args(argv)
    trace = fixed_regime_trace(args.jobs)
    cases = clusters(args.jobs)
    print(f"{args.jobs} jobs on {cases['untyped'].num_gpus} GPUs; best CPU s of {args.repeat}")
    print("| policy | cluster | CPU s | x the policy untyped | mean JCT h |")
    print("|---|---|---:|---:|---:|")
    for policy in args.policies.split(","):
        # the policy on every cluster; its typed variant (if any) on the typed ones
        runs = [(policy, name) for name in cases]
        if policy in typed_of:
            runs += [(typed_of[policy], name) for name in cases if name != "untyped"]
        best: dict[tuple[str, str], float] = {}
        jct: dict[tuple[str, str], float] = {}
        for _ in range(args.repeat):  # alternate the runs within each round
            for run in runs:
                row = run_measured(trace, cases[run[1]], run[0])  # moderate congestion
                best[run] = min(best.get(run, float("inf")), row["cpu_s"])
                jct[run] = row["mean_jct_h"]
        base = best[(policy, "untyped")]
        for run in runs:
            print(
                f"| {run[0]} | {run[1]} | {best[run]:.2f} | {best[run] / base:.2f} | "
                f"{jct[run]:.2f} |"
            )


if __name__ == "__main__":
    main()
