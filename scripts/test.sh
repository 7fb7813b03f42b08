#!/usr/bin/env bash
# Set up with the test extra, then run the test suite. Extra arguments go to pytest, e.g.
#   bash scripts/test.sh tests/test_layering.py -k kernels
# Exits non-zero on any failure, and when pytest collects no test (its exit code 5).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
status=0
.venv/bin/python -m pytest -q "$@" || status=$?
if [ "$status" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; counting that as a failure" >&2
  exit 1
fi
exit "$status"
