"""One torch thread per process in the agents' code paths.

The networks here are small (two 64-unit layers) and run one observation at a
time; torch's default of one thread per core makes every process fight the
others for the cores (training with 2 env workers on 2 cores ran >10x slower
without this). Training, its env workers, evaluation, loading a policy and
the compare grid's workers all call ``one_thread()``; set
``DDL_GYM_TORCH_THREADS=N`` to choose another count.
"""

from __future__ import annotations

import os


def one_thread() -> None:
    """``torch.set_num_threads`` to 1 (or ``$DDL_GYM_TORCH_THREADS``)."""
    import torch

    n = int(os.environ.get("DDL_GYM_TORCH_THREADS", "1"))
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
