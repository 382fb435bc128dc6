"""The seed wing: the seed authors' simulator (ArtISt-sim) re-stated, behind one door.

``run(trace, cluster, policy, switches=...) -> Result`` simulates a trace the
way the seed paper's simulator does (its batches, leases, offers, first-fit
placement, slowdown table and its own Dally and Tiresias); every difference
to our default model is a named switch of :class:`SeedSwitches`.

Inside: :mod:`~ddl_gym.seed.astra` (the authors' slowdown table, also a
performance source our engine can take), :mod:`~ddl_gym.seed.simulator` (the
event loop), :mod:`~ddl_gym.seed.policies` (the seed's policies and the
protocol the loop calls them by), :mod:`~ddl_gym.seed.switches`,
:mod:`~ddl_gym.seed.java_order` (the seed's hash-map walk) and
:mod:`~ddl_gym.seed.reproduction` (our figures beside the authors').

Nothing in our engine imports this package: a scenario with ``mode = "seed"``
runs here, and one with ``perf_source = "seed_astra"`` hands the engine a
loaded :class:`SlowdownTable`.
"""

from ddl_gym.seed.astra import SeedTableError, SlowdownTable
from ddl_gym.seed.policies import (
    SEED_POLICIES,
    SEED_SENSITIVE,
    SeedDally,
    SeedPolicy,
    SeedTiresias,
    make_seed_policy,
)
from ddl_gym.seed.simulator import SeedSim, run
from ddl_gym.seed.switches import SeedSwitches

__all__ = [
    "SEED_POLICIES",
    "SEED_SENSITIVE",
    "SeedDally",
    "SeedPolicy",
    "SeedSim",
    "SeedSwitches",
    "SeedTableError",
    "SeedTiresias",
    "SlowdownTable",
    "make_seed_policy",
    "run",
]
