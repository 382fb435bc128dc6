"""Any scheduler as a policy the engine runs: heuristic names, the shipped
agent, an SB3 zip, ``module:function`` strings, Policy objects, plain callables.

``resolve_policy(spec)`` returns a :class:`PolicySpec`: a display name, a
factory making a fresh policy per run (heuristics keep state between runs
otherwise), and whether it reads true job sizes (the oracles). Torch and the
agents package are imported only for ``agent`` specs, so the core stays
importable without them.

Policies from outside the project (``module:function`` strings, objects,
callables) run inside :class:`CheckedPolicy`, which names what is wrong with
an action before the engine sees it. Whatever goes wrong with a policy --
its spec does not resolve, its code raises, it returns something that is
not an action, the engine refuses its action, it never places -- reaches
the caller as one :class:`PolicyFailure` naming the policy (and the case and
seed of the run), with a one-line message.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import operator
import os
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ddl_gym.baselines import ORACLES, POLICY_NAMES, SLOW, make_policy
from ddl_gym.engine import InvalidAction, Job, Place, Preempt, StalledError, Wait
from ddl_gym.perf import Level
from ddl_gym.topology import Cluster

# A policy that waits at this many decision points in a row while no job runs
# and jobs wait will never place: with ticks or its own wake-ups the engine
# would call it forever (without them it stops with StalledError at once).
IDLE_WAITS = 10_000
# run_policy's own bound on actions at one instant, checked here first so the
# error names the policy and says what it did
ACTIONS_PER_INSTANT = 100_000
POLICY_PROTOCOL = (
    "a class or object with reset(view, seed) and act(view) -> Action, a zero-argument "
    "factory of one, or a function f(view) -> Action"
)


@dataclass(frozen=True)
class PolicySpec:
    name: str
    factory: Callable[[], Any]
    clairvoyant: bool = False


class PolicyFailure(Exception):
    """A policy failed: its spec does not resolve to a policy, or a run of it
    raised (its own code, an action the engine refused, a policy that never
    places).

    ``policy``: its name; ``cause``: the exception; ``case`` / ``seed``: the
    run (None when no run was involved); ``where``: the policy's step that
    raised (``"reset"``, ``"act"``, ``"engine_kwargs"``, ``"making it"``,
    ``"importing 'mod'"``) when its own code raised, else None; ``message``:
    what went wrong, when not the cause's own text. ``str()`` is one line:
    ``policy 'mymod:f' on case quick-synthetic@pcie16 seed 0: act raised
    ZeroDivisionError: division by zero``.
    """

    def __init__(
        self,
        policy: str,
        cause: BaseException,
        case: str | None = None,
        seed: int | None = None,
        where: str | None = None,
        message: str | None = None,
    ) -> None:
        super().__init__(policy, cause, case, seed, where, message)  # (pickles)
        self.policy = policy
        self.cause = cause
        self.case = case
        self.seed = seed
        self.where = where
        self.message = message

    def __str__(self) -> str:
        run = f"policy {self.policy!r}"
        if self.case is not None:
            run += f" on case {self.case}"
        if self.seed is not None:
            run += f" seed {self.seed}"
        what = self.message
        if what is None:
            what = f"{type(self.cause).__name__}: {self.cause}"
            if self.where is not None:
                what = f"{self.where} raised {what}"
        return " ".join(f"{run}: {what}".split())  # one line, whatever the cause's text


def policy_failure(policy: str, case: str, seed: int, error: Exception) -> PolicyFailure | None:
    """``error`` raised by a run of ``policy`` on ``case`` / ``seed`` as a
    :class:`PolicyFailure` (saying which of the policy's steps raised, when
    its own code did); None when the run's input is at fault, not the policy
    (a missing or altered data file, a malformed trace)."""
    from ddl_gym.benchmarks.provenance import InputChecksumError
    from ddl_gym.benchmarks.workload import DataMissingError
    from ddl_gym.traces import TraceError

    if isinstance(error, PolicyFailure):
        return error
    if isinstance(error, DataMissingError | InputChecksumError | TraceError):
        return None
    return PolicyFailure(policy, error, case, seed, where=_where(error))


class CallablePolicy:
    """A plain function ``f(view) -> Action`` with the Policy protocol."""

    def __init__(self, fn: Callable[[Any], Any], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "callable")

    def reset(self, view: Any, seed: int | None = None) -> None:
        pass

    def act(self, view: Any) -> Any:
        return self.fn(view)


class CheckedPolicy:
    """An outside policy whose actions are checked before the engine sees
    them: an act() result that is not an action (None, a string, the class
    ``Wait`` rather than ``Wait()``), a job reference that is not a job index
    (a ``Job`` object, its ``job_id`` string, a float), a level that is not a
    :class:`~ddl_gym.perf.Level`, waiting for ever while the cluster idles
    with jobs queued, or acting for ever at one instant each raise at once,
    with a message that says what to return instead. Every other attribute
    (``engine_kwargs``, ``supports``, ``name``, ...) is the policy's own."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self._idle = 0  # decision points in a row it waited while nothing ran
        self._instant = -1
        self._acts = 0  # actions at this instant

    def __getattr__(self, attr: str) -> Any:
        if attr == "policy":  # (not set yet: copying, unpickling)
            raise AttributeError(attr)
        return getattr(self.policy, attr)

    def reset(self, view: Any, seed: int | None = None) -> None:
        self._idle, self._instant, self._acts = 0, -1, 0
        self.policy.reset(view, seed=seed)

    def engine_kwargs(self) -> dict[str, Any]:
        get: Callable[[], Mapping[str, Any]] | None = getattr(self.policy, "engine_kwargs", None)
        return self._check_settings(get()) if callable(get) else {}

    def _check_settings(self, settings: Any) -> dict[str, Any]:
        if not isinstance(settings, Mapping):
            raise TypeError(f"engine_kwargs() returned {_short(settings)}, not a dict")
        known = _engine_settings()
        unknown = sorted(map(str, set(settings) - known))
        if unknown:
            raise TypeError(
                f"engine_kwargs() returned unknown engine setting(s) {unknown} "
                f"(the Engine takes {', '.join(sorted(known))})"
            )
        return dict(settings)

    def act(self, view: Any) -> Any:
        action = self.policy.act(view)
        self._check(action, view)
        return action

    def _check(self, action: Any, view: Any) -> None:
        if isinstance(action, Wait):
            if view.n_running == 0 and view.pending:
                self._idle += 1
                if self._idle >= IDLE_WAITS:
                    raise StalledError(
                        f"t={view.now:.6g}s: it waited at {self._idle} decision points in a "
                        f"row while no job ran and {len(view.pending)} job(s) waited: it "
                        "never places"
                    )
            else:
                self._idle = 0
            return
        if not isinstance(action, Place | Preempt):
            hint = " (the class, not an instance: return Wait())" if action is Wait else ""
            raise InvalidAction(
                f"act returned {_short(action)}{hint}, not an action: return "
                "Place(job_index, level), Preempt(job_index) or Wait() (from ddl_gym.engine)"
            )
        kind = type(action).__name__
        job = action.job
        if type(job) is not int:
            if isinstance(job, Job):
                got = f"a Job object (job_id {job.job_id!r}): pass its .index, {job.index}"
            else:
                got = f"{type(job).__name__} {_short(job)}"
            try:
                ok = not isinstance(job, bool | float) and operator.index(job) == job
            except TypeError:
                ok = False
            if not ok:
                raise InvalidAction(
                    f"{kind}(job) takes the job's index (an int, Job.index: e.g. "
                    f"view.pending[0].index), got {got}"
                )
        if isinstance(action, Place) and not isinstance(action.level, Level):
            try:
                Level(action.level)
            except ValueError:
                raise InvalidAction(
                    f"Place(job, level): level is a ddl_gym.engine.Level (MACHINE, RACK or "
                    f"NETWORK), got {_short(action.level)}"
                ) from None
        self._idle = 0
        if view.instant != self._instant:
            self._instant, self._acts = view.instant, 0
        self._acts += 1
        if self._acts >= ACTIONS_PER_INSTANT:
            raise RuntimeError(
                f"t={view.now:.6g}s: it took {self._acts} actions at one instant without "
                f"waiting (the last: {action!r}); return Wait() when done"
            )


@functools.cache
def _engine_settings() -> frozenset[str]:
    """The keyword arguments of :class:`~ddl_gym.engine.Engine` a policy may set."""
    from ddl_gym.engine import Engine

    params = inspect.signature(Engine).parameters.values()
    return frozenset(p.name for p in params if p.kind is p.KEYWORD_ONLY)


class _Maker:
    """A factory of checked policies: ``make()`` is the outside policy's
    own (a class or zero-argument factory)."""

    def __init__(self, make: Callable[[], Any], label: str) -> None:
        self.make = make
        self.label = label

    def __call__(self) -> CheckedPolicy:
        return _checked(self.make(), self.label)


def _checked(made: Any, label: str) -> CheckedPolicy:
    if not _is_policy(made):
        raise TypeError(f"{label}() made {_short(made)}, {_not_policy(made)}")
    return CheckedPolicy(made)


# The policy's steps, by the code that calls into it (see _where).
_STEPS = {
    CheckedPolicy.reset.__code__: "reset",
    CheckedPolicy.act.__code__: "act",
    CheckedPolicy.engine_kwargs.__code__: "engine_kwargs",
    _Maker.__call__.__code__: "making it",
}
# ... and the checks here, which say themselves what is wrong
_CHECKS = {
    CheckedPolicy._check.__code__,
    CheckedPolicy._check_settings.__code__,
    _checked.__code__,
}


def _where(error: BaseException) -> str | None:
    """The policy step (reset, act, ...) whose own code raised ``error``; None
    when a check here or the engine raised it."""
    frames = [frame.f_code for frame, _ in traceback.walk_tb(error.__traceback__)]
    if not frames or frames[-1] in _CHECKS:
        return None
    steps = [_STEPS[code] for code in frames if code in _STEPS]
    return steps[-1] if steps else None


def _short(obj: Any, limit: int = 80) -> str:
    text = repr(obj)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_policy(obj: Any) -> bool:
    return callable(getattr(obj, "act", None)) and callable(getattr(obj, "reset", None))


def _not_policy(obj: Any) -> str:
    missing = [m for m in ("reset", "act") if not callable(getattr(obj, m, None))]
    return f"not a policy (no {' or '.join(missing)} method; want {POLICY_PROTOCOL})"


def _from_object(obj: Any, name: str | None) -> PolicySpec:
    """A Policy instance, a Policy class, a factory or a plain ``f(view)``;
    each run gets a fresh :class:`CheckedPolicy` around it."""
    if inspect.isclass(obj):
        if not _is_policy(obj):
            raise TypeError(f"class {obj.__name__} is {_not_policy(obj)}")
        try:
            inspect.signature(obj).bind()
        except TypeError as err:
            raise TypeError(
                f"class {obj.__name__} cannot be made without arguments ({err}): give a "
                "zero-argument factory or an instance"
            ) from None
        except ValueError:  # no signature to read (a builtin): try it at run time
            pass
        label = name or obj.__name__
        return PolicySpec(label, _Maker(obj, label))
    if _is_policy(obj):
        label = name or getattr(obj, "name", type(obj).__name__)
        return PolicySpec(label, _Maker(lambda: obj, label))
    if callable(obj):
        label = name or getattr(obj, "__name__", "callable")
        try:
            n_params = len(inspect.signature(obj).parameters)
        except (TypeError, ValueError):
            n_params = 1
        if n_params == 0:  # a factory: called once per run
            return PolicySpec(label, _Maker(obj, label))
        return PolicySpec(label, _Maker(lambda: CallablePolicy(obj, label), label))
    raise TypeError(
        f"{_short(obj)} is not a policy (want a heuristic name, 'agent[:PATH]', "
        f"'module:function', {POLICY_PROTOCOL})"
    )


def _import(spec: str, module: str, attr: str) -> Any:
    """``module``'s attribute ``attr`` (dotted: ``Class.method``), the current
    directory first on the import path while importing (a user's ``mymod.py``
    beside them, also from the ``ddl-gym`` script, whose path has no cwd)."""
    cwd = os.getcwd()
    added = all(os.path.abspath(p or os.curdir) != cwd for p in sys.path)
    if added:
        sys.path.insert(0, cwd)
    try:
        obj = importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name is not None and (module + ".").startswith(err.name + "."):
            raise PolicyFailure(
                spec,
                err,
                message=f"no module named {err.name!r} (looked in the current directory "
                f"{cwd} and on the import path)",
            ) from err
        raise PolicyFailure(spec, err, where=f"importing {module!r}") from err
    except Exception as err:  # its code raised, or it does not parse (SyntaxError)
        raise PolicyFailure(spec, err, where=f"importing {module!r}") from err
    finally:
        if added:
            sys.path.remove(cwd)
    owner = f"module {module!r}"
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as err:
            raise PolicyFailure(spec, err, message=f"{owner} has no attribute {part!r}") from err
        owner = f"{module}:{attr[: attr.index(part) + len(part)]}"
    return obj


def _agent(
    path: str | None, env_id: str | None = None, env_kwargs: Mapping[str, Any] | None = None
) -> PolicySpec:
    def factory() -> Any:
        from ddl_gym.agents.policy import DEFAULT_MODEL, load_policy

        if env_id is not None or env_kwargs is not None:  # any SB3 zip: its env says how
            return load_policy(path or DEFAULT_MODEL, env_kwargs=env_kwargs, env_id=env_id)
        return load_policy(path or DEFAULT_MODEL)

    name = "agent" if path is None else f"agent:{path}"
    # the env arguments are checked now, before any run, naming the bad field
    # (a missing model file: load_policy says so in the first run)
    if env_id is not None or env_kwargs is not None:
        from ddl_gym.model_env import model_env

        try:
            model_env(env_id, env_kwargs, trained_on=())
        except ValueError as err:
            raise PolicyFailure(name, err, message=str(err)) from err
    return PolicySpec(name, factory)


def _portfolio() -> Any:
    from ddl_gym.agents.portfolio import make

    return make()


def supports(policy: Any, cluster: Cluster) -> str | None:
    """Why ``policy`` cannot run on ``cluster`` (None: it can). A policy may
    say so itself (``supports(cluster) -> bool``); a model that observes one
    row per server (an SB3 zip on the env's flat observation) runs only on
    the cluster shape it was trained on."""
    check = getattr(policy, "supports", None)
    if callable(check):
        return None if check(cluster) else f"{getattr(policy, 'name', policy)} says no"
    mine = getattr(policy, "cluster", None)
    if isinstance(mine, Cluster) and hasattr(policy, "observation_space"):
        shape = (cluster.racks, cluster.servers_per_rack, cluster.gpus_per_server)
        if shape != (mine.racks, mine.servers_per_rack, mine.gpus_per_server):
            return f"trained on {mine.describe()}; its observation cannot show another shape"
    return None


def resolve_policy(
    spec: Any,
    name: str | None = None,
    env_id: str | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
) -> PolicySpec:
    """A :class:`PolicySpec` for ``spec``:

    * a heuristic name (``ddl_gym.baselines.POLICY_NAMES``, or ``planner``, the
      slow lookahead planner of ``SLOW``); the oracles ``sjf``, ``srtf`` and
      ``srsf`` run clairvoyant (they read true job sizes);
    * ``"agent"`` (the shipped model) or ``"agent:PATH"``: a model saved by
      ``ddl_gym.agents.train`` (its config beside it), or any SB3 /
      sb3-contrib zip (MaskablePPO, PPO) with ``env_id`` / ``env_kwargs``, the
      env it was trained on (README's recipe: ``ddl_gym/Small-v0``);
    * ``"portfolio"``: the shipped model with Tiresias and Gandiva, one at a
      time, chosen online by replaying recent jobs (``ddl_gym.agents.portfolio``);
    * ``"module:function"`` (or ``module:Class``): imported, then as below;
    * an object with ``reset(view, seed)`` and ``act(view)``, a class or
      zero-argument factory making one, or a plain ``f(view) -> Action``.
    """
    if isinstance(spec, PolicySpec):
        return spec
    if isinstance(spec, str):
        if spec in POLICY_NAMES or spec in SLOW:
            return PolicySpec(name or spec, lambda: make_policy(spec), clairvoyant=spec in ORACLES)
        if spec == "agent" or spec.startswith("agent:"):
            return _agent(spec.partition(":")[2] or None, env_id, env_kwargs)
        if spec == "portfolio":
            return PolicySpec(name or spec, _portfolio)
        module, sep, attr = spec.partition(":")
        if sep and module and attr:
            obj = _import(spec, module, attr)
            try:
                return _from_object(obj, name or spec)
            except TypeError as err:
                raise PolicyFailure(name or spec, err, message=str(err)) from err
        close = difflib.get_close_matches(spec, [*POLICY_NAMES, *SLOW, "agent", "portfolio"], n=1)
        raise ValueError(
            f"unknown policy {spec!r}"
            + (f" (did you mean {close[0]!r}?)" if close else "")
            + f": a heuristic ({', '.join((*POLICY_NAMES, *SLOW))}), "
            "'agent', 'agent:PATH', 'portfolio' or 'module:function'"
        )
    return _from_object(spec, name)
