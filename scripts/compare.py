"""Compare the baseline schedulers the way the seed paper does
(``ddl_gym.experiments.grid``).

    python scripts/compare.py                     # default workload, 3 seeds
    python scripts/compare.py --data ../shared/data
    python scripts/compare.py --quick             # CI: seconds
"""

from ddl_gym.experiments.grid import main

if __name__ == "__main__":
    raise SystemExit(main())
