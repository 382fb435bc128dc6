"""The cyclic garbage collector paused while a run builds, runs and sums up."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, back as it was
    after (reference counting still frees everything the run drops).

    A run allocates millions of short-lived objects and keeps every job, its
    records and the policy's state alive to the end: each full collection
    walks all of that again (4 % of Dally's instructions on the Philly week,
    by callgrind). What cyclic garbage the run leaves is freed at the next
    collection after it; peak resident memory at 100k jobs was the same with
    the collector off (480 vs 476 MiB). Building the jobs and the result
    tables allocates one container per job or row, enough to set off
    collections that walk everything alive, so those run paused too."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
