"""The comparison grid: ``ddl-gym compare`` (``ddl_gym.cli.compare``), the one
front-end. Every option of ``ddl-gym compare --help`` works here.

    python scripts/compare.py -s default --quick
    python scripts/compare.py --data ../shared/data --processes 2   # every data workload
    python scripts/compare.py --resume runs/<run>                   # finish an interrupted run
"""

import sys

from ddl_gym.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main(["compare", *sys.argv[1:]]))
