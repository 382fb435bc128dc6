"""Random valid actions (seeded): the floor of the floor.

At each decision point it draws uniformly among ``Wait`` and every valid
``Place(job, level)`` for the first ``window`` waiting jobs (the env's
default pending window is 8), and, with probability ``preempt_prob``, the
``Preempt`` of a running job. It never waits on an idle cluster when it could
place (that would stall the engine). Ours; no source.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ddl_gym.engine import WAIT, Action, EngineView, Place, Preempt
from ddl_gym.perf import Level

from .common import BasePolicy


@dataclass
class RandomPolicy(BasePolicy):
    window: int = 8
    preempt_prob: float = 0.0
    name: str = "random"
    deterministic: bool = False
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0), repr=False)

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def act(self, view: EngineView) -> Action:
        places: list[Action] = []
        free = view.total_free
        for job in list(view.pending)[: self.window]:
            if job.gpus > free:
                continue
            for level in Level:
                if view.can_place(job, level):
                    places.append(Place(job.index, level))
        choices: list[Action] = places
        if view.n_running or not places:
            choices = [WAIT, *places]
        if self.preempt_prob > 0 and view.n_running and self.rng.random() < self.preempt_prob:
            choices += [Preempt(j.index) for j in view.running]
        return choices[int(self.rng.integers(len(choices)))]
