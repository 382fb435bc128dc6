"""DAgger with the lookahead planner as teacher (``ddl_gym.agents.distill``).

    python scripts/distill.py --quick --out runs/distill-quick

Each iteration's model is ``<out>/iterN.zip``; the best on the validation
cases is ``<out>/best.zip`` (configs beside them, loadable by
``ddl_gym.agents.load_policy``); ``<out>/curve.json`` holds the learning curve
with the teacher's planning cost.
"""

import sys

from ddl_gym.agents.distill import main

if __name__ == "__main__":
    sys.exit(main())
