#!/usr/bin/env bash
# Installs, builds and runs the whole test suite (everything but the `gpu` label).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
cd build
ctest -LE gpu --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" --timeout 600
