#!/usr/bin/env bash
# End-to-end benchmark (issue 24): `teller diagnose FILE` on the real traces of
# ../shared/real-traces (skipped when absent) and a simulated 6-rank run, per phase, then
# `teller import`, `teller build` and a diagnosis of the store on the first of them;
# writes the section between the e2e markers of docs/benchmarks.md (scripts/bench.sh
# keeps it). Usage: scripts/e2e_bench.sh [REPEATS]   (default 5; needs a configured build/)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-5}
cmake --build build --target teller >/dev/null
data=${TELLER_BENCH_DATA:-build/bench-data}
mkdir -p "$data"
inputs=()
real=../shared/real-traces
if [ -d "$real" ]; then
  # The issue's reference trace first: the import, build and store rows run on it.
  reference=$real/hta__v100_2rank_allreduce_rank1.json.gz
  [ -f "$reference" ] && inputs+=("$reference")
  for f in "$real"/*.json.gz "$real"/*.sqlite; do
    [ -f "$f" ] && [ "$f" != "$reference" ] && inputs+=("$f")
  done
fi
rm -rf "$data/e2e_sim_vllm"
build/teller synth run --engine vllm-v1-online --requests 48 --seed 3 -o "$data/e2e_sim_vllm" >/dev/null
inputs+=("$data/e2e_sim_vllm")
lines=$data/e2e_lines.jsonl
python3 bench/e2e_bench.py build/teller "$repeats" "${inputs[@]}" >"$lines"
python3 bench/render_e2e.py "$lines" "$repeats" | python3 bench/splice_section.py docs/benchmarks.md e2e
echo "e2e_bench: wrote the end-to-end section of docs/benchmarks.md" >&2
