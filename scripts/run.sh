#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the main job: every baseline scheduler and
# the shipped learned agent on the bundled default workload (seed64, three
# congestion levels, seeds 0-2), on two processes, as `ddl-gym compare`.
# With arguments, runs `ddl-gym compare ARGS` instead (e.g. --resume runs/X,
# --data ../shared/data --processes 2, -s small). Ctrl-C keeps finished cells.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh main  # core + agents (torch CPU, SB3) + plots: no Ray, TensorBoard, dev tools
if [ "$#" -eq 0 ]; then
  set -- --workloads default --policies all,agent --seeds 0-2 --processes 2
fi
exec .venv/bin/ddl-gym compare "$@"
