"""The README's figures come from a script that runs their captions' commands."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from ddl_gym.report.readme_figures import FIGURES, figure_argv

ROOT = Path(__file__).resolve().parents[1]


def test_quick_run_writes_nonempty_pngs(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "readme_figures.py"),
            "--quick",
            "--out",
            str(tmp_path),
            "--only",
            "compare_default_metrics.png",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    png = tmp_path / "compare_default_metrics.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5_000
    assert [p.name for p in tmp_path.iterdir()] == [png.name]  # no run folder left behind


def test_every_readme_figure_is_drawn_by_the_command_its_caption_states():
    readme = (ROOT / "README.md").read_text()
    embedded = set(re.findall(r"\(docs/img/([\w.-]+\.png)\)", readme))
    assert embedded == {f.name for f in FIGURES}
    for fig in FIGURES:
        at = readme.index(f"(docs/img/{fig.name})")
        caption = readme[at : at + 400]
        assert f"`{fig.caption()}`" in caption, fig.name
        assert "python scripts/readme_figures.py" in caption, fig.name


def test_quick_only_adds_a_small_preset():
    fig = FIGURES[1]
    argv = figure_argv(fig, Path("/tmp/x"), quick=True, data_dir="/data")
    assert argv[: len(fig.command)] == [
        "/data" if a == "../shared/data" else a for a in fig.command
    ]
    assert argv[-4:] == ["--jobs", "20", "--seeds", "0"]


def test_unknown_figure_is_a_clear_error():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "readme_figures.py"), "--only", "nope.png"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 2 and "unknown figure(s) nope.png" in proc.stderr
