#!/usr/bin/env bash
# Create .venv (if missing) and install ddl-gym into it. Idempotent.
#
#   bash scripts/setup.sh          # main: what `scripts/run.sh` needs (core, the
#                                  # agents' torch + SB3, plots): pip extras agents,plots
#   bash scripts/setup.sh dev      # tests and CI: every extra (+ train, parquet,
#                                  # bench, datasets, ray, rllib, dev tools)
#
# torch 2.13.0 is installed first, the CPU build from the PyTorch CPU index
# ($DDL_GYM_TORCH_INDEX, default https://download.pytorch.org/whl/cpu; set it
# empty to take pip's own indexes), so no extra pulls PyPI's multi-GB CUDA
# build. Where that index is unreachable (a closed network) pip's configured
# indexes and find-links serve torch==2.13.0 instead.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:-main}
case $profile in
  main) extras="agents,plots" ;;
  dev) extras="agents,train,plots,parquet,bench,datasets,ray,rllib,dev" ;;
  *) echo "usage: scripts/setup.sh [main|dev]" >&2; exit 2 ;;
esac
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
pip=(.venv/bin/python -m pip --quiet --disable-pip-version-check)
# pip's "Location 'file:///...' is ignored: it is neither a file nor a
# directory" says a locally configured index (pip.conf) lacks a project: about
# the machine, not this install; dropped so real warnings stand out
exec 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
stamp=.venv/.ddl_gym_installed-$profile
# dev includes main
if [ "$profile" = main ] && [ -f .venv/.ddl_gym_installed-dev ] \
  && [ ! pyproject.toml -nt .venv/.ddl_gym_installed-dev ]; then
  exit 0
fi
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  "${pip[@]}" install --upgrade pip
  torch_index=${DDL_GYM_TORCH_INDEX-https://download.pytorch.org/whl/cpu}
  if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    # torch alone (--no-deps): its dependencies come with the project below
    if [ -z "$torch_index" ] || ! "${pip[@]}" install --no-deps --retries 0 --timeout 20 \
      --index-url "$torch_index" "torch==2.13.0" 2>/dev/null; then
      [ -n "$torch_index" ] && echo "setup.sh: $torch_index unreachable; torch from pip's indexes"
      "${pip[@]}" install --no-deps "torch==2.13.0"
    fi
  fi
  if [ "$profile" = main ]; then
    # lean: no bytecode compiled ahead (Python writes it for what it imports,
    # a fraction), and without torch's C++ test binaries and headers (~190 MB;
    # they serve torch's own tests and C++ extension builds only)
    "${pip[@]}" install --no-compile -e ".[$extras]"
    torch_dir=$(.venv/bin/python -c \
      "import importlib.util as u; print(u.find_spec('torch').submodule_search_locations[0])")
    rm -rf "$torch_dir/test" "$torch_dir/include" "$torch_dir"/bin/test_* \
      "$torch_dir"/bin/*Test "$torch_dir"/bin/protoc*
  else
    "${pip[@]}" install -e ".[$extras]"
  fi
  touch "$stamp"
fi
