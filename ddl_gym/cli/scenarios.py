"""``ddl-gym scenarios``: list the named scenarios, or show one as TOML."""

from __future__ import annotations

import argparse

from ddl_gym.cli.common import CliError, epilog, resolve_scenario, text_table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "scenarios",
        help="list the named scenarios (or show one as TOML)",
        description="The named scenarios: ready experiments (workload, cluster, fabric, "
        "congestion, engine settings). `show` prints one as a TOML file to start your own.",
        epilog=epilog(
            "ddl-gym scenarios",
            "ddl-gym scenarios show small > my.toml   # edit, then: ddl-gym simulate -s my.toml",
            "ddl-gym scenarios show my.toml           # validate a file",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    p.add_argument("scenario", nargs="?", help="scenario name or TOML file (for show)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from ddl_gym.scenarios import SCENARIOS, to_toml

    if args.action == "show":
        if not args.scenario:
            raise CliError("show needs a scenario name or file")
        ns = argparse.Namespace(
            scenario=args.scenario, config=None, trace=None, jobs=None, cluster=None, fabric=None
        )
        print(to_toml(resolve_scenario(ns, "scenarios").scenario.to_dict()), end="")
        return 0
    rows = [
        {
            "name": s.name,
            "workload": s.trace + (f" (first {s.jobs})" if s.jobs else ""),
            "cluster": s.cluster + (f"/{s.fabric}" if s.fabric else ""),
            "congestion": str(s.congestion),
            "description": s.description,
        }
        for s in SCENARIOS.values()
    ]
    print(text_table(pd.DataFrame(rows)))
    return 0
