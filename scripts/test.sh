#!/usr/bin/env bash
# Set up (scripts/setup.sh dev) and run the whole test suite on every core
# (pytest-xdist). Extra args go to pytest.
#
#   bash scripts/test.sh -q                      # with the data dir, if there is one
#   bash scripts/test.sh --no-data -q [TESTS]    # as on a bare clone: no data dir
#
# --no-data: $DDL_GYM_DATA names a path that does not exist and
# $DDL_GYM_DATA_HOME an empty folder, so ddl_gym.traces.find_data_dir() finds
# nothing; every test that needs data skips with its reason, the rest must pass.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --no-data ]; then
  shift
  nodata=$(mktemp -d)
  trap 'rm -rf "$nodata"' EXIT
  export DDL_GYM_DATA="$nodata/no-data-here" DDL_GYM_DATA_HOME="$nodata"
fi
bash scripts/setup.sh dev  # every extra: the tests cover Ray, Minari, rliable, Parquet
set +e
# one worker per core (DDL_GYM_TEST_WORKERS=0: none), each test file on one
# worker, so a module's fixtures are built once
.venv/bin/python -m pytest -n "${DDL_GYM_TEST_WORKERS:-auto}" --dist loadfile "$@"
code=$?
set -e
# pytest exits 5 when it collected no tests: not a failure here
if [ "$code" -eq 5 ]; then exit 0; fi
exit "$code"
