"""Rules a trained policy carries around its network at run time.

``quantum_mask``: the agent may not preempt a job that started less than a
quantum ago (it preempted some jobs seconds after placing them, over and
over: 14.7 times per 16-GPU job on synthetic-val@xrack512, seed 0).

``RepackWhenIdle``: when a job completes and no job waits, a running job
spread wider than its size needs (say across racks though one rack would
hold it) is checkpointed and restarted at the tighter level it would now
get, at the same instant (Gandiva's migration, but only while nobody waits,
so it never takes GPUs a waiting job could use).

Why: the agent gets a decision at such an instant but was trained on
windows of busy traces, where it almost never sees a draining cluster. On
philly-test@xrack512 it left a 16-GPU job spread over three racks from hour
10 to the end, alone on a 512-GPU cluster for 1,340 h under heavy
congestion (the best heuristic finished the trace at 315 h).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from ddl_gym.baselines.common import tighter_level

from ddl_gym.engine import Action, EngineView, Job, Place, Preempt
from ddl_gym.perf import Level


@dataclass
class RepackWhenIdle:
    """The repacking rule; ``action(view)`` is None when it does not apply."""

    _moving: dict[int, Level] = field(default_factory=dict, repr=False)

    def reset(self) -> None:
        self._moving.clear()

    def action(self, view: EngineView) -> Action | None:
        # finish a move started at this instant: the job is back in the queue
        for index, level in list(self._moving.items()):
            del self._moving[index]
            job = view.job(index)
            if view.can_place(job, level):
                return Place(index, level)
        if view.pending or not any(kind == "completion" for kind, _ in view.events):
            return None
        for job in view.running:
            level = tighter_level(view, job)
            if level is not None:
                self._moving[job.index] = level
                return Preempt(job.index)
        return None


def quantum_mask(
    mask: np.ndarray, running: Sequence[Job], first: int, now: float, min_run_s: float
) -> np.ndarray:
    """``mask`` without the preemptions of jobs that started less than
    ``min_run_s`` ago (``running[m]`` is action ``first + m``).

    Never empties the mask: a preemption is possible only while a job runs,
    and then WAIT is valid.
    """
    out = mask.copy()
    for m, job in enumerate(running):
        if now - job.started_at < min_run_s:
            out[first + m] = False
    return out
