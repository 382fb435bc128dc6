"""``ddl-gym simulate``: one policy on one scenario, with a full run folder."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ddl_gym.cli import names
from ddl_gym.cli.common import (
    add_output_args,
    add_scenario_args,
    epilog,
    headline,
    make_policy,
    pick,
    progress,
    resolve_scenario,
    run_seed,
    seed_arg,
    text_table,
)
from ddl_gym.cli.own_model import AGENT, apply_agent_env, overlap_warnings

if TYPE_CHECKING:  # imported where used: the parser (ddl-gym --help) stays light
    import pandas as pd

KEYS = ("policy", "workload", "congestion", "seed")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate",
        help="run one policy on one workload",
        description="Simulate one policy on one scenario's workload; print its summary and "
        "write a run folder (per-job table, series, placements, plots, report.md).",
        epilog=epilog(
            "ddl-gym simulate                                  # fifo on the default scenario",
            "ddl-gym simulate -s small --policy fifo --name demo",
            "ddl-gym simulate -s seed-week-heavy --congestion none",
            "ddl-gym simulate -s my_scenario.toml --seed 3",
            "ddl-gym simulate --config runs/demo/config.toml  # repeat a run exactly",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scenario_args(p)
    p.add_argument(
        "-p",
        "--policy",
        help=f"a policy: {names.listed(names.POLICIES)}, '{AGENT}' (the shipped model) or "
        f"'{AGENT}:PATH' (your model, see `ddl-gym compare --help`) (default: fifo)",
    )
    p.add_argument(
        "--agent-env",
        metavar="FILE|JSON",
        help="for -p agent:PATH, a bare SB3 zip: the env it was trained on (as compare's)",
    )
    p.add_argument("--seed", type=seed_arg, help="workload and policy seed (default: 0)")
    p.add_argument(
        "--no-placements", action="store_true", help="do not record the placement timeline"
    )
    add_output_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from ddl_gym.experiments.cells import run_simulation
    from ddl_gym.report.run_folder import RunData, finish_run, new_run_dir, write_config

    chosen = resolve_scenario(args, "simulate")
    scenario = chosen.scenario
    policy_name = pick(args.policy, chosen.run, "policy", "fifo")
    seed = run_seed(args.seed, chosen)
    apply_agent_env(args.agent_env, [policy_name])
    policy = make_policy(policy_name, scenario)
    if policy_name == AGENT or policy_name.startswith(AGENT + ":"):
        label = f"{scenario.name} (seed {seed})"
        for line in overlap_warnings([policy_name], [(label, scenario.build_trace(seed))]):
            print(f"warning: {line}", file=sys.stderr, flush=True)
    n_jobs = len(scenario.build_trace(seed)) if not args.no_progress else None
    with progress(n_jobs, f"simulate {policy_name}", args.no_progress, unit="job") as bar:
        sim = run_simulation(
            scenario,
            policy,
            seed=seed,
            record_placements=not args.no_placements,
            progress=bar.update,
        )
    keys = {
        "policy": policy_name,
        "workload": sim.trace_name,
        "congestion": str(scenario.congestion),
        "seed": seed,
    }
    summary = pd.DataFrame([{**keys, **sim.result.summary}])
    table = headline(summary, KEYS)
    print(
        f"{policy_name} on {scenario.name}: {sim.trace_name} ({sim.jobs_in_trace} jobs), "
        f"{sim.cluster.describe()}, congestion {scenario.congestion}"
    )
    print(text_table(table))
    if args.no_save:
        return 0
    folder = new_run_dir(args.out, args.name, f"simulate-{scenario.name}")
    # the scenario's grid settings (congestions, seeds) are compare's: left
    # out, so the file says one level and one seed
    grid_only = ("congestions", "seeds", "policies")
    config = {
        **{k: v for k, v in scenario.to_dict().items() if k not in grid_only},
        "run": {"command": "simulate", "policy": policy_name, "seed": seed},
    }
    write_config(folder, config)
    run_data = RunData(
        summary=summary,
        jobs=_tag(sim.result.jobs, keys),
        series=_tag(sim.result.series, keys),
        placements=sim.placements,
        num_gpus=sim.cluster.num_gpus,
        gpus_per_server=sim.cluster.gpus_per_server,
    )
    report = finish_run(
        folder, f"simulate: {policy_name} on {scenario.name}", config, run_data, table
    )
    print(f"wrote {folder}/ (report: {report})")
    return 0


def _tag(df: pd.DataFrame, keys: dict) -> pd.DataFrame:
    """Prefix the cell's key columns so tables of several runs concatenate."""
    out = df.copy()
    for i, (k, v) in enumerate(keys.items()):
        out.insert(i, k, v)
    return out
