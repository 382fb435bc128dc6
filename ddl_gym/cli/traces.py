"""``ddl-gym traces``: list, inspect and convert workloads.

A workload is named like a scenario's ``trace`` (``default``,
``seed-week``, ``philly-week``), given as a file in any supported family,
or taken from a scenario (``--scenario``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ddl_gym.cli import names
from ddl_gym.cli.common import CliError, add_scenario_args, epilog, resolve_scenario, text_table

if TYPE_CHECKING:  # imported where used: the parser (ddl-gym --help) stays light
    from ddl_gym.traces import Trace


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "traces",
        help="list, inspect and convert workloads",
        description="Workloads: what is available, their statistics, conversion to the "
        "normalised schema (CSV or Parquet).",
        epilog=epilog(
            "ddl-gym traces list",
            "ddl-gym traces inspect seed-week",
            "ddl-gym traces inspect ../shared/data/traces/pollux_workloads/workload-1.csv",
            "ddl-gym traces inspect -s small",
            "ddl-gym traces convert philly-week philly.parquet",
            "ddl-gym traces convert -s default default.csv",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tsub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    ls = tsub.add_parser("list", help="named workloads and every trace file in the data dir")
    ls.add_argument("--data", type=Path, help="data dir (default: ../shared/data or $DDL_GYM_DATA)")
    ls.set_defaults(func=run_list)
    for name, func, text in (
        ("inspect", run_inspect, "summary statistics of a workload"),
        ("convert", run_convert, "write a workload in the normalised schema (.csv or .parquet)"),
    ):
        sp = tsub.add_parser(
            name,
            help=text,
            description=text,
            epilog=p.epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sp.add_argument(
            "workload",
            nargs="?",
            help="a named workload (default, seed-week, philly-week, or one of compare's: "
            f"{names.listed(names.WORKLOADS)}), a trace file (or give --scenario)",
        )
        if name == "convert":
            sp.add_argument("output", type=Path, help="output file: .csv or .parquet")
        sp.add_argument("--family", help="trace family (default: detected from the file)")
        sp.add_argument("--seed", type=int, default=0, help="seed of model assignment / synthesis")
        add_scenario_args(sp)
        sp.set_defaults(func=func)


def run_list(args: argparse.Namespace) -> int:
    import pandas as pd

    from ddl_gym.scenarios import DATA_TRACES
    from ddl_gym.traces import detect_family, discover_traces, find_data_dir

    rows: list[dict[str, str | None]] = [
        {"name": "default", "family": "synthetic", "where": "bundled (no data needed)"},
        {"name": "synthetic", "family": "synthetic", "where": "generated from a [synthetic] table"},
    ]
    data = args.data or find_data_dir()
    for name, rel in DATA_TRACES.items():
        path = None if data is None else data / rel
        if path is not None and path.is_file():
            family, where = detect_family(path), rel
        else:
            family, where = "-", f"{rel} (missing)"
        rows.append({"name": name, "family": family, "where": where})
    print(text_table(pd.DataFrame(rows)))
    if data is None:
        print("\nno data dir found (../shared/data or $DDL_GYM_DATA): only bundled workloads")
        return 0
    if not Path(data).is_dir():
        raise CliError(f"data dir {data} not found")
    found = discover_traces(data)
    files = pd.DataFrame(
        [{"file": str(p.relative_to(data)), "family": detect_family(p)} for p in found.values()]
    )
    print(f"\ntrace files under {data}:")
    print(text_table(files) if len(files) else "(none)")
    return 0


def _workload(args: argparse.Namespace) -> Trace:
    import pandas as pd

    from ddl_gym.scenarios import BUILTIN_TRACES, SCENARIOS, Scenario
    from ddl_gym.traces import Trace, detect_family, find_data_dir

    named = [n for n in BUILTIN_TRACES if n != "synthetic"]
    if args.workload and (args.scenario or args.config):
        raise CliError("give a workload or --scenario/--config, not both")
    if args.workload is None:
        if args.scenario is None and args.config is None:
            raise CliError("give a workload (name or file) or --scenario")
        return resolve_scenario(args, "traces").scenario.build_trace(args.seed)
    name = args.workload
    if name in SCENARIOS and name not in BUILTIN_TRACES:
        return SCENARIOS[name].build_trace(args.seed)
    if name in BUILTIN_TRACES and name != "synthetic":
        return Scenario(name=name, trace=name).build_trace(args.seed)
    from ddl_gym.experiments.grid import WORKLOADS, load_workload

    if name in WORKLOADS:  # the names `ddl-gym compare --workloads` takes
        data = find_data_dir()
        if WORKLOADS[name].path is not None and data is None:
            raise CliError(f"{name} needs the data dir (../shared/data or $DDL_GYM_DATA)")
        return load_workload(name, args.seed, str(data) if data else None, None)[0]
    path = Path(name)
    if not path.is_file():
        raise CliError(
            f"{name}: neither a named workload ({', '.join(named)}, or one of compare's: "
            f"{', '.join(n for n in WORKLOADS if n not in named)}), a scenario nor an "
            "existing trace file"
        )
    if path.suffix.lower() == ".parquet":
        # our own Parquet output reads back through the schema's validation
        from ddl_gym.traces import validate

        jobs = validate(pd.read_parquet(path), str(path))
        return Trace(name=path.stem, jobs=jobs, source=str(path))
    if args.family is None and detect_family(path) is None:
        raise CliError(f"{path}: not a recognised trace file (give --family)")
    from ddl_gym.traces import load_trace

    return load_trace(path, family=args.family, seed=args.seed)


def trace_stats(trace: Trace) -> list[tuple[str, str]]:
    import numpy as np

    """Headline statistics of a workload, as (label, value) rows."""
    j = trace.jobs
    n = len(j)
    span = float(j["arrival_s"].max() - j["arrival_s"].min()) if n else 0.0
    ideal = j["iterations"] * j["iter_time_s"] / j["gpus"]  # run time on its GPUs, no comm
    gpu_h = float((j["iterations"] * j["iter_time_s"]).sum()) / 3600.0
    q = np.percentile(ideal, [50, 90, 99]) if n else [np.nan] * 3
    rate = (n - 1) / span * 3600.0 if span > 0 else float("nan")

    def mix(col: str) -> str:
        share = j[col].value_counts(normalize=True)
        return ", ".join(f"{k}: {v:.1%}" for k, v in share.head(8).items())

    return [
        ("name", trace.name),
        ("source", str(trace.source or "generated")),
        ("jobs", f"{n:,}"),
        ("span", f"{span / 3600:.2f} h ({span / 86400:.2f} d)"),
        ("arrival rate", f"{rate:.2f} jobs/h"),
        ("GPUs per job (mix)", mix("gpus")),
        ("max GPUs per job", str(int(j["gpus"].max()) if n else 0)),
        ("models (mix)", mix("model")),
        ("ideal duration p50 / p90 / p99", " / ".join(f"{v / 3600:.3g} h" for v in q)),
        ("total GPU-hours (ideal)", f"{gpu_h:,.1f}"),
        ("dropped rows", ", ".join(f"{k}: {v}" for k, v in trace.dropped.items()) or "none"),
    ]


def run_inspect(args: argparse.Namespace) -> int:
    trace = _workload(args)
    rows = trace_stats(trace)
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0


def run_convert(args: argparse.Namespace) -> int:
    from ddl_gym.report.run_folder import parquet_available
    from ddl_gym.traces import SCHEMA_COLUMNS

    trace = _workload(args)
    out: Path = args.output
    suffix = out.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise CliError(f"{out}: output must end in .csv or .parquet")
    out.parent.mkdir(parents=True, exist_ok=True)
    jobs = trace.jobs
    assert list(jobs.columns[: len(SCHEMA_COLUMNS)]) == list(SCHEMA_COLUMNS)
    if suffix == ".csv":
        from ddl_gym.traces import save_trace

        save_trace(trace, out)
    else:
        if not parquet_available():
            raise CliError("Parquet needs pyarrow: pip install 'ddl-gym[parquet]'")
        jobs.to_parquet(out, index=False)
    print(f"wrote {len(jobs):,} jobs of {trace.name} to {out} (columns: {', '.join(jobs.columns)})")
    return 0
