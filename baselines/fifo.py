"""FIFO: first come, first served, first fit at any level.

The head of the queue is placed as soon as enough GPUs are free anywhere
(the packer still picks the tightest placement); nothing behind it may pass
(no backfilling), as in a plain FIFO queue. No source beyond the textbook
rule; it is the floor every other policy should beat.
"""

from __future__ import annotations

from ddl_gym.engine import WAIT, Action, EngineView, Place
from ddl_gym.perf import Level

from .common import BasePolicy


class FifoPolicy(BasePolicy):
    name = "fifo"

    def act(self, view: EngineView) -> Action:
        pending = view.pending
        if pending:
            head = pending[0]
            if head.gpus <= view.total_free:
                return Place(head.index, Level.NETWORK)
        return WAIT
