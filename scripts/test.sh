#!/usr/bin/env bash
# Set up with the test extra, then run the test suite. Extra arguments go to pytest, e.g.
#   bash scripts/test.sh tests/test_layering.py -k kernels
# Exits non-zero on any failure, and when pytest collects no test (its exit code 5).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
status=0
# The whole suite (no arguments) in up to 4 processes (pytest-xdist), one a core: each test is
# short and mostly Python, so a second process uses the core lavapipe's threads leave idle.
# Given arguments, pytest runs them as asked (add -n N for processes).
par=()
if [ "$#" -eq 0 ]; then
  workers=$(nproc 2>/dev/null || echo 1)
  [ "$workers" -gt 4 ] && workers=4
  [ "$workers" -gt 1 ] && par=(-n "$workers")
fi
.venv/bin/python -m pytest -q ${par[@]+"${par[@]}"} "$@" || status=$?
if [ "$status" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; counting that as a failure" >&2
  exit 1
fi
# The whole suite (no arguments): the tests that judge a subnormal-flushing GPU's results again,
# with lavapipe flushing as NVIDIA's driver does (pyrite/testing/ftz.py; x86-64 only)
if [ "$#" -eq 0 ] && [ "$(uname -m)" = x86_64 ]; then
  PYRITE_EMULATE_FTZ=1 .venv/bin/python -m pytest -q tests/test_hunt_numerics.py \
    tests/test_special_more.py tests/test_complex_math.py tests/test_hunt_linalg40.py \
    tests/test_numerics41.py tests/test_hunt_scans39.py || status=$?
fi
exit "$status"
