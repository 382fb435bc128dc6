"""The package layout: one installed namespace, scripts as thin entry points,
the engine's imports running one way."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_wheel_installs_only_ddl_gym(tmp_path):
    """Build the wheel and read its RECORD: every installed file lives under
    ``ddl_gym/`` (or the dist-info), so no top-level ``scripts``, ``agents`` or
    ``baselines`` shadows (or is shadowed by) a user's own."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0 and "No module named" in proc.stderr:
        pytest.skip(f"cannot build a wheel here: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stderr
    # setuptools' "Package would be ignored" (data folders not listed as packages)
    assert "Warning" not in proc.stderr, proc.stderr
    (wheel,) = tmp_path.glob("ddl_gym-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        files = [line.split(",")[0] for line in zf.read(record).decode().splitlines() if line]
    top = {f.split("/")[0] for f in files if not f.split("/")[0].endswith(".dist-info")}
    assert top == {"ddl_gym"}
    assert "ddl_gym/baselines/dally.py" in files
    assert "ddl_gym/agents/policy.py" in files
    assert "ddl_gym/agents/models/default.zip" in files  # the shipped model travels too
    assert "ddl_gym/fabrics/seed.json" in files or any(
        f.startswith("ddl_gym/fabrics/") for f in files
    )


def test_namespaced_imports_work():
    code = (
        "import ddl_gym.baselines, ddl_gym.agents, ddl_gym.experiments, ddl_gym.cli, ddl_gym.report"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd="/", timeout=300)


def test_scripts_are_thin_entry_points():
    """Nothing imports from ``scripts/``, and a script defines no function
    (argument parsing and the call live in the package)."""
    scripts = sorted((REPO / "scripts").glob("*.py"))
    assert scripts
    for path in scripts:
        tree = ast.parse(path.read_text(), str(path))
        defs = [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        assert not defs, f"{path.name} defines {defs}: library code belongs in ddl_gym/"
    for path in [
        *REPO.glob("ddl_gym/**/*.py"),
        *REPO.glob("agents/*.py"),
        *REPO.glob("baselines/*.py"),
        *REPO.glob("research/*.py"),
        *REPO.glob("tests/*.py"),
    ]:
        bad = {n for n in _imports(path) if n == "scripts" or n.startswith("scripts.")}
        assert not bad, f"{path} imports {bad}"


def test_one_namespace_in_the_code():
    """Library, tests and examples import ``ddl_gym.baselines`` / ``ddl_gym.agents``,
    never the old top-level names (which would load a second copy of each class)."""
    for path in [
        *REPO.glob("ddl_gym/**/*.py"),
        *REPO.glob("agents/*.py"),
        *REPO.glob("baselines/*.py"),
        *REPO.glob("tests/*.py"),
        *REPO.glob("examples/*.py"),
        *REPO.glob("scripts/*.py"),
        *REPO.glob("research/*.py"),
    ]:
        bad = {n for n in _imports(path) if n.split(".")[0] in ("agents", "baselines")}
        assert not bad, f"{path} imports {bad}"


def test_installed_code_imports_nothing_from_research():
    """``research/`` (the agents log's tools) is not installed: no module of
    ``ddl_gym``, ``agents`` or ``baselines`` imports it, not even lazily
    inside a function, and the package list leaves it out."""
    import tomllib

    installed = [
        *REPO.glob("ddl_gym/**/*.py"),
        *REPO.glob("agents/*.py"),
        *REPO.glob("baselines/*.py"),
    ]
    assert installed and list((REPO / "research").glob("*.py"))
    for path in installed:
        parts = path.relative_to(REPO).parent.parts
        package = ".".join(parts if parts[0] == "ddl_gym" else ("ddl_gym", *parts))
        bad = {n for n in _absolute_imports(path, package) if n.split(".")[0] == "research"}
        assert not bad, f"{path.relative_to(REPO)} imports {bad}"
    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert not [p for p in packages["packages"] if "research" in p.split(".")]


def test_engine_imports_run_one_way():
    """engine.py does not import the view (the view reads the engine)."""
    engine = _imports(REPO / "ddl_gym/engine/engine.py")
    assert "ddl_gym.engine.view" not in engine
    assert "ddl_gym.engine.engine" in _imports(REPO / "ddl_gym/engine/view.py")


def test_core_imports_without_torch():
    code = (
        "import sys, ddl_gym, ddl_gym.engine, ddl_gym.env, ddl_gym.baselines, "
        "ddl_gym.experiments.grid, ddl_gym.cli.main\n"
        "assert 'torch' not in sys.modules, 'core ddl_gym imported torch'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_front_door_and_no_reference_outside_the_repository():
    """README.md is at most 300 lines; LICENSE and CITATION.cff exist; no
    markdown or Python file cites the design document outside the repository
    (``../shared/`` + its old upper-case name) or by that bare name: the design
    is ``docs/design.md``."""
    readme = (REPO / "README.md").read_text().splitlines()
    assert len(readme) <= 300, f"README.md has {len(readme)} lines"
    assert "Apache License" in (REPO / "LICENSE").read_text()
    citation = (REPO / "CITATION.cff").read_text()
    assert "cff-version: 1.2.0" in citation and "2401.16492" in citation
    assert (REPO / "docs" / "design.md").is_file()
    skip = {".venv", ".git", "build", "node_modules", ".pytest_cache", ".ruff_cache"}
    old_name = "DESIGN" + ".md"  # spelled apart so this file does not match itself
    bad = []
    for path in [*REPO.rglob("*.md"), *REPO.rglob("*.py")]:
        rel = path.relative_to(REPO)
        if skip & set(rel.parts) or rel.parts[0].endswith(".egg-info"):
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if old_name in line or "shared/" + "DESIGN" in line:
                bad.append(f"{rel}:{n}: {line.strip()}")
    assert not bad, "cite docs/design.md instead:\n" + "\n".join(bad)


def test_engine_imports_nothing_from_baselines():
    """The engine knows no policy: nothing under ``ddl_gym/engine/`` imports
    ``ddl_gym.baselines`` (policies tell it what they need through
    ``LeaseHints``)."""
    for path in sorted((REPO / "ddl_gym/engine").glob("*.py")):
        bad = {n for n in _imports(path) if n.split(".")[:2] == ["ddl_gym", "baselines"]}
        bad |= {n for n in _imports(path) if n.split(".")[0] == "baselines"}
        assert not bad, f"{path.name} imports {bad}"


def _absolute_imports(path: Path, package: str) -> set[str]:
    """Every module ``path`` imports, relative ones made absolute (``package``
    is the file's), and ``from a import b`` counted as ``a.b`` too."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = node.module or ""
            if node.level:
                module = ".".join([*base, module] if module else base)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def test_engine_imports_nothing_from_the_seed_wing():
    """The seed wing (``ddl_gym.seed``) is reached through a scenario or
    handed in as a performance source (``perf_source``); no engine module
    imports it."""
    modules = sorted((REPO / "ddl_gym/engine").glob("*.py"))
    assert modules
    for path in modules:
        names = _absolute_imports(path, "ddl_gym.engine")
        bad = {n for n in names if n == "ddl_gym.seed" or n.startswith("ddl_gym.seed.")}
        assert not bad, f"{path.name} imports {bad}"


def test_editable_install_prints_no_warning(tmp_path):
    """``pip install -e .`` shows a build backend's warnings: the project's
    backend (setuptools without its "Editable installation" notice) emits
    none. Run as pip runs it: the backend's build_editable hook from the
    repository, every warning shown."""
    code = (
        "import sys, warnings\n"
        "sys.path.insert(0, 'build_backend')\n"
        "import quiet_setuptools as backend\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        f"    backend.build_editable({str(tmp_path)!r})\n"
        "print([str(w.message).splitlines()[0] for w in seen])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout
    assert list(tmp_path.glob("ddl_gym-*.whl"))


def test_main_install_is_lean():
    """run.sh installs core + what the comparison needs (agents, plots); the
    ray extra does not bring RLlib (which pins gymnasium for everyone); tests
    and CI install every extra."""
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert not any("rllib" in r for r in extras["ray"])
    assert any("rllib" in r for r in extras["rllib"])
    assert not any("tensorboard" in r for r in extras["agents"])
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert 'main) extras="agents,plots"' in setup
    dev = setup.split("dev) extras=", 1)[1].split(";", 1)[0]
    assert set(dev.strip().strip('"').split(",")) == set(extras)
    assert "bash scripts/setup.sh main" in (REPO / "scripts" / "run.sh").read_text()
    assert "bash scripts/setup.sh dev" in (REPO / "scripts" / "test.sh").read_text()
    assert "bash scripts/setup.sh dev" in (REPO / ".ci" / "run").read_text()
    assert "download.pytorch.org/whl/cpu" in setup and "DDL_GYM_TORCH_INDEX" in setup
