"""Regenerate the README's figures from the very commands their captions state.

Each figure is a PNG that one ``ddl-gym compare`` run writes into its run
folder; this module runs that command (the library's compare front-end,
``ddl_gym.cli.main``), then copies the PNG to ``docs/img/``. A figure that
no script draws drifts from its caption as the simulator changes (issue 14:
the README showed Dally's heavy makespan at ~390 h while its caption's
command gave 581 h); a test runs ``--quick`` so the path stays alive.

    python scripts/readme_figures.py                 # every figure into docs/img/
    python scripts/readme_figures.py --quick --out /tmp/figs --only compare_default_metrics.png
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IMG_DIR = ROOT / "docs" / "img"
# --quick: a few jobs, one seed; enough to exercise every step, not to read
QUICK_ARGS = ("--jobs", "20", "--seeds", "0")
DATA_PLACEHOLDER = "../shared/data"


@dataclass(frozen=True)
class Figure:
    """A README figure: ``command`` (``ddl-gym`` arguments, as in the caption)
    writes ``source`` into its run folder; it is kept as ``name``."""

    name: str
    command: tuple[str, ...]
    source: str
    needs_data: bool = False

    def caption(self) -> str:
        """The command as the README caption states it."""
        return "ddl-gym " + shlex.join(self.command)


FIGURES: tuple[Figure, ...] = (
    Figure(
        "compare_default_metrics.png",
        (
            "compare",
            "-s",
            "default",
            "--policies",
            "fifo,consolidation,tiresias,gandiva,dally",
            "--seeds",
            "0-2",
            "--processes",
            "2",
        ),
        "metrics.png",
    ),
    Figure(
        "bars_seed_week.png",
        ("compare", "--workloads", "seed-week", "--data", DATA_PLACEHOLDER, "--processes", "2"),
        "bars_seed-week.png",
        needs_data=True,
    ),
)


def figure_argv(fig: Figure, out: Path, *, quick: bool, data_dir: str | None) -> list[str]:
    """The ``ddl-gym`` argv that draws ``fig`` into a run folder under ``out``."""
    argv = [data_dir if a == DATA_PLACEHOLDER and data_dir else a for a in fig.command]
    argv += ["--out", str(out), "--name", Path(fig.name).stem, "--no-progress"]
    if quick:
        argv += list(QUICK_ARGS)
    return argv


def regenerate(
    fig: Figure, out_dir: Path, *, quick: bool = False, data_dir: str | None = None
) -> Path:
    """Run ``fig``'s command and copy its PNG to ``out_dir / fig.name``."""
    from ddl_gym.cli.main import main as cli_main

    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="readme-fig-") as tmp:
        argv = figure_argv(fig, Path(tmp), quick=quick, data_dir=data_dir)
        code = cli_main(argv)
        if code != 0:
            raise RuntimeError(f"{fig.name}: `ddl-gym {shlex.join(argv)}` exited with {code}")
        made = sorted(Path(tmp).glob(f"*/{fig.source}"))
        if len(made) != 1:
            raise RuntimeError(f"{fig.name}: the run wrote no {fig.source} (found {made})")
        target = out_dir / fig.name
        shutil.copyfile(made[0], target)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="readme_figures",
        description="Regenerate the README's figures with the commands their captions state.",
    )
    p.add_argument("--out", type=Path, default=IMG_DIR, help=f"where PNGs go (default {IMG_DIR})")
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"append {' '.join(QUICK_ARGS)} to each command (a smoke run; never for the README)",
    )
    p.add_argument(
        "--only", help="comma-separated figure names (default: all): " + FIGURE_NAMES_HELP
    )
    p.add_argument(
        "--data",
        help="data dir with traces/ for figures that need it (default: the caption's "
        f"{DATA_PLACEHOLDER}, resolved like ddl-gym's --data)",
    )
    args = p.parse_args(argv)
    chosen = list(FIGURES)
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = sorted(set(wanted) - {f.name for f in FIGURES})
        if unknown:
            p.error(f"unknown figure(s) {', '.join(unknown)}; known: {FIGURE_NAMES_HELP}")
        chosen = [f for f in FIGURES if f.name in wanted]
    data_dir = args.data
    if data_dir is None and any(f.needs_data for f in chosen):
        from ddl_gym.traces import find_data_dir

        found = find_data_dir()
        data_dir = str(found) if found is not None else None
    for fig in chosen:
        if fig.needs_data and data_dir is None:
            print(f"skip {fig.name}: needs the data dir (pass --data DIR)", flush=True)
            continue
        print(f"{fig.name}: {fig.caption()}", flush=True)
        path = regenerate(fig, args.out, quick=args.quick, data_dir=data_dir)
        print(f"wrote {path}", flush=True)
    return 0


FIGURE_NAMES_HELP = ", ".join(f.name for f in FIGURES)
