"""``ddl-gym train``: a MaskablePPO agent on a scenario's cluster, fabric,
congestion and engine settings, its workload the training trace
(``ddl_gym.agents.train.train``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ddl_gym.cli.common import CliError, add_scenario_args, epilog, resolve_scenario, seed_arg
from ddl_gym.cli.workload import agent_trace_specs

# scenario fields that become the env's settings when the scenario sets them
ENV_FIELDS = ("fabric", "lease_s", "tick_s", "restore_s_per_gpu")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a MaskablePPO agent (ddl_gym.agents.train)",
        description="Train an agent on the scenario's cluster, fabric, congestion and engine "
        "settings (its workload is the training trace). The rest of the training settings "
        "come from --train-config (a TrainConfig TOML or JSON; defaults otherwise).",
        epilog=epilog(
            "ddl-gym train -s default --out runs/agent --timesteps 20000",
            "ddl-gym train -s seed-week-heavy --out runs/agent --vec-env dummy",
            "ddl-gym train -s small --out runs/small --timesteps 2000   # a smoke run",
            "ddl-gym train -s default --train-config my.toml --out runs/a  # a TrainConfig TOML",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scenario_args(p)
    p.add_argument("--out", type=Path, required=True, help="run directory")
    p.add_argument("--seed", type=seed_arg, help="override seed")
    p.add_argument("--train-config", type=Path, help="a TrainConfig TOML or JSON to start from")
    # the options of ddl_gym.agents.train's own command line (add_train_options),
    # written out here: --help imports no torch
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    p.add_argument("--timesteps", type=int, help="override total_timesteps")
    p.add_argument("--algo", choices=["maskable_ppo", "ppo"], help="override ppo.algo")
    p.add_argument(
        "--teacher", help="override bc.teacher (behaviour-cloning warm start; 'none': off)"
    )
    p.add_argument("--vec-env", choices=["subproc", "dummy"], help="override vec_env")
    p.add_argument(
        "--ship",
        metavar="NAME",
        help="copy the best model into the installed package (ddl_gym/agents/models/NAME.zip)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import tomllib

    from ddl_gym.agents.config import TrainConfig

    scenario = resolve_scenario(args, "train").scenario
    if scenario.stragglers:
        raise CliError(
            f"scenario {scenario.name!r}: [stragglers] is not supported by train yet "
            "(the env builds its cluster by name); remove it or use compare/simulate"
        )
    cfg = TrainConfig()
    if args.train_config is not None:
        if not args.train_config.is_file():
            raise CliError(f"{args.train_config}: no such file")
        try:
            cfg = TrainConfig.load(args.train_config)
        except tomllib.TOMLDecodeError as err:
            raise CliError(f"{args.train_config}: not valid TOML: {err}") from None
    cfg.env.cluster = scenario.cluster
    cfg.env.congestion = scenario.congestion
    for key in ENV_FIELDS:
        if getattr(scenario, key) is not None:
            setattr(cfg.env, key, getattr(scenario, key))
    cfg.split.traces = agent_trace_specs(scenario, args.out)

    from ddl_gym.agents.train import train_and_ship  # torch: only when training

    train_and_ship(cfg, args)
    return 0
