"""Fuzz the public API: random env configurations x random and invalid actions,
``simulate()`` x every baseline, malformed trace files, scenario files and CLI
arguments (the harness and this command line are ``tests/fuzz.py``; ``tests/test_fuzz.py`` runs a
short profile in the test suite).

    python scripts/fuzz.py                 # the short profile (seconds)
    nice python scripts/fuzz.py --long     # 10^6 actions over 1,000 configurations
    python scripts/fuzz.py --long --seed 3 --json fuzz.json
    python scripts/fuzz.py --long --shard 0/3 & ... --shard 2/3   # in 3 processes

Exit status 1 if anything broke; each failure prints with the seed that replays it.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo, for tests.fuzz

from tests.fuzz import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
