"""The policy protocol shared by heuristics (``baselines``) and agents."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ddl_gym.engine.actions import Action
from ddl_gym.engine.view import EngineView


@runtime_checkable
class Policy(Protocol):
    """A scheduler: ``reset`` once per run, then ``act`` at each decision point
    until it returns ``Wait``. Actions it returns must be valid (check with
    ``view``); ``simulate`` raises on an invalid one."""

    def reset(self, view: EngineView, seed: int | None = None) -> None: ...

    def act(self, view: EngineView) -> Action: ...
