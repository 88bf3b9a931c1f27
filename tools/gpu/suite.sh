#!/usr/bin/env bash
# On the GPU machine after setup.sh: the test suite, its log in $OUT/tests.log.
# SUITE_SECONDS (default 400) bounds it, so that the log comes back within the call.
cd "$(dirname "$0")/../.." || exit 1
. tools/gpu/env.sh
timeout "${SUITE_SECONDS:-400}" "$PY" -m pytest -n 14 --dist loadfile -q -p no:cacheprovider \
  -o addopts="-ra" tests > "$OUT/tests.log" 2>&1
echo "pytest exit status $?"; tail -c 6000 "$OUT/tests.log"
