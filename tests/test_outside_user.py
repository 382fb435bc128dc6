"""ddl-gym-v3 as an outside user meets it: fetch the suite's data from its
origins (a loopback mirror serving origin-like copies, as in
``tests/test_data_fetch.py``), then score a policy written in a module of
the current folder with the one command, and get the normalised card.

Needs the developers' data dir to build the origin files (skipped without).
"""

from __future__ import annotations

import os
import subprocess
import sys

from ddl_gym.data import needed_files
from tests.test_data_fetch import build_origins, server  # noqa: F401 (a fixture)

SUITE = "ddl-gym-v3"
MYMOD = """
from ddl_gym.engine import WAIT, Level, Place


def smallest_first(view):
    c = view.cluster
    for job in sorted(view.pending, key=lambda j: (j.gpus, j.arrival)):
        level = Level.MACHINE if job.gpus <= c.gpus_per_server else Level.RACK
        level = level if job.gpus <= c.gpus_per_rack else Level.NETWORK
        if view.can_place(job, level):
            return Place(job.index, level)
    return WAIT
"""


def test_fetch_then_evaluate_a_module_of_the_current_folder(data_dir, server, tmp_path):  # noqa: F811
    origins, url = server
    paths = needed_files(SUITE)
    origins.files = build_origins(data_dir, paths)
    home = tmp_path / "home"
    env = {**os.environ, "DDL_GYM_DATA_HOME": str(home), "DDL_GYM_DATA_MIRROR": url}
    env.pop("DDL_GYM_DATA", None)
    cli = [sys.executable, "-m", "ddl_gym.cli"]
    fetched = subprocess.run(
        [*cli, "data", "fetch", "--suite", SUITE], env=env, capture_output=True, text=True
    )
    assert fetched.returncode == 0, fetched.stderr
    assert (home / "data" / paths[0]).is_file()

    # the user's folder: their module, no data dir but the fetched one
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "mymod.py").write_text(MYMOD)
    env = {**env, "DDL_GYM_DATA": str(home / "data")}  # never ../shared/data
    env["PYTHONPATH"] = ""  # the module is found from the current folder alone
    run = subprocess.run(
        [*cli, "benchmark", "evaluate", "--policy", "mymod:smallest_first", "--quick"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    # the default suite is v3; every quick case scored against the shipped reference
    assert f"mymod:smallest_first on {SUITE} quick" in out
    for case in ("quick-sia-1-head60@t4x16", "quick-tiresias-60@gv100x16"):
        assert case in out
    assert "IQM" in out and "[" in out  # aggregates with their bootstrap CIs
    assert "position" in out and "P(improvement)" in out
    assert f"benchmark {SUITE} (suite sha256" in out  # the citation line
