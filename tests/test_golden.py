"""Results identical, bit for bit, to the code before the speed-ups.

``tests/golden/results.json`` holds fingerprints (exact summary, hashes of the
per-job and placement tables) written by ``python -m tests.golden_results``
from the code before lazy leases and incremental policy state. Every shipped
policy is compared on the Philly week (nvswitch512, moderate congestion) and
on the seed week (seed64, heavy congestion). The seed week's saturated queue
makes Tiresias and the leased Dally variants take millions of decision points
(5-20 CPU-s each), so those cells, and the other congestion levels, run only
with ``pytest --golden-full`` (all 66 cells, a few minutes).
"""

from __future__ import annotations

import pytest

from tests.golden_results import WORKLOADS, cells, differences, key, load_golden, run_one

SLOW_ON_SEED_WEEK = {"tiresias", "dally-1-2", "dally-6-12", "dally"}
QUICK = {"seed-week-heavy": "heavy", "philly-week-512": "moderate"}


def _quick(cell: tuple[str, str, str]) -> bool:
    workload, congestion, policy = cell
    if QUICK[workload] != congestion:
        return False
    return not (workload == "seed-week-heavy" and policy in SLOW_ON_SEED_WEEK)


CELLS = cells(WORKLOADS)


@pytest.mark.parametrize("cell", CELLS, ids=[key(*c) for c in CELLS])
def test_results_identical_to_golden(cell, data_dir, request):
    if not _quick(cell) and not request.config.getoption("--golden-full"):
        pytest.skip("slow golden cell: run with --golden-full")
    expected = load_golden()[key(*cell)]
    got = run_one(*cell)
    assert differences(expected, got) == []
