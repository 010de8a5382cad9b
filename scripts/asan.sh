#!/usr/bin/env bash
# Builds teller with AddressSanitizer + UndefinedBehaviorSanitizer (CMake preset `asan`,
# build-asan/) and runs the unit and golden tests under it (everything but `gpu`), in
# two passes (CMakePresets.json, docs/fuzzing.md):
#   asan          every test but the capture ones; leaks checked; any report fails.
#   asan-capture  tests that run programs with the capture/NVTX libraries injected
#                 (python3, the NVTX test program, teller record). The ASan runtime is
#                 preloaded so an uninstrumented python3 can load the instrumented
#                 libraries; leak checks are off (a forked child abandons its parent's
#                 buffers on purpose) and ASan leaves SIGSEGV to the capture's handler.
# Usage: scripts/asan.sh [extra ctest arguments, e.g. -R Import]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
configure_log=$(cmake --preset asan 2>&1) || { echo "$configure_log" >&2; exit 1; }
cmake --build --preset asan -j "$jobs"
status=0
ctest --preset asan -j "$jobs" --timeout 900 "$@" || status=1
compiler=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' build-asan/CMakeCache.txt)
runtime=$("${compiler:-c++}" -print-file-name=libasan.so)
if [ -f "$runtime" ]; then
  LD_PRELOAD="$runtime${LD_PRELOAD:+:$LD_PRELOAD}" \
    ctest --preset asan-capture -j "$jobs" --timeout 900 "$@" || status=1
else
  echo "asan.sh: no shared ASan runtime ($runtime): capture tests skipped" >&2
fi
exit "$status"
