"""First-class benchmark: versioned suites, one evaluate call, robust statistics.

    from ddl_gym.benchmarks import evaluate, get_suite, suite_hash
    scores = evaluate("tiresias", suite="ddl-gym-v1", split="test")
    scores.card()

See ``docs/benchmark.md`` for the suite, the protocol and the leaderboard.
Statistics (``ddl_gym.benchmarks.stats``) need only the core install; the
performance-profile plot needs matplotlib (the ``bench`` extra).
"""

from ddl_gym.baselines import HEURISTICS, ORACLES
from ddl_gym.benchmarks.evaluate import Scores, evaluate, load_scores
from ddl_gym.benchmarks.policies import PolicyFailure, resolve_policy
from ddl_gym.benchmarks.suite import SPLITS, Case, Suite, get_suite, suite_hash
from ddl_gym.benchmarks.workload import Workload

__all__ = [
    "HEURISTICS",
    "ORACLES",
    "PolicyFailure",
    "SPLITS",
    "Case",
    "Scores",
    "Suite",
    "Workload",
    "evaluate",
    "get_suite",
    "load_scores",
    "resolve_policy",
    "suite_hash",
]
