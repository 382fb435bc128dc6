"""Policies from outside the project: ``--policy module:function`` from the
current directory, and every way such a policy can fail giving one line on
stderr naming the policy (and the case and seed of the run), exit status 2.
docs/write_a_scheduler.md's policy is run from the page itself.

Every run here is on the quick sub-suite's synthetic case (no data files), so
the module runs on a bare clone too; the page's full ``--quick`` command runs
when the data is present.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from ddl_gym.benchmarks import evaluate, get_suite, resolve_policy
from ddl_gym.benchmarks.policies import IDLE_WAITS, PolicyFailure
from ddl_gym.cli.benchmark import DEFAULT_SUITE
from ddl_gym.cli.main import main
from ddl_gym.traces import find_data_dir

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "write_a_scheduler.md"
SUITE = "ddl-gym-v1"  # frozen; its quick sub-suite has a synthetic case (reads no data file)
SYNTHETIC = "quick-synthetic@pcie16"

POLICIES = '''
from ddl_gym.engine import WAIT, Place, Preempt, Wait

CONST = 42


def good(view):
    for job in view.pending:
        if view.total_free >= job.gpus:
            return Place(job.index)
    return WAIT


def ret_none(view):
    return None


def ret_wait_class(view):
    return Wait


def place_str(view):
    return Place("x") if view.pending else WAIT


def place_job(view):
    return Place(view.pending[0]) if view.pending else WAIT


def place_float(view):
    return Place(float(view.pending[0].index)) if view.pending else WAIT


def place_unknown(view):
    return Place(99999) if view.pending else WAIT


def place_level_str(view):
    return Place(view.pending[0].index, "rack") if view.pending else WAIT


def place_running(view):
    return Place(view.running[0].index) if view.running else good(view)


def always_wait(view):
    return WAIT


def wait_and_wake(view):
    view.wake_at(view.now + 1.0)
    return WAIT


def raise_act(view):
    return 1 / 0


def raise_multiline(view):
    raise ValueError("line one\\nline two")


def make_const():
    return 42


class Base:
    def reset(self, view, seed=None):
        pass

    def act(self, view):
        return good(view)


class TickWaiter(Base):
    def act(self, view):
        return WAIT

    def engine_kwargs(self):
        return {"tick_s": 60.0}


class RaiseReset(Base):
    def reset(self, view, seed=None):
        raise RuntimeError("boom in reset")


class ResetNoSeed(Base):
    def reset(self, view):
        pass


class BadKwargs(Base):
    def engine_kwargs(self):
        return {"nope": 1}


class RaiseKwargs(Base):
    def engine_kwargs(self):
        raise RuntimeError("kw boom")


class Flipper(Base):
    """Starts and preempts the same job for ever at one instant."""

    def act(self, view):
        return Preempt(view.running[0].index) if view.running else good(view)


class OnlyAct:
    def act(self, view):
        return WAIT


class InitArgs(Base):
    def __init__(self, x):
        self.x = x


class InitRaises(Base):
    def __init__(self):
        raise RuntimeError("init boom")
'''


@pytest.fixture(scope="module")
def outside(tmp_path_factory) -> tuple[Path, str]:
    """A folder (not on the import path) holding a module of policies, some
    broken, and two modules that do not import; the module's unique name."""
    folder = tmp_path_factory.mktemp("outside")
    name = f"outside_{uuid.uuid4().hex[:8]}"
    (folder / f"{name}.py").write_text(POLICIES)
    (folder / f"{name}_raises.py").write_text('raise RuntimeError("import boom")\n')
    (folder / f"{name}_syntax.py").write_text("def f(view)\n    return 1\n")
    yield folder, name
    for mod in (name, f"{name}_raises", f"{name}_syntax"):
        sys.modules.pop(mod, None)


def run_cli(policy: str, folder: Path, monkeypatch, capsys, *extra: str) -> tuple[int, str, str]:
    """``ddl-gym benchmark evaluate --policy POLICY`` from ``folder`` (not on
    sys.path, as for the ``ddl-gym`` script) on the synthetic quick case."""
    monkeypatch.chdir(folder)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(folder))])
    argv = ["benchmark", "evaluate", "--policy", policy, "--suite", SUITE, "--quick"]
    code = main([*argv, "--case", SYNTHETIC, "--seeds", "0", "--no-progress", *extra])
    out, err = capsys.readouterr()
    return code, out, err


# (attribute or spec, a run is involved, what the line says)
FAILURES = [
    ("tiresas", False, "unknown policy 'tiresas' (did you mean 'tiresias'?)"),
    ("no_such_module_xyz:f", False, "no module named 'no_such_module_xyz'"),
    ("{m}:fnc", False, "module '{m}' has no attribute 'fnc'"),
    ("{m}:Base.nope", False, "{m}:Base has no attribute 'nope'"),
    ("{m}_raises:f", False, "importing '{m}_raises' raised RuntimeError: import boom"),
    ("{m}_syntax:f", False, "importing '{m}_syntax' raised SyntaxError"),
    ("{m}:CONST", False, "42 is not a policy"),
    ("{m}:OnlyAct", False, "class OnlyAct is not a policy (no reset method"),
    ("{m}:InitArgs", False, "class InitArgs cannot be made without arguments"),
    ("{m}:InitRaises", True, "making it raised RuntimeError: init boom"),
    ("{m}:make_const", True, "made 42, not a policy"),
    ("{m}:ret_none", True, "InvalidAction: act returned None, not an action"),
    ("{m}:ret_wait_class", True, "(the class, not an instance: return Wait())"),
    ("{m}:place_str", True, "Place(job) takes the job's index (an int, Job.index"),
    ("{m}:place_job", True, "got a Job object (job_id 'synthetic-00000'): pass its .index"),
    ("{m}:place_float", True, "got float 0.0"),
    ("{m}:place_unknown", True, "InvalidAction: no job 99999"),
    ("{m}:place_level_str", True, "level is a ddl_gym.engine.Level"),
    ("{m}:place_running", True, "InvalidAction: job synthetic-00000 is running, not pending"),
    ("{m}:always_wait", True, "StalledError: t="),
    ("{m}:wait_and_wake", True, f"it waited at {IDLE_WAITS} decision points in a row"),
    ("{m}:TickWaiter", True, f"it waited at {IDLE_WAITS} decision points in a row"),
    ("{m}:RaiseReset", True, "reset raised RuntimeError: boom in reset"),
    ("{m}:ResetNoSeed", True, "reset raised TypeError"),
    ("{m}:raise_act", True, "act raised ZeroDivisionError: division by zero"),
    ("{m}:raise_multiline", True, "act raised ValueError: line one line two"),
    ("{m}:BadKwargs", True, "engine_kwargs() returned unknown engine setting(s) ['nope']"),
    ("{m}:RaiseKwargs", True, "engine_kwargs raised RuntimeError: kw boom"),
    ("{m}:Flipper", True, "it took 100000 actions at one instant without waiting"),
]


@pytest.mark.parametrize(
    ("spec", "ran", "says"), FAILURES, ids=[f[0].replace("{m}", "mod") for f in FAILURES]
)
def test_every_failure_is_one_line_naming_policy_case_seed(
    outside, monkeypatch, capsys, spec, ran, says
):
    folder, name = outside
    spec, says = spec.format(m=name), says.format(m=name)
    code, _, err = run_cli(spec, folder, monkeypatch, capsys)
    assert code == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("ddl-gym benchmark: error: ")
    assert says in line
    named = f"policy {spec!r}"
    assert named in line
    assert (f"{named} on case {SYNTHETIC} seed 0: " in line) == ran


def test_the_synthetic_quick_case_reads_no_data():
    case = get_suite(SUITE).case(SYNTHETIC)
    assert case in get_suite(SUITE).quick and case.workload.source == "synthetic"


def test_module_function_from_the_current_directory(outside, monkeypatch, capsys):
    folder, name = outside
    before = list(sys.path)
    monkeypatch.setattr(sys, "path", [p for p in before if p not in ("", str(folder))])
    code, out, err = run_cli(f"{name}:good", folder, monkeypatch, capsys)
    assert code == 0, err
    assert out.startswith(f"{name}:good on {SUITE} quick: 1 runs")
    assert str(folder) not in sys.path  # the cwd was on the path for the import only


def test_the_ddl_gym_script_imports_from_the_current_directory(tmp_path):
    """The console script's sys.path holds its bin folder, not the cwd."""
    script = Path(sys.executable).with_name("ddl-gym")
    if not script.exists():
        pytest.skip(f"no ddl-gym script beside {sys.executable}")
    (tmp_path / "mysched.py").write_text(POLICIES)
    args = ["benchmark", "evaluate", "--suite", SUITE, "--quick", "--case", SYNTHETIC]
    args += ["--seeds", "0"]
    ok = subprocess.run(
        [str(script), *args, "--no-progress", "--policy", "mysched:good"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(
        [str(script), *args, "--policy", "mysched:fnc"],  # with the progress bar
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "ddl-gym benchmark: error: policy 'mysched:fnc': module 'mysched' has no attribute 'fnc'"
    ]


def test_a_failing_run_leaves_only_the_error_line(outside, monkeypatch, capsys):
    """With the progress bar: it is cleared, the error line alone stays."""
    folder, name = outside
    monkeypatch.chdir(folder)
    argv = ["benchmark", "evaluate", "--policy", f"{name}:raise_act", "--suite", SUITE, "--quick"]
    code = main([*argv, "--case", SYNTHETIC, "--seeds", "0"])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    shown = err.split("\r")[-1]  # what a terminal shows last: the bar draws with \r
    assert shown.startswith(f"ddl-gym benchmark: error: policy '{name}:raise_act' on case")
    assert err.count("\n") == 1  # the bar was cleared, not left on a line of its own


def test_evaluate_raises_policy_failure_with_the_run():
    def bad(view):
        return {}[view.now]

    with pytest.raises(PolicyFailure) as caught:
        evaluate(bad, suite=SUITE, quick=True, cases=[SYNTHETIC], seeds=[4], progress=False)
    failure = caught.value
    assert (failure.policy, failure.case, failure.seed, failure.where) == (
        "bad",
        SYNTHETIC,
        4,
        "act",
    )
    assert isinstance(failure.cause, KeyError)
    assert str(failure) == f"policy 'bad' on case {SYNTHETIC} seed 4: act raised KeyError: 0.0"
    assert failure.__cause__ is failure.cause  # the traceback stays reachable (--debug)


def test_resolve_policy_failures_and_kinds(outside, monkeypatch):
    folder, name = outside
    monkeypatch.chdir(folder)
    with pytest.raises(PolicyFailure, match="has no attribute 'fnc'") as caught:
        resolve_policy(f"{name}:fnc")
    assert (caught.value.case, caught.value.seed) == (None, None)
    with pytest.raises(ValueError, match="unknown policy"):
        resolve_policy("no-such-policy")
    with pytest.raises(TypeError, match="not a policy"):
        resolve_policy(42)
    spec = resolve_policy(f"{name}:Base")
    assert spec.factory() is not spec.factory()  # a class: a fresh policy per run


def test_checked_policy_keeps_the_policy_own_members(outside, monkeypatch):
    """engine_kwargs, name and supports reach the engine through the check."""
    folder, name = outside
    monkeypatch.chdir(folder)
    policy = resolve_policy(f"{name}:TickWaiter").factory()
    assert policy.engine_kwargs() == {"tick_s": 60.0}
    assert isinstance(policy.policy, sys.modules[name].TickWaiter)
    assert resolve_policy(f"{name}:good").factory().name == f"{name}:good"


# -- docs/write_a_scheduler.md ---------------------------------------------------------
def doc_blocks() -> list[str]:
    """The page's ``mymod.py``: the python blocks that start ``# mymod.py``."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    parts = [textwrap.dedent(b) for b in blocks if b.startswith("# mymod.py")]
    assert len(parts) == 2, "the page's two mymod.py blocks"
    return parts


def doc_module() -> str:
    return "\n\n".join(doc_blocks())


def doc_quick_command() -> list[str]:
    """The page's quick command, as arguments after ``ddl-gym``."""
    lines = [ln for ln in DOC.read_text().splitlines() if ln.startswith("ddl-gym benchmark ")]
    quick = [ln for ln in lines if "--quick" in ln]
    assert len(quick) == 1, quick
    return shlex.split(quick[0])[1:]


def test_the_page_ten_line_policy_runs_through_the_cli(tmp_path):
    first = doc_blocks()[0]
    code_lines = [ln for ln in first.splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(code_lines) <= 11, "the page promises a ten-line policy (and its import)"
    (tmp_path / "mymod.py").write_text(doc_module())
    args = doc_quick_command()
    assert args[:4] == ["benchmark", "evaluate", "--policy", "mymod:smallest_first"]
    suite = args[args.index("--suite") + 1] if "--suite" in args else DEFAULT_SUITE
    quick = get_suite(suite).quick
    if find_data_dir() is None:  # only synthetic cases run without data
        quick = tuple(c for c in quick if c.workload.source == "synthetic")
        if not quick:
            pytest.skip(f"no data dir, and every quick case of {suite} reads data files")
        args += [a for c in quick for a in ("--case", c.name)]
    proc = subprocess.run(
        [sys.executable, "-m", "ddl_gym.cli", *args, "--no-progress"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    runs = sum(len(c.seeds) for c in quick)
    assert proc.stdout.startswith(f"mymod:smallest_first on {suite} quick: {runs} runs")


def test_the_page_policy_class_runs_every_job(tmp_path, monkeypatch):
    name = f"mymod_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(doc_module())
    monkeypatch.chdir(tmp_path)
    try:
        for attr in ("smallest_first", "PatientConsolidation"):
            scores = evaluate(
                f"{name}:{attr}",
                suite=SUITE,
                quick=True,
                cases=[SYNTHETIC],
                seeds=[0, 1],
                progress=False,
            )
            records = scores.records
            assert len(records) == 2
            assert (records["completed"] == records["jobs"]).all()
        assert scores.policy == f"{name}:PatientConsolidation"  # the spec, as given
    finally:
        sys.modules.pop(name, None)
