"""``ddl-gym compare``: the one comparison front-end (``scripts/compare.py``
and ``scripts/run.sh`` call it too; ``python -m ddl_gym.cli compare`` is the same).

Two kinds of grid, one set of options:

* a scenario's workload (``-s NAME|FILE``): policies x congestion levels x
  seeds on it (scenario cells, ``ddl_gym.experiments.cells``);
* named workloads (``--workloads default,seed-week`` or ``--data [DIR]`` for
  every workload of the data dir: the seed's traces, Philly, Pollux), each on
  its own cluster (``ddl_gym.experiments.grid``), with per-workload tables of
  Dally's improvement over the better of Tiresias and Gandiva (``tables.md``).

Cells run in this process, on ``--processes N`` processes or as Ray tasks;
every finished cell is written to ``<run>/cells/`` at once. On Ctrl-C the run
folder gets the table, plots and report of what finished and the command exits
130; ``--resume RUN_DIR`` runs the cells still missing and finishes the
folder as an uninterrupted run would have.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddl_gym.cli import names
from ddl_gym.cli.common import (
    CliError,
    add_output_args,
    add_scenario_args,
    epilog,
    parse_seeds,
    pick,
    policy_names,
    resolve_scenario,
    split_list,
    text_table,
)
from ddl_gym.cli.own_model import apply_agent_env, overlap_warnings

if TYPE_CHECKING:  # imported where used: the parser (ddl-gym --help) stays light
    from ddl_gym.experiments.runner import Plan
    from ddl_gym.scenarios import Scenario

QUICK_POLICIES = ("fifo", "consolidation", "dally")
QUICK_JOBS = 60  # --quick on named workloads: the first 60 jobs of each
ALL = "all"  # in --policies: every baseline
AGENT = "agent"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="the policy x workload x congestion x seed grid",
        description="Run every policy under every congestion level and seed on a scenario's "
        "workload (-s) or on named workloads (--workloads, --data); print the table and write "
        "a run folder (cells as they finish, summary, per-job table, plots, report.md). "
        "Ctrl-C keeps what finished; --resume finishes an interrupted run.",
        epilog=epilog(
            "ddl-gym compare -s small                     # the scenario's policies/levels/seeds",
            "ddl-gym compare -s default --quick           # fifo, consolidation, dally; seed 0",
            "ddl-gym compare -s seed-week-heavy --policies fifo,dally --congestions none,heavy",
            "ddl-gym compare --workloads default --policies all,agent --seeds 0-2 --processes 2",
            "ddl-gym compare --data ../shared/data --processes 2   # every data workload",
            "ddl-gym compare -s default --seeds 0,1,2 --backend ray",
            "ddl-gym compare -s default --backend ray --address ray://head:10001",
            "ddl-gym compare --config runs/x/config.toml  # repeat a comparison",
            "ddl-gym compare --resume runs/x              # finish an interrupted one",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scenario_args(p)
    g = p.add_argument_group("grid")
    g.add_argument(
        "--policies",
        help=f"comma-separated, of: {names.listed(names.POLICIES)}; '{ALL}' (every baseline), "
        f"'{AGENT}' (the shipped model) or '{AGENT}:PATH' (your model: one saved with "
        "ddl_gym.agents.save_model or trained by `ddl-gym train`; a bare SB3 zip with "
        "--agent-env) (default: the scenario's, else every baseline)",
    )
    g.add_argument(
        "--agent-env",
        metavar="FILE|JSON",
        help="for agent:PATH, a bare SB3 zip: the env it was trained on, as a JSON file or "
        'text, e.g. \'{"env_id": "ddl_gym/Small-v0", "env_kwargs": {"congestion": "heavy"}}\' '
        "(kept beside the model: my_model.zip -> my_model.env.json; later runs need no "
        "--agent-env)",
    )
    g.add_argument(
        "--congestions",
        help=f"comma-separated congestion levels: {names.listed(names.CONGESTIONS)} or a "
        "background load fraction, e.g. 0.3 (moderate is 0.5, heavy 0.8)",
    )
    g.add_argument("--seeds", help="comma-separated seeds or ranges, e.g. 0,1,2 or 0-2")
    g.add_argument(
        "--workloads",
        help="comma-separated named workloads, each on its own cluster, of: "
        f"{names.listed(names.WORKLOADS)} (default with --data: every data workload)",
    )
    g.add_argument(
        "--data",
        nargs="?",
        const="auto",
        metavar="DIR",
        help="the data dir with traces/ (default: ../shared/data or $DDL_GYM_DATA); "
        "alone: every data workload",
    )
    g.add_argument(
        "--quick",
        action="store_true",
        help=f"{', '.join(QUICK_POLICIES)} (unless --policies); first seed; named workloads "
        f"cut to {QUICK_JOBS} jobs",
    )
    r = p.add_argument_group("running")
    r.add_argument(
        "--processes",
        type=int,
        default=1,
        help="local worker processes (default: 1; cells are independent)",
    )
    r.add_argument("--backend", choices=["local", "ray"], help="where cells run (default: local)")
    r.add_argument("--address", help="Ray cluster address (default: start a local Ray)")
    r.add_argument("--num-cpus", type=int, help="CPUs of the local Ray (default: all)")
    r.add_argument(
        "--resume",
        type=Path,
        metavar="RUN_DIR",
        help="finish an interrupted compare run folder: run only its missing cells",
    )
    add_output_args(p)
    p.set_defaults(func=run)


# -- the grid -------------------------------------------------------------------
@dataclass(frozen=True)
class Grid:
    """What a compare run sweeps. ``workloads`` None: the scenario's workload."""

    scenario: Scenario
    policies: tuple[str, ...]
    congestions: tuple[str | float, ...]
    seeds: tuple[int, ...]
    workloads: tuple[str, ...] | None = None
    data_dir: str | None = None
    max_jobs: int | None = None

    def plan(self) -> Plan:
        """The cell function and its cells (keyword arguments), in table order."""
        from ddl_gym.experiments import grid as wgrid
        from ddl_gym.experiments.runner import Plan
        from ddl_gym.traces import find_data_dir

        if self.workloads is not None:
            cells = wgrid.make_cells(
                list(self.policies),
                list(self.workloads),
                list(self.congestions),
                list(self.seeds),
                self.data_dir,
                self.max_jobs,
            )
            return Plan(wgrid.run_cell, cells)
        order = [(c, p, s) for c in self.congestions for p in self.policies for s in self.seeds]
        workload = compare_workload(self.scenario)
        if workload is not None:
            # one of the named workloads on its cluster: the same cells (and
            # numbers) as `--workloads NAME`
            data = find_data_dir()
            extra = {"data_dir": str(data) if data else None, "max_jobs": self.scenario.jobs}
            cells = [
                {"policy": p, "workload": workload, "congestion": c, "seed": s, **extra}
                for c, p, s in order
            ]
            return Plan(wgrid.run_cell, cells)
        from ddl_gym.experiments.cells import compare_cell

        data = self.scenario.to_dict()
        cells = [{"scenario": data, "policy": p, "congestion": c, "seed": s} for c, p, s in order]
        return Plan(compare_cell, cells)

    def evaluation_traces(self) -> list[tuple[str, Any]]:
        """``(label, trace)`` of every workload the grid evaluates on."""
        from ddl_gym.experiments import grid as wgrid
        from ddl_gym.traces import find_data_dir

        named = list(self.workloads) if self.workloads is not None else []
        data_dir, max_jobs = self.data_dir, self.max_jobs
        if self.workloads is None:
            workload = compare_workload(self.scenario)
            if workload is None:
                return [
                    (f"{self.scenario.name} (seed {s})", self.scenario.build_trace(s))
                    for s in self.seeds
                ]
            named, max_jobs = [workload], self.scenario.jobs
            found = find_data_dir()
            data_dir = str(found) if found else None
        out = []
        for w in named:
            seeds = self.seeds if wgrid.WORKLOADS[w].seeded else self.seeds[:1]
            for s in seeds:
                label = f"{w} (seed {s})" if wgrid.WORKLOADS[w].seeded else w
                out.append((label, wgrid.load_workload(w, s, data_dir, max_jobs)[0]))
        return out

    def header(self, n_cells: int, backend: str) -> str:
        """The first line of a run: what the grid crosses and how many cells
        that makes (fewer than the product where a deterministic policy on a
        fixed trace runs for the first seed only)."""
        sizes = [
            _count(len(self.policies), "policy", "policies"),
            _count(len(self.congestions), "congestion level", "congestion levels"),
            _count(len(self.seeds), "seed", "seeds"),
        ]
        product = len(self.policies) * len(self.congestions) * len(self.seeds)
        where = f" on {self.scenario.name}"
        if self.workloads is not None:
            sizes.insert(0, _count(len(self.workloads), "workload", "workloads"))
            product *= len(self.workloads)
            where = ""
        crossed = " x ".join(sizes)
        if n_cells == product:
            count = f"{crossed} = {n_cells} cells"
        else:
            count = (
                f"{crossed}: {n_cells} cells, not {product} (a deterministic policy on a fixed "
                "trace runs for the first seed only)"
            )
        return f"compare{where}: {count} ({backend})"

    def run_settings(self, backend: str, folder: Path | None = None) -> dict[str, Any]:
        """The config file's ``[run]`` table: enough to repeat or resume. The
        data dir is written relative to the run ``folder`` (read back
        relative to the config file), so a run folder moves with its data."""
        out: dict[str, Any] = {
            "command": "compare",
            "policies": list(self.policies),
            "congestions": list(self.congestions),
            "seeds": list(self.seeds),
            "backend": backend,
        }
        if self.workloads is not None:
            out["workloads"] = list(self.workloads)
            if self.data_dir is not None:
                out["data"] = relative_path(self.data_dir, folder)
            if self.max_jobs is not None:
                out["max_jobs"] = self.max_jobs
        return out


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def compare_workload(scenario: Scenario) -> str | None:
    """The named workload (``grid.WORKLOADS``) a scenario is, if it is one
    on that workload's cluster with no engine overrides."""
    from ddl_gym.experiments import grid as wgrid

    if scenario.mode != "default" or scenario.perf_source is not None:
        return None
    overrides = (scenario.fabric, scenario.lease_s, scenario.tick_s)
    if any(v is not None for v in overrides) or scenario.restore_s_per_gpu is not None:
        return None
    if scenario.clairvoyant is not None or scenario.stragglers or scenario.models:
        return None
    # a scenario's trace names are the workload names (ddl_gym.workloads)
    workload = wgrid.WORKLOADS.get(scenario.trace)
    if workload is None or workload.cluster != scenario.cluster:
        return None
    return workload.name


def _as_congestion(text: str) -> str | float:
    try:
        return float(text)
    except ValueError:
        return text


def parse_policies(text: str | None, known: list[str]) -> list[str] | None:
    from ddl_gym.experiments.grid import agent_available, is_policy_name

    items = split_list(text)
    if items is None:
        return None
    out: list[str] = []
    for name in items:
        if name == ALL:
            out.extend(known)
        elif not is_policy_name(name):
            raise CliError(
                f"unknown policy {name!r}; known: {', '.join(known)}, {ALL}, {AGENT}[:PATH], "
                f"and on typed clusters {', '.join(names.TYPED_POLICIES)}"
            )
        elif name == AGENT and not agent_available():
            raise CliError(
                "policy 'agent' needs the agents extra (torch, stable-baselines3, sb3-contrib)"
                " and the shipped model: pip install 'ddl-gym[agents]'"
            )
        else:
            out.append(name)
    return list(dict.fromkeys(out))


def relative_path(path: str, folder: Path | None) -> str:
    """``path`` relative to ``folder`` (where possible: same drive), else as given."""
    if folder is None:
        return path
    try:
        return os.path.relpath(os.path.abspath(path), os.path.abspath(folder))
    except ValueError:  # another drive (Windows)
        return path


def _data_dir(text: str | None, run: dict[str, Any], config: Path | None = None) -> str | None:
    from ddl_gym.traces import find_data_dir

    if text is None and run.get("data") is not None:
        # a config file's data dir: relative to the config file's folder
        base = Path(config).parent if config is not None else Path()
        text = str(base / Path(run["data"]).expanduser())
    if text is None:
        found = find_data_dir()
        return str(found.resolve()) if found else None
    found = find_data_dir() if text == "auto" else Path(text)
    if found is None or not Path(found).is_dir():
        raise CliError(f"data dir not found: {text} (give --data DIR or set $DDL_GYM_DATA)")
    return str(Path(found).resolve())


def choose_grid(args: argparse.Namespace, scenario: Scenario, run: dict) -> Grid:
    from ddl_gym.experiments import grid as wgrid

    known = policy_names()
    policies = parse_policies(args.policies, known) or run.get("policies")
    policies = policies or list(scenario.policies)
    if not policies:
        policies = [p for p in QUICK_POLICIES if p in known] if args.quick else known
    unknown = [p for p in policies if not wgrid.is_policy_name(p)]
    if unknown:
        raise CliError(f"unknown policies {unknown}; known: {', '.join(known)}")

    workloads = split_list(args.workloads) or run.get("workloads")
    if workloads is None and args.data is not None:
        from ddl_gym.workloads import DATA_WORKLOADS

        workloads = [w.name for w in DATA_WORKLOADS]
    data_dir = max_jobs = None
    if workloads is not None:
        bad = [w for w in workloads if w not in wgrid.WORKLOADS]
        if bad:
            raise CliError(f"unknown workloads {bad}; known: {', '.join(wgrid.WORKLOADS)}")
        data_dir = _data_dir(args.data, run, args.config)
        if data_dir is None and any(wgrid.WORKLOADS[w].path for w in workloads):
            raise CliError("these workloads need the data dir: give --data DIR")
        max_jobs = args.jobs if args.jobs is not None else run.get("max_jobs")
        if args.quick and max_jobs is None:
            max_jobs = QUICK_JOBS

    levels = split_list(args.congestions)
    if levels:
        congestions = [_as_congestion(c) for c in levels]
    elif run.get("congestions"):
        congestions = list(run["congestions"])
    elif workloads is not None:
        congestions = list(wgrid.CONGESTIONS)
    else:
        congestions = list(scenario.grid_congestions)
    if args.seeds is not None:
        seeds = parse_seeds(args.seeds)
    else:
        seeds = [int(s) for s in run.get("seeds") or scenario.seeds]
        if args.quick:
            seeds = seeds[:1]
    # the scenario as the grid runs it (its config.toml then says one thing:
    # the levels and seeds swept, its single-run level the first of them);
    # validates the levels now, not in the middle of the grid
    scenario = scenario.replace(
        congestion=congestions[0],
        congestions=tuple(congestions),
        seeds=tuple(seeds),
        policies=tuple(policies),
    )
    return Grid(
        scenario,
        tuple(policies),
        tuple(congestions),
        tuple(seeds),
        tuple(workloads) if workloads is not None else None,
        data_dir,
        max_jobs,
    )


# -- output -----------------------------------------------------------------------
def write_workload_tables(done: dict[int, dict[str, Any]], grid: Grid, folder: Path | None) -> str:
    """Per-workload markdown tables (means ± 95% CI over seeds, Dally over the
    better of Tiresias and Gandiva as ratios of means); written to ``tables.md`` / ``means.csv`` /
    ``improvement.csv`` and, with matplotlib, ``bars_<w>.png`` /
    ``jct_cdf_<w>.png``."""
    import pandas as pd

    from ddl_gym.experiments import grid as wgrid

    cells = [done[i] for i in sorted(done)]
    table = pd.DataFrame([{k: v for k, v in r.items() if k != "jct_s"} for r in cells])
    means = wgrid.summarise(table)
    imp = wgrid.improvement(table)
    workloads = [w for w in (grid.workloads or ()) if w in set(means["workload"])]
    text = "\n".join(wgrid.markdown(means, imp, w) for w in workloads)
    if folder is not None:
        means.to_csv(folder / "means.csv", index=False)
        imp.to_csv(folder / "improvement.csv", index=False)
        note = (
            "Values are means over seeds ± the half width of their 95% t-interval; n = 1 "
            "where a deterministic policy on a fixed trace runs once. "
            f"{wgrid.clairvoyance_note(means)} "
            "Engine: every policy with its own engine_kwargs() (restore 1 s per GPU, gandiva "
            "0; dally, dally-1-2 and dally-6-12 with 20 s leases).\n\n"
        )
        (folder / "tables.md").write_text(note + text)
        try:
            from ddl_gym.report.plots import plot_compare
        except ImportError:  # matplotlib is the plots extra
            pass
        else:
            plot_compare(cells, means, folder)
    return text


def run(args: argparse.Namespace) -> int:
    from ddl_gym.experiments.ray_backend import RayUnavailable
    from ddl_gym.experiments.runner import CellStore, frames, run_plan
    from ddl_gym.report.run_folder import RunData, finish_run, new_run_dir, write_config

    folder: Path | None = None
    if args.resume is not None:
        if args.scenario is not None or args.config is not None:
            raise CliError("--resume takes its settings from RUN_DIR/config.toml; drop -s/--config")
        if args.no_save:
            raise CliError("--resume writes into RUN_DIR; drop --no-save")
        folder = Path(args.resume)
        args.config = folder / "config.toml"
        if not args.config.is_file():
            raise CliError(f"{folder}: not a compare run folder (no config.toml)")
    chosen = resolve_scenario(args, "compare")
    scenario = chosen.scenario
    grid = choose_grid(args, scenario, chosen.run)
    backend = pick(args.backend, chosen.run, "backend", "local")
    if args.address and backend != "ray":
        raise CliError("--address needs --backend ray")
    if args.processes < 1:
        raise CliError(f"--processes must be at least 1, got {args.processes}")
    apply_agent_env(args.agent_env, grid.policies)
    plan = grid.plan()
    n = len(plan)
    what = f"{len(grid.workloads)} workloads" if grid.workloads is not None else scenario.name
    print(grid.header(n, backend), flush=True)
    agents = [p for p in grid.policies if p == AGENT or p.startswith(AGENT + ":")]
    if agents:
        for line in overlap_warnings(agents, grid.evaluation_traces()):
            print(f"warning: {line}", file=sys.stderr, flush=True)
    store = None
    done: dict[int, dict[str, Any]] = {}
    if folder is not None:
        store = CellStore(folder)
        try:
            done = store.load(plan.cells)
        except ValueError as err:
            raise CliError(str(err)) from None
        print(f"resuming {folder}: {len(done)} of {n} cells already finished", flush=True)
    elif not args.no_save:
        folder = new_run_dir(args.out, args.name, f"compare-{grid.scenario.name}")
        store = CellStore(folder)
    config = {**grid.scenario.to_dict(), "run": grid.run_settings(backend, folder)}
    if folder is not None and args.resume is None:
        write_config(folder, config)
    workers = args.processes if backend == "local" else 1
    try:
        done, complete = run_plan(
            plan,
            backend=backend,
            processes=workers,
            store=store,
            done=done,
            address=args.address,
            num_cpus=args.num_cpus,
            show_progress=not args.no_progress,
        )
    except RayUnavailable as err:
        raise CliError(str(err)) from None
    if not done:
        print("no cell finished")
        return 0 if complete else 130
    summary, jobs = frames(done)
    from ddl_gym.experiments.grid import (
        RATIO_METHOD,
        clairvoyance_note,
        ratio_table,
        spread_note,
        spread_table,
        summarise,
        tie_note,
    )

    table = spread_table(summary)
    if grid.workloads is not None:
        print(write_workload_tables(done, grid, folder))
    else:
        print(text_table(table))
        print(spread_note(summarise(summary)))
        ratios = ratio_table(summary)
        if len(ratios):
            print(
                "\nDally / the better of Tiresias and Gandiva per metric "
                f"({RATIO_METHOD}; 95% interval in brackets; below 1: Dally lower):"
            )
            print(text_table(ratios))
        print(clairvoyance_note(summary))
    ties = tie_note(summary)
    if ties:
        print(ties)
    if not complete:
        hint = f"; continue with: ddl-gym compare --resume {folder}" if folder else ""
        print(f"interrupted: {len(done)} of {n} cells finished{hint}")
    if folder is not None:
        cluster = scenario.build_cluster()
        run_data = RunData(summary=summary, jobs=jobs, num_gpus=cluster.num_gpus)
        if not complete:
            run_data.notes.append(f"Interrupted: {len(done)} of {n} cells finished.")
        title = f"compare on {what}" + ("" if complete else " (interrupted)")
        report = finish_run(folder, title, config, run_data, table)
        print(f"wrote {folder}/ (report: {report})")
    return 0 if complete else 130
