"""Shared pieces of the ``ddl-gym`` sub-commands: errors, scenario options,
policies, tables, progress bars, the run folder."""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from ddl_gym.cli.names import (
    CLUSTERS,
    CONGESTIONS,
    FABRICS,
    LLM_CLUSTERS,
    SCENARIOS,
    TRACES,
    TYPED_CLUSTERS,
    listed,
)

if TYPE_CHECKING:  # imported where used: `ddl-gym --help` loads no pandas, numpy or gymnasium
    import pandas as pd

    from ddl_gym.scenarios import Scenario


class CliError(Exception):
    """A user error: printed as one line, exit status 2, no traceback."""


# -- scenarios -----------------------------------------------------------------
def add_scenario_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("scenario")
    g.add_argument(
        "-s",
        "--scenario",
        default=None,
        metavar="NAME|FILE",
        help=f"a named scenario ({listed(SCENARIOS)}; `ddl-gym scenarios` describes them) or "
        "a TOML file (default: default)",
    )
    g.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="a run folder's config.toml: repeats that run (scenario and run settings)",
    )
    g.add_argument("--trace", help=f"override the workload: {listed(TRACES)} or a trace file")
    g.add_argument("--jobs", type=int, help="keep only the first N jobs of the workload")
    g.add_argument(
        "--cluster",
        help=f"override the cluster: {listed(CLUSTERS)}, a typed one (GPU types: "
        f"{listed(TYPED_CLUSTERS)}), an LLM one ({listed(LLM_CLUSTERS)}) or RxSxG "
        "(racks x servers x GPUs)",
    )
    g.add_argument(
        "--fabric",
        help=f"override the fabric: {listed(FABRICS)}, a fitted preset (fitted_*) or a JSON file",
    )
    g.add_argument(
        "--congestion",
        help=f"override the congestion: {listed(CONGESTIONS)} or a background load fraction "
        "(e.g. 0.3)",
    )


def _congestion_value(text: str) -> str | float:
    try:
        return float(text)
    except ValueError:
        return text


@dataclass
class Chosen:
    """The scenario a command runs, and the ``[run]`` table of a config file."""

    scenario: Scenario
    run: dict[str, Any]


def resolve_scenario(args: argparse.Namespace, command: str) -> Chosen:
    from ddl_gym.scenarios import get_scenario

    if args.config is not None and args.scenario is not None:
        raise CliError("give --scenario or --config, not both")
    source = args.config if args.config is not None else (args.scenario or "default")
    if args.config is not None and not Path(args.config).is_file():
        raise CliError(f"{args.config}: no such config file")
    scenario, extra = get_scenario(source)
    run = dict(extra.get("run", {}))
    if run.get("command") not in (None, command):
        raise CliError(
            f"{source} was written by `ddl-gym {run['command']}`; run it with that command"
        )
    overrides: dict[str, Any] = {}
    for key in ("trace", "jobs", "cluster", "fabric"):
        value = getattr(args, key, None)
        if value is not None:
            overrides[key] = value
    if getattr(args, "congestion", None) is not None:
        overrides["congestion"] = _congestion_value(args.congestion)
    if overrides:
        scenario = scenario.replace(**overrides)
    return Chosen(scenario, run)


def seed_arg(text: str) -> int:
    """argparse type of ``--seed``: an integer >= 0 (numpy's generators need it)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {value}")
    return value


def run_seed(cli_value: int | None, chosen: Chosen, default: int = 0) -> int:
    """The seed of a run: ``--seed``, else the config file's ``[run] seed``, checked."""
    if cli_value is not None:
        return cli_value
    value = chosen.run.get("seed", default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CliError(f"[run] 'seed' must be an integer >= 0, got {value!r}")
    return value


def pick(cli_value: Any, run: dict[str, Any], key: str, default: Any) -> Any:
    """A run setting: the command line, else the config file's ``[run]``, else default."""
    if cli_value is not None:
        return cli_value
    return run.get(key, default)


@overload
def split_list(text: str) -> list[str]: ...
@overload
def split_list(text: str | None) -> list[str] | None: ...
def split_list(text: str | None) -> list[str] | None:
    """Comma-separated items of ``text``, stripped (None: None)."""
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise CliError(f"empty list {text!r}")
    return items


def parse_seeds(text: str) -> list[int]:
    """``"0,1,2"``, ``"0-2"`` or a mix (``"0-2,7"``); a seed given twice is
    refused (it would run, and count, twice)."""
    seeds: list[int] = []
    for item in split_list(text):
        lo, dash, hi = item.partition("-")
        try:
            if dash and lo:
                a, b = int(lo), int(hi)
                if b < a:
                    raise ValueError
                seeds.extend(range(a, b + 1))
            else:
                seeds.append(int(item))
        except ValueError:
            raise CliError(f"--seeds must be integers or ranges like 0-2, got {text!r}") from None
    if len(set(seeds)) != len(seeds):
        raise CliError(f"--seeds: a seed is repeated in {text!r}")
    return seeds


# -- policies ------------------------------------------------------------------
def policy_names() -> list[str]:
    try:
        from ddl_gym.baselines import POLICY_NAMES
    except ImportError:
        return ["fifo"]
    return list(POLICY_NAMES)


def make_policy(name: str, scenario: Scenario | None = None) -> Any:
    """A policy by name; with ``scenario``, the one its simulator runs (the
    seed's own in seed mode)."""
    if scenario is not None:
        try:
            return scenario.make_policy(name)
        except (KeyError, ValueError) as err:
            raise CliError(err.args[0] if err.args else str(err)) from None
    try:
        from ddl_gym.baselines import make_policy as registry
    except ImportError:
        registry = None
    if registry is None:
        if name != "fifo":
            raise CliError(f"unknown policy {name!r}; known policies: fifo")
        from ddl_gym.baselines.fifo import FifoPolicy

        return FifoPolicy()
    try:
        return registry(name)
    except (KeyError, ValueError) as err:
        msg = err.args[0] if err.args else str(err)
        raise CliError(f"{msg} (known policies: {', '.join(policy_names())})") from None


# -- output --------------------------------------------------------------------
HEADLINE = (
    ("makespan_s", "makespan_h", 1 / 3600),
    ("mean_jct_s", "mean_jct_h", 1 / 3600),
    ("p95_jct_s", "p95_jct_h", 1 / 3600),
    ("mean_queueing_s", "mean_queue_h", 1 / 3600),
    ("comm_overhead", "comm_overhead (comm/compute)", 1.0),
    ("gpu_utilization", "gpu_util (fraction)", 1.0),
    ("preemptions", "preemptions", 1.0),
)


def headline(summary: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """The columns people read first, times in hours."""
    out = summary[[k for k in keys if k in summary.columns]].copy()
    for src, dst, scale in HEADLINE:
        if src in summary.columns:
            out[dst] = summary[src].astype(float) * scale
    return out


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        # 4 significant digits, but never scientific notation (10,000.8 h
        # would print as 1e+04): from 1,000 up, whole numbers with commas
        return f"{v:,.0f}" if abs(v) >= 1e3 else f"{v:.4g}"
    return str(v)


def text_table(df: pd.DataFrame) -> str:
    """A plain aligned table (numbers right, text left)."""
    import pandas as pd

    cols = list(df.columns)
    cells = [[_fmt(v) for v in row] for row in df.itertuples(index=False)]
    widths = [max([len(str(c))] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
    numeric = [pd.api.types.is_numeric_dtype(df[c]) for c in cols]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line([str(c) for c in cols]), rule] + [line(r) for r in cells])


def add_output_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("output")
    g.add_argument(
        "--out", type=Path, default=Path("runs"), help="root of run folders (default: runs)"
    )
    g.add_argument("--name", help="run folder name (default: <timestamp>-<command>-<scenario>)")
    g.add_argument("--no-save", action="store_true", help="print only; write no run folder")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")


@contextmanager
def progress(total: int | None, desc: str, disable: bool, unit: str = "it") -> Iterator[Any]:
    """The one progress bar of long jobs (``ddl_gym.experiments.runner.progress_bar``)."""
    from ddl_gym.experiments.runner import progress_bar

    bar = progress_bar(total, desc, disable, unit=unit)
    try:
        yield bar
    finally:
        bar.close()


def epilog(*examples: str) -> str:
    return "examples:\n" + "\n".join(f"  {e}" for e in examples)
