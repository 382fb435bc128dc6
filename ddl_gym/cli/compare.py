"""``ddl-gym compare``: the policy x congestion x seed grid on a scenario's
workload, locally or as Ray tasks.

Each cell is a pure function of plain data (``grid_cells``), so the local
and the Ray backend give identical tables. Every finished cell is written to
``<run>/cells/`` at once; on Ctrl-C the run folder gets the table, plots and
report of what finished and the command exits 130.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ddl_gym.cli.common import (
    CliError,
    add_output_args,
    add_scenario_args,
    epilog,
    headline,
    pick,
    policy_names,
    progress,
    resolve_scenario,
    split_list,
    text_table,
)
from ddl_gym.report.run_folder import RunData, finish_run, new_run_dir, write_config
from ddl_gym.scenarios import Scenario
from ddl_gym.traces import find_data_dir

KEYS = ("policy", "workload", "congestion", "seed")
QUICK_POLICIES = ("fifo", "consolidation", "dally")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="the policy x congestion x seed grid on one workload",
        description="Run every policy under every congestion level and seed on the scenario's "
        "workload; print the summary table and write a run folder (cells as they finish, "
        "summary, per-job table, plots, report.md). Ctrl-C keeps what finished.",
        epilog=epilog(
            "ddl-gym compare -s small                     # the scenario's policies/levels/seeds",
            "ddl-gym compare -s default --quick           # 3 policies, 1 seed",
            "ddl-gym compare -s seed-week-heavy --policies fifo,dally --congestions none,heavy",
            "ddl-gym compare -s default --seeds 0,1,2 --backend ray",
            "ddl-gym compare -s default --backend ray --address ray://head:10001",
            "ddl-gym compare --config runs/x/config.toml  # repeat a comparison",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scenario_args(p)
    p.add_argument("--policies", help="comma-separated policy names (default: scenario's, or all)")
    p.add_argument("--congestions", help="comma-separated congestion levels")
    p.add_argument("--seeds", help="comma-separated seeds")
    p.add_argument("--quick", action="store_true", help=f"{', '.join(QUICK_POLICIES)}; seed 0")
    p.add_argument("--backend", choices=["local", "ray"], help="where cells run (default: local)")
    p.add_argument("--address", help="Ray cluster address (default: start a local Ray)")
    p.add_argument("--num-cpus", type=int, help="CPUs of the local Ray (default: all)")
    add_output_args(p)
    p.set_defaults(func=run)


# -- the grid -------------------------------------------------------------------
@dataclass(frozen=True)
class Grid:
    scenario: Scenario
    policies: tuple[str, ...]
    congestions: tuple[str | float, ...]
    seeds: tuple[int, ...]

    def plan(self) -> tuple[Callable[..., dict[str, Any]], list[dict[str, Any]]]:
        """The cell function and its cells (keyword arguments), in order.

        Scenarios that are one of scripts/compare.py's workloads on its
        cluster, with no engine overrides, run its ``run_cell`` (so the CLI
        and the comparison script give the same numbers); any other scenario
        (own cluster, fabric, engine settings, synthetic or file workload)
        runs ``cli_record.compare_cell``, which simulates the same way.
        """
        order = [(c, p, s) for c in self.congestions for p in self.policies for s in self.seeds]
        workload = compare_workload(self.scenario)
        if workload is not None:
            from ddl_gym.experiments import grid as compare

            data = find_data_dir()
            extra = {"data_dir": str(data) if data else None, "max_jobs": self.scenario.jobs}
            cells = [
                {"policy": p, "workload": workload, "congestion": c, "seed": s, **extra}
                for c, p, s in order
            ]
            return compare.run_cell, cells
        from ddl_gym.experiments.cells import compare_cell

        data = self.scenario.to_dict()
        cells = [{"scenario": data, "policy": p, "congestion": c, "seed": s} for c, p, s in order]
        return compare_cell, cells

    def cells(self) -> list[dict[str, Any]]:
        return self.plan()[1]


# scenario workload -> scripts/compare.py workload of the same trace
COMPARE_WORKLOADS = {
    "default": "default",
    "seed-week": "seed-1proc-week",
    "philly-week": "philly-week",
}


def compare_workload(scenario: Scenario) -> str | None:
    """scripts/compare.py's name for the scenario's setting, if it has one."""
    try:
        from ddl_gym.experiments import grid as compare
    except ImportError:
        return None
    overrides = (scenario.fabric, scenario.lease_s, scenario.tick_s)
    if any(v is not None for v in overrides) or scenario.restore_s_per_gpu is not None:
        return None
    if scenario.clairvoyant is not None:
        return None
    name = COMPARE_WORKLOADS.get(scenario.trace)
    workload = compare.WORKLOADS.get(name) if name else None
    if workload is None or workload.cluster != scenario.cluster:
        return None
    return name


def _as_congestion(text: str) -> str | float:
    try:
        return float(text)
    except ValueError:
        return text


def choose_grid(args: argparse.Namespace, scenario: Scenario, run: dict) -> Grid:
    known = policy_names()
    policies = split_list(args.policies) or run.get("policies") or list(scenario.policies)
    if not policies:
        policies = [p for p in QUICK_POLICIES if p in known] if args.quick else known
    unknown = [p for p in policies if p not in known]
    if unknown:
        raise CliError(f"unknown policies {unknown}; known: {', '.join(known)}")
    levels = split_list(args.congestions)
    congestions = (
        [_as_congestion(c) for c in levels]
        if levels
        else run.get("congestions") or list(scenario.grid_congestions)
    )
    seeds_text = split_list(args.seeds)
    try:
        seeds = (
            [int(s) for s in seeds_text] if seeds_text else run.get("seeds") or list(scenario.seeds)
        )
    except ValueError:
        raise CliError(f"--seeds must be integers, got {args.seeds!r}") from None
    if args.quick and not seeds_text:
        seeds = seeds[:1]
    # validate the levels now, not in the middle of the grid
    scenario.replace(congestions=tuple(congestions), seeds=tuple(seeds))
    return Grid(scenario, tuple(policies), tuple(congestions), tuple(seeds))


# -- running ----------------------------------------------------------------------
def _cell_file(folder: Path, i: int, cell: dict[str, Any]) -> Path:
    return folder / "cells" / f"{i:04d}-{cell['policy']}-{cell['congestion']}-{cell['seed']}.json"


def _clean(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold a Ctrl-C until the block is done, then raise it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def run_grid(
    grid: Grid,
    backend: str,
    *,
    address: str | None,
    num_cpus: int | None,
    folder: Path | None,
    show_progress: bool,
) -> tuple[dict[int, dict[str, Any]], bool]:
    """Run every cell; returns the finished ones by index and whether all did."""
    fn, cells = grid.plan()
    done: dict[int, dict[str, Any]] = {}
    if folder is not None:
        (folder / "cells").mkdir(exist_ok=True)
    with progress(len(cells), f"compare ({backend})", not show_progress, unit="cell") as bar:

        def finished(i: int, result: dict[str, Any]) -> None:
            # a Ctrl-C here would leave a cell on disk but not in the table
            with deferred_interrupt():
                if folder is not None:
                    row = {
                        k: _clean(v) for k, v in result.items() if k not in ("job_table", "jct_s")
                    }
                    _cell_file(folder, i, cells[i]).write_text(json.dumps(row, indent=1))
                done[i] = result
                bar.update()

        try:
            if backend == "ray":
                from ddl_gym.experiments.ray_backend import RayUnavailable, run_cells

                try:
                    run_cells(fn, cells, address=address, num_cpus=num_cpus, on_result=finished)
                except RayUnavailable as err:
                    raise CliError(str(err)) from None
            else:
                for i, cell in enumerate(cells):
                    finished(i, fn(**cell))
        except KeyboardInterrupt:
            return done, False
    return done, True


def frames(done: dict[int, dict[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Summary (cell order) and per-job table of the finished cells."""
    rows, jobs = [], []
    for i in sorted(done):
        result = dict(done[i])
        job_table = result.pop("job_table", None)
        jct = result.pop("jct_s", None)  # scripts/compare.py's cells carry JCTs only
        if job_table is None and jct is not None:
            job_table = {"jct_s": list(jct)}
        rows.append(result)
        if job_table is not None:
            df = pd.DataFrame(job_table)
            for pos, key in enumerate(k for k in KEYS if k in result):
                df.insert(pos, key, result[key])
            jobs.append(df)
    summary = pd.DataFrame(rows)
    return summary, (pd.concat(jobs, ignore_index=True) if jobs else None)


def run(args: argparse.Namespace) -> int:
    chosen = resolve_scenario(args, "compare")
    scenario = chosen.scenario
    grid = choose_grid(args, scenario, chosen.run)
    backend = pick(args.backend, chosen.run, "backend", "local")
    if args.address and backend != "ray":
        raise CliError("--address needs --backend ray")
    n = len(grid.cells())
    print(
        f"compare on {scenario.name}: {len(grid.policies)} policies x {len(grid.congestions)} "
        f"congestion levels x {len(grid.seeds)} seeds = {n} cells ({backend})"
    )
    folder = None
    config = {
        **scenario.to_dict(),
        "run": {
            "command": "compare",
            "policies": list(grid.policies),
            "congestions": list(grid.congestions),
            "seeds": list(grid.seeds),
            "backend": backend,
        },
    }
    if not args.no_save:
        folder = new_run_dir(args.out, args.name, f"compare-{scenario.name}")
        write_config(folder, config)
    done, complete = run_grid(
        grid,
        backend,
        address=args.address,
        num_cpus=args.num_cpus,
        folder=folder,
        show_progress=not args.no_progress,
    )
    if not done:
        print("no cell finished")
        return 0 if complete else 130
    summary, jobs = frames(done)
    table = headline(summary, KEYS)
    print(text_table(table))
    if not complete:
        print(f"interrupted: {len(done)} of {n} cells finished")
    if folder is not None:
        cluster = scenario.build_cluster()
        run_data = RunData(summary=summary, jobs=jobs, num_gpus=cluster.num_gpus)
        if not complete:
            run_data.notes.append(f"Interrupted: {len(done)} of {n} cells finished.")
        title = f"compare on {scenario.name}" + ("" if complete else " (interrupted)")
        report = finish_run(folder, title, config, run_data, table)
        print(f"wrote {folder}/ (report: {report})")
    return 0 if complete else 130
