#!/usr/bin/env bash
# Installs, builds and runs the whole test suite (everything but the `gpu` label).
# TELLER_TEST_FULL=1 then also runs the unit and golden tests under ASan/UBSan
# (scripts/asan.sh) and a 30-second run of every fuzz target (scripts/fuzz.sh 30);
# not on by default until their time on a 2-core CI machine is measured.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
(
  cd build
  ctest -LE gpu --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" --timeout 600
)
if [ "${TELLER_TEST_FULL:-0}" = 1 ]; then
  scripts/asan.sh
  scripts/fuzz.sh 30
fi
