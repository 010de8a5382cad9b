#!/usr/bin/env bash
# Installs, builds and runs the whole test suite (everything but the `gpu` label),
# then the unit and golden tests again under ASan/UBSan (scripts/asan.sh) and a
# 5-second run of every fuzz target as a regression check (scripts/fuzz.sh 5: each
# target replays its seeds and crash fixtures first, then fuzzes; CI time is budgeted).
# TELLER_TEST_QUICK=1 skips the sanitizer and fuzz passes (for a quick local loop).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
(
  cd build
  ctest -LE gpu --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" --timeout 600
)
if [ "${TELLER_TEST_QUICK:-0}" != 1 ]; then
  start=$SECONDS
  scripts/asan.sh
  echo "test.sh: ASan/UBSan pass took $((SECONDS - start)) s" >&2
  start=$SECONDS
  scripts/fuzz.sh 5
  echo "test.sh: fuzz regression took $((SECONDS - start)) s" >&2
fi
