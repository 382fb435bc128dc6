"""Results identical, bit for bit, to the code before the speed-ups.

``tests/golden/results.json`` holds fingerprints (exact summary, hashes of the
per-job and placement tables) written by ``python -m tests.golden_results``
from the code before lazy leases and incremental policy state (the Dally
cells of the Philly week rewritten once, on purpose, when Dally's re-offer
gave waiting jobs the free GPUs first). Every shipped policy is compared on
the Philly week (nvswitch512) and on the seed week (seed64), each at three
congestion levels: all 66 cells run in every test run (about 30 CPU-s; the
seed week's saturated queue once made them minutes, hence ``--golden-full``,
which other slow checks still use).
"""

from __future__ import annotations

import pytest

from tests.golden_results import WORKLOADS, cells, differences, key, load_golden, run_one

CELLS = cells(WORKLOADS)


@pytest.mark.parametrize("cell", CELLS, ids=[key(*c) for c in CELLS])
def test_results_identical_to_golden(cell, data_dir):
    expected = load_golden()[key(*cell)]
    got = run_one(*cell)
    assert differences(expected, got) == []
