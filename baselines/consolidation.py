"""Strict consolidation: FIFO that only ever accepts the tightest level.

Rules (ours, the "consolidation-based" family the seed paper argues
against, in its strictest form):

* scheduling: arrival order; the head of the queue blocks the jobs behind it
  (no backfilling, as in ``fifo``), so the only difference from FIFO is
  placement; ``backfill=True`` lets later jobs pass a blocked head;
* placement/admission: a job starts only on one machine, or one rack when it
  is larger than a machine; it spans racks only when it is larger than a
  rack (it then takes the tightest network placement).

On an empty cluster every job has its consolidated placement, so this never
stalls.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddl_gym.engine import WAIT, Action, EngineView

from .common import BasePolicy, first_placeable, size_level


@dataclass
class ConsolidationPolicy(BasePolicy):
    backfill: bool = False
    name: str = "consolidation"

    def act(self, view: EngineView) -> Action:
        pending = view.pending
        if not pending:
            return WAIT
        jobs = pending if self.backfill else pending[:1]
        return first_placeable(view, jobs, lambda j: size_level(view.cluster, j.gpus))
