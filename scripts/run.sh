#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the main job: the scheduler comparison on
# the bundled default workload. Extra args go to the comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ -f scripts/compare.py ]; then
  exec .venv/bin/python scripts/compare.py "$@"
fi
exec .venv/bin/ddl-gym simulate -s default "$@"
