"""``ddl-gym calibrate``: fit your own measured table (``--table``,
``ddl_gym.fidelity.own_table``), save the prior for a hardware description
alone (``--hardware`` without ``--table``), or write the network model's
fidelity report on the bundled tables (``ddl_gym.fidelity.report.run``).
Outputs go to the user data dir (``ddl_gym.userdata``) or ``--out``, never
into the package; a refused table or name writes nothing, and an existing
preset is replaced only with ``--force``."""

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
        help="fit the network model to your measured table (--table), or its fidelity report",
        description="With --table: fit a fabric to your own measured placement table (CSV: "
        "model, local_bsz, placement as GPUs per server e.g. 8+8, t_iter; optional repeat, "
        "hardware; see docs/calibration.md), cross-validate it, report the error per level "
        "and save it as a preset in the user data dir, usable as fabric=NAME. With "
        "--hardware alone: save the prior preset for that hardware description. Without "
        "either: fit presets to the bundled measured tables and write the fidelity report.",
        epilog=epilog(
            "ddl-gym calibrate --table my_cluster.csv --name my_cluster",
            "ddl-gym calibrate --table my_cluster.csv --name my_cluster --force   # replace it",
            'ddl-gym calibrate --hardware "8x A100 SXM4, NVSwitch, 8x HDR InfiniBand" --name dgx',
            "ddl-gym calibrate --table dgx.csv --base a100_nvlink_ib --no-save --out /tmp/cal",
            "ddl-gym calibrate --no-save --out /tmp/cal",
            "ddl-gym calibrate --clusters gavel_k80,chronus --no-save --out /tmp/cal",
            "ddl-gym calibrate --docs   # regenerate docs/calibration.md (source checkout)",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    t = p.add_argument_group("your own table")
    t.add_argument("--table", type=Path, help="your measured table (CSV, documented format)")
    t.add_argument(
        "--name",
        help="name of the saved preset (default: the table's file name, no suffix; with "
        "--hardware alone, prior_ and the description's words)",
    )
    t.add_argument(
        "--base",
        help="preset whose unfitted fields the fit keeps and that the report compares "
        "(default: the datasheet preset nearest the table's hardware column)",
    )
    t.add_argument(
        "--hardware",
        help="hardware description, e.g. '8x A100 SXM4, NVSwitch, 8x HDR InfiniBand': with "
        "--table it replaces the table's column; alone, the prior preset for it is saved",
    )
    t.add_argument(
        "--force", action="store_true", help="replace an existing user preset of the same name"
    )
    add_scenario_args(p)
    p.add_argument("--data", type=Path, help="data dir (default: ../shared/data)")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where the report (and, bundled tables, the fitted presets) go "
        "(default: the user data dir's calibration/)",
    )
    p.add_argument(
        "--docs",
        action="store_true",
        help="bundled tables: regenerate the repository's docs/calibration.md (saves no presets)",
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


def run_table(args: argparse.Namespace) -> int:
    from ddl_gym import userdata
    from ddl_gym.fidelity.own_table import DEFAULT_LOSS, calibrate_table

    if args.docs or args.clusters or args.scenario or args.config:
        raise CliError("--table fits your table alone: no --docs, --clusters or scenario")
    if args.force and args.no_save:
        raise CliError("--force replaces a saved preset: not with --no-save")
    out = args.out if args.out is not None else userdata.data_home() / "calibration"
    try:
        rep = calibrate_table(
            args.table,
            name=args.name,
            base=args.base,
            save=not args.no_save,
            hardware=args.hardware,
            loss=args.loss or DEFAULT_LOSS,
            seed=args.seed,
            force=args.force,
            report_dir=out,
        )
    except ValueError as err:  # MeasuredTableError, PresetExists, unknown --base, bad name
        raise CliError(str(err)) from None
    print(rep.markdown.split("## What the form")[0].rstrip())
    print(
        f"\n{len(rep.below_one)} rows below 1 and {len(rep.non_monotone)} non-monotone rows "
        "the form cannot express: listed in the report"
    )
    print(f"report: {rep.report}")
    if rep.saved is None:
        print("preset not saved (--no-save)")
    else:
        print(f'preset saved: {rep.saved} (use it as fabric="{rep.name}" or --fabric {rep.name})')
    return 0


def run_hardware(args: argparse.Namespace) -> int:
    """``--hardware`` without ``--table``: the prior's preset for the description."""
    from ddl_gym.fidelity.own_table import fabric_line, hardware_preset

    if args.docs or args.clusters or args.scenario or args.config or args.out:
        raise CliError(
            "--hardware without --table saves a preset only: no --docs, --clusters, --out "
            "or scenario"
        )
    if args.base:
        raise CliError("--base goes with --table (without it, --hardware picks the preset)")
    if args.force and args.no_save:
        raise CliError("--force replaces a saved preset: not with --no-save")
    try:
        pre = hardware_preset(args.hardware, args.name, save=not args.no_save, force=args.force)
    except ValueError as err:  # hardware.UnreadableHardware, PresetExists, bad name
        raise CliError(str(err)) from None
    hw = pre.hardware
    intra = hw.intra or "not stated"
    if hw.intra and not hw.intra_stated:
        intra += " (the GPU's usual)"
    network = f"{hw.ports} x {hw.network}" if hw.network else "not stated"
    print(
        f"hardware read as: GPU {hw.gpu or 'not stated'}; intra-server {intra}; network {network}"
    )
    print(f"prior preset: {fabric_line(pre.fabric)}")
    print(f"  ({pre.fabric.description})")
    if pre.saved is None:
        print("preset not saved (--no-save)")
    else:
        print(f'preset saved: {pre.saved} (use it as fabric="{pre.name}" or --fabric {pre.name})')
    return 0


def run(args: argparse.Namespace) -> int:
    if args.table is not None:
        return run_table(args)
    if args.hardware is not None:
        return run_hardware(args)
    if args.name or args.base or args.force:
        raise CliError("--name, --base and --force go with --table or --hardware")
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
    try:
        out = report.output_dir(args)
    except ValueError as err:
        raise CliError(str(err)) from None
    text = report.run(
        data,
        out,
        not args.no_save,
        base,
        args.loss or report.DEFAULT_LOSS,
        args.seed,
        split_list(args.clusters) if args.clusters else None,
        progress=not args.no_progress,
        draws=draws,
    )
    print(report.summary(text, out))
    return 0
