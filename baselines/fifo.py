"""FIFO: first come, first served, first fit at any level.

The head of the queue is placed as soon as enough GPUs are free anywhere
(the packer still picks the tightest placement); nothing behind it may pass
(no backfilling), as in a plain FIFO queue.
"""

from __future__ import annotations

from ddl_gym.engine import WAIT, Action, EngineView, Place
from ddl_gym.perf import Level


class FifoPolicy:
    name = "fifo"

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        pass

    def act(self, view: EngineView) -> Action:
        pending = view.pending
        if pending:
            head = pending[0]
            if head.gpus <= view.total_free:
                return Place(head.index, Level.NETWORK)
        return WAIT
