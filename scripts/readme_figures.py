"""Regenerate the README's figures (``ddl_gym.report.readme_figures``): each
runs the ``ddl-gym compare`` command its caption states.

    python scripts/readme_figures.py                       # docs/img/, full runs
    python scripts/readme_figures.py --quick --out /tmp/f  # a smoke run
"""

import sys

from ddl_gym.report.readme_figures import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
