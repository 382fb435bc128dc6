"""Rules a trained policy carries around its network at run time.

``quantum_mask``: the agent may not preempt a job that started less than a
quantum ago (it preempted some jobs seconds after placing them, over and
over: 14.7 times per 16-GPU job on synthetic-val@xrack512, seed 0).

``cross_rack_mask``: a job that fits in one rack is not placed across racks
where its predicted slowdown there is above a factor (on synthetic-val@
xrack512, seed 12, two of the three trained networks placed 114 and 85 of
the 50 8-16-GPU jobs' starts across racks under heavy congestion, the third
25: their mean JCTs were 59 and 47 h against 39 h; the cross-rack traffic
also slowed the jobs too wide for one rack, which must cross).

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
from ddl_gym.baselines.common import TighterMoves, completed_now

from ddl_gym.engine import Action, EngineView, Job
from ddl_gym.env.observation import slowdown_above
from ddl_gym.env.set_observation import SET_PENDING_FIELDS, split_set_obs

_FITS_RACK = SET_PENDING_FIELDS.index("fits_rack")
_SLOWDOWN_NETWORK = SET_PENDING_FIELDS.index("slowdown_network")


@dataclass
class RepackWhenIdle:
    """The repacking rule; ``action(view)`` is None when it does not apply."""

    _moves: TighterMoves = field(default_factory=TighterMoves, repr=False)

    def reset(self) -> None:
        self._moves.clear()

    def action(self, view: EngineView) -> Action | None:
        action = self._moves.finish(view)
        if action is not None or view.pending or not completed_now(view):
            return action
        for job in view.running:
            action = self._moves.start(view, job)
            if action is not None:
                return action
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


def cross_rack_mask(
    mask: np.ndarray, obs: np.ndarray, K: int, M: int, max_slowdown: float
) -> np.ndarray:
    """``mask`` (of a set observation ``obs`` with ``K`` pending and ``M``
    running rows) without the cross-rack placements of jobs that fit in one
    rack and are predicted to run more than ``max_slowdown`` times slower
    across racks than alone. Jobs wider than a rack keep every level (they
    have no other). If nothing would be left, ``mask`` is returned as is."""
    pending, _, _ = split_set_obs(obs, K, M)
    slow = slowdown_above(pending[:, _SLOWDOWN_NETWORK], max_slowdown)
    refused = (pending[:, _FITS_RACK] > 0.5) & slow
    out = mask.copy()
    out[3 + 3 * np.arange(K)] &= ~refused  # action 1 + 3k + 2: row k across racks
    return out if out.any() else mask
