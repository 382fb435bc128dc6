#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the main job: every baseline scheduler and
# the shipped learned agent on the bundled default workload (seed64, three
# congestion levels, three seeds). Extra args go to scripts/compare.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python scripts/compare.py "$@"
