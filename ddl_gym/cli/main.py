"""``ddl-gym``: the command line of the simulator, its schedulers and agents.

    ddl-gym scenarios                       # the named experiments
    ddl-gym simulate -s small -p fifo       # one policy, one workload, a run folder
    ddl-gym compare -s default --quick      # the policy x congestion x seed grid
    ddl-gym traces inspect seed-week        # statistics of a workload
    ddl-gym benchmark evaluate --policy P   # score a scheduler on the ddl-gym-v1 test split
    ddl-gym data fetch --suite ddl-gym-v1   # the trace files a suite reads, checked
    ddl-gym <command> --help                # options and examples of each command

User errors (unknown names, missing files, malformed TOML) print one line and
exit 2; Ctrl-C exits 130 after saving what finished. ``--debug`` shows the
traceback of any error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ddl_gym import __version__
from ddl_gym.cli import bench as cli_bench
from ddl_gym.cli import benchmark as cli_benchmark
from ddl_gym.cli import calibrate as cli_calibrate
from ddl_gym.cli import data as cli_data
from ddl_gym.cli import evaluate as cli_evaluate
from ddl_gym.cli import scenarios as cli_scenarios
from ddl_gym.cli import simulate as cli_simulate
from ddl_gym.cli import traces as cli_traces
from ddl_gym.cli import train as cli_train
from ddl_gym.cli.common import CliError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ddl-gym",
        description="Network-aware GPU-cluster scheduling: simulate, compare, train, inspect.",
        epilog=(__doc__ or "").split("\n\n")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    p.add_argument("--version", action="version", version=f"ddl-gym {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    cli_scenarios.register(sub)
    cli_simulate.register(sub)
    _register_compare(sub)
    cli_train.register(sub)
    cli_evaluate.register(sub)
    cli_calibrate.register(sub)
    cli_traces.register(sub)
    cli_bench.register(sub)
    cli_benchmark.register(sub)
    cli_benchmark.register_datasets(sub)
    cli_data.register(sub)
    return p


def _register_compare(sub: argparse._SubParsersAction) -> None:
    from ddl_gym.cli import compare as cli_compare

    cli_compare.register(sub)


def _user_errors() -> tuple[type[BaseException], ...]:
    from ddl_gym.scenarios import ScenarioError
    from ddl_gym.traces import TraceError

    # ValueError covers unknown presets (cluster, fabric, congestion) raised by
    # the library with a message that already names the bad value; OSError
    # (permission denied, not a directory, disk full) names the path
    return (CliError, ScenarioError, TraceError, ValueError, OSError)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except _user_errors() as err:
        if args.debug:
            raise
        print(f"ddl-gym {args.command}: error: {err}", file=sys.stderr)
        return 2


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
