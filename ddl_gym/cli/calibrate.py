"""``ddl-gym calibrate``: the network model's fidelity report
(``ddl_gym.fidelity.report.run``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ddl_gym.cli.common import (
    CliError,
    add_scenario_args,
    epilog,
    resolve_scenario,
    seed_arg,
    split_list,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate",
        help="fidelity of the network model against measurements (scripts/calibrate.py)",
        description="Fit fabric presets to the measured placement tables and write the fidelity "
        "report. The scenario's fabric (if it is a built-in preset) is the base of the fits.",
        epilog=epilog(
            "ddl-gym calibrate --no-save --out /tmp/cal",
            "ddl-gym calibrate -s small --loss soft_l1 --no-save --out /tmp/cal",
            "ddl-gym calibrate --clusters gavel_k80,chronus --no-save --out /tmp/cal",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scenario_args(p)
    p.add_argument("--data", type=Path, help="data dir (default: ../shared/data)")
    p.add_argument(
        "--out", type=Path, default=Path("docs"), help="where calibration.md/.png go (docs/)"
    )
    p.add_argument(
        "--loss", choices=["linear", "soft_l1", "cauchy"], help="least-squares loss (soft_l1)"
    )
    p.add_argument("--seed", type=seed_arg, default=0)
    p.add_argument(
        "--draws",
        type=int,
        default=None,
        help="seeded draws of the calibration rows the leave-one-cluster-out figure at k > 0 "
        "is the median of (default 9)",
    )
    p.add_argument("--no-save", action="store_true", help="do not save fitted presets")
    p.add_argument("--clusters", help="measured clusters to use, comma-separated (default: all)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (tqdm, with ETA)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ddl_gym.fidelity import report
    from ddl_gym.fidelity.calibrate import CALIBRATION_DRAWS
    from ddl_gym.topology import FABRICS

    base = report.DEFAULT_BASE  # the base of the fits without a scenario
    if args.scenario or args.config:
        fabric = resolve_scenario(args, "calibrate").scenario.build_cluster().fabric.name
        if fabric in FABRICS:
            base = fabric
    data = args.data if args.data is not None else report.default_data_dir()
    if not data.is_dir():
        where = str(args.data) if args.data is not None else "../shared/data or $DDL_GYM_DATA"
        raise CliError(f"no data dir found ({where}); give --data")
    draws = CALIBRATION_DRAWS if args.draws is None else args.draws
    if draws < 1:
        raise CliError(f"--draws must be at least 1, got {draws}")
    text = report.run(
        data,
        args.out,
        not args.no_save,
        base,
        args.loss or report.DEFAULT_LOSS,
        args.seed,
        split_list(args.clusters) if args.clusters else None,
        progress=not args.no_progress,
        draws=draws,
    )
    print(report.summary(text, args.out))
    return 0
