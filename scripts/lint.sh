#!/usr/bin/env bash
# Lint and type-check (after scripts/setup.sh): ruff's checks and format, and
# pyright (basic mode, pyrightconfig.json) on ddl_gym/, baselines/, agents/.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# baselines/ and agents/ install as ddl_gym.baselines and ddl_gym.agents
# (pyproject's package-dir), which the editable install maps with an import
# hook that pyright cannot read; a tree of links in that layout lets it
# resolve those imports (pyrightconfig.json's extraPaths).
tree=build/typecheck/ddl_gym
rm -rf build/typecheck
for src in ddl_gym baselines agents; do
  case $src in ddl_gym) sub=;; *) sub=/$src;; esac
  (cd "$src" && find . -name '*.py' -not -path '*/__pycache__/*') | while read -r f; do
    mkdir -p "$tree$sub/$(dirname "$f")"
    ln -s "$PWD/$src/$f" "$tree$sub/$f"
  done
done
.venv/bin/pyright
