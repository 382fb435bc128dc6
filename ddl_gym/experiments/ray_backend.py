"""Run a grid of pure cell functions as Ray tasks.

``run_cells(fn, cells)`` calls ``fn(**cell)`` for every cell as a Ray task
(one CPU each) on a local Ray instance, or on an existing cluster with
``address``, and hands each result to ``on_result`` as soon as it finishes
(so a caller can save it before the others are done). Cells are pure
functions of their arguments, so results are identical to running them in
the driver; they are returned in cell order whatever order they finish in.

Ray is optional (``pip install 'ddl-gym[ray]'``); importing this module does
not import it. On a cluster, every node needs ddl-gym installed: tasks
import ``fn`` by module name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any


class RayUnavailable(RuntimeError):
    """Ray is not installed."""


def _ray():
    try:
        import ray
    except ImportError:
        raise RayUnavailable(
            "the ray backend needs Ray: pip install 'ddl-gym[ray]' (or use --backend local)"
        ) from None
    return ray


def init(address: str | None = None, num_cpus: int | None = None) -> bool:
    """Connect to ``address`` or start a local Ray (if none is running).
    Returns True when this call started it (so the caller shuts it down)."""
    ray = _ray()
    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    return True


def run_cells(
    fn: Callable[..., Any],
    cells: Sequence[Mapping[str, Any]],
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    on_result: Callable[[int, Any], None] | None = None,
) -> list[Any]:
    """``[fn(**cell) for cell in cells]``, each a Ray task.

    On KeyboardInterrupt the tasks still queued or running are cancelled and
    the interrupt goes on to the caller (results already handed to
    ``on_result`` are the caller's to keep).
    """
    ray = _ray()
    started = init(address, num_cpus)
    try:
        task = ray.remote(num_cpus=1)(fn)
        refs = [task.remote(**dict(cell)) for cell in cells]
        index = {ref: i for i, ref in enumerate(refs)}
        results: list[Any] = [None] * len(refs)
        pending = list(refs)
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                for ref in ready:
                    i = index[ref]
                    results[i] = ray.get(ref)
                    if on_result is not None:
                        on_result(i, results[i])
        except KeyboardInterrupt:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
        return results
    finally:
        if started:
            ray.shutdown()
