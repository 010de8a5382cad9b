#!/usr/bin/env bash
# `teller record --watch`: detection latency (fault -> trigger -> verdict) on the hang and
# crash test programs, and the traced process's memory under ring limits. Writes the
# section between the watch markers of docs/benchmarks.md (scripts/bench.sh keeps it).
# Usage: scripts/watch_bench.sh [REPEATS]   (default 5; needs a configured build/)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-5}
cmake --build build --target teller nvtx_test_program teller_capture teller_nvtx_injection >/dev/null
json=$(mktemp)
python3 bench/watch_bench.py build/teller build/src/capture/nvtx_test_program "$repeats" >"$json"
python3 bench/render_watch.py "$json" "$repeats" | python3 bench/splice_section.py docs/benchmarks.md watch
echo "watch_bench: wrote the watch section of docs/benchmarks.md" >&2
