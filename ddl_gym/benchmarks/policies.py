"""Any scheduler as a policy the engine runs: heuristic names, the shipped
agent, an SB3 zip, ``module:function`` strings, Policy objects, plain callables.

``resolve_policy(spec)`` returns a :class:`PolicySpec`: a display name, a
factory making a fresh policy per run (heuristics keep state between runs
otherwise), and whether it reads true job sizes (the oracles). Torch and the
agents package are imported only for ``agent`` specs, so the core stays
importable without them.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ddl_gym.baselines import ORACLES, POLICY_NAMES, make_policy
from ddl_gym.topology import Cluster


@dataclass(frozen=True)
class PolicySpec:
    name: str
    factory: Callable[[], Any]
    clairvoyant: bool = False


class CallablePolicy:
    """A plain function ``f(view) -> Action`` with the Policy protocol."""

    def __init__(self, fn: Callable[[Any], Any], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "callable")

    def reset(self, view: Any, seed: int | None = None) -> None:
        pass

    def act(self, view: Any) -> Any:
        return self.fn(view)


def _is_policy(obj: Any) -> bool:
    return callable(getattr(obj, "act", None)) and callable(getattr(obj, "reset", None))


def _from_object(obj: Any, name: str | None) -> PolicySpec:
    """A Policy instance, a Policy class, a factory or a plain ``f(view)``."""
    if inspect.isclass(obj) and _is_policy(obj):
        return PolicySpec(name or obj.__name__, obj)
    if _is_policy(obj):
        return PolicySpec(name or getattr(obj, "name", type(obj).__name__), lambda: obj)
    if callable(obj):
        label = name or getattr(obj, "__name__", "callable")
        try:
            n_params = len(inspect.signature(obj).parameters)
        except (TypeError, ValueError):
            n_params = 1
        if n_params == 0:  # a factory: called once per run
            return PolicySpec(label, obj)
        return PolicySpec(label, lambda: CallablePolicy(obj, label))
    raise TypeError(
        f"not a policy: {obj!r} (want a heuristic name, 'agent[:PATH]', 'module:function', "
        "an object with reset(view, seed) and act(view), or a callable f(view) -> Action)"
    )


def _agent(
    path: str | None, env_id: str | None = None, env_kwargs: Mapping[str, Any] | None = None
) -> PolicySpec:
    def factory() -> Any:
        from ddl_gym.agents.policy import DEFAULT_MODEL, load_policy

        if env_id is not None or env_kwargs is not None:  # any SB3 zip: its env says how
            return load_policy(path or DEFAULT_MODEL, env_kwargs=env_kwargs, env_id=env_id)
        return load_policy(path or DEFAULT_MODEL)

    name = "agent" if path is None else f"agent:{path}"
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

    * a heuristic name (``ddl_gym.baselines.POLICY_NAMES``); ``sjf`` and
      ``srtf`` run clairvoyant (they read true job sizes);
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
        if spec in POLICY_NAMES:
            return PolicySpec(name or spec, lambda: make_policy(spec), clairvoyant=spec in ORACLES)
        if spec == "agent" or spec.startswith("agent:"):
            return _agent(spec.partition(":")[2] or None, env_id, env_kwargs)
        if spec == "portfolio":
            return PolicySpec(name or spec, _portfolio)
        module, sep, attr = spec.partition(":")
        if sep and module and attr:
            obj = importlib.import_module(module)
            for part in attr.split("."):
                obj = getattr(obj, part)
            return _from_object(obj, name or spec)
        raise ValueError(
            f"unknown policy {spec!r}: a heuristic ({', '.join(POLICY_NAMES)}), "
            "'agent', 'agent:PATH', 'portfolio' or 'module:function'"
        )
    return _from_object(spec, name)
