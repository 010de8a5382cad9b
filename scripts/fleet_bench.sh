#!/usr/bin/env bash
# The fleet's scaling table (bench/fleet_bench.py) into docs/benchmarks.md, section
# "fleet". Usage: scripts/fleet_bench.sh [BUILD_DIR] [RANKS...]   (default build, 64 256 1024)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
scripts/setup.sh "$build" >/dev/null
out=$(mktemp)
trap 'rm -f "$out"' EXIT
python3 bench/fleet_bench.py "$build/teller" "$out" "$@"
python3 bench/splice_section.py docs/benchmarks.md fleet <"$out"
echo "fleet_bench: docs/benchmarks.md section fleet written" >&2
