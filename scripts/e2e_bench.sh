#!/usr/bin/env bash
# End-to-end benchmark (issue 24): `teller diagnose FILE` on the real traces of
# ../shared/real-traces (skipped when absent), a simulated 6-rank run and an 8-rank one,
# the nsys export grown 150x, four generated 64 MB rank files (side by side and on one
# thread) and a generated 1 GB Kineto file, per phase; then, on the
# first input, a diagnosis from its cached snapshot, `teller import`, `teller build`, a
# diagnosis of the store, Python's json.load of the file and a bare SQLite bulk insert of
# the stored rows as references. Writes the section between the e2e markers of
# docs/benchmarks.md (scripts/bench.sh keeps it).
# Usage: scripts/e2e_bench.sh [REPEATS] [BIG_MB]   (defaults 5 and 1024; 0 MB: no big file;
# needs a configured build/)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-5}
big_mb=${2:-1024}
cmake --build build --target teller sqlite_insert_floor teller_make_big_kineto >/dev/null
data=${TELLER_BENCH_DATA:-build/bench-data}
mkdir -p "$data"
inputs=()
real=../shared/real-traces
nsys_real=$real/nvfuser__h200_cross_entropy_report1.sqlite
if [ -d "$real" ]; then
  # The issue's reference trace first: the import, build and store rows run on it.
  reference=$real/hta__v100_2rank_allreduce_rank1.json.gz
  [ -f "$reference" ] && inputs+=("$reference")
  for f in "$real"/*.json.gz "$real"/*.sqlite; do
    [ -f "$f" ] && [ "$f" != "$reference" ] && inputs+=("$f")
  done
fi
rm -rf "$data/e2e_sim_vllm" "$data/e2e_sim_vllm_8rank"
build/teller synth run --engine vllm-v1-online --requests 48 --seed 3 -o "$data/e2e_sim_vllm" >/dev/null
inputs+=("$data/e2e_sim_vllm")
build/teller synth run --engine vllm-v1-online --requests 48 --seed 3 --nodes 2 \
  --gpus-per-node 4 --tp 4 --pp 2 -o "$data/e2e_sim_vllm_8rank" >/dev/null
inputs+=("$data/e2e_sim_vllm_8rank")
if [ -f "$nsys_real" ]; then
  bash bench/make_nsys.sh "$nsys_real" "$data/nsys_x150.sqlite" 150
  inputs+=("$data/nsys_x150.sqlite")
fi
# Four rank files of 64 MB: imported side by side (one thread per core) and on one thread.
ranks=$data/kineto_4ranks
rm -rf "$ranks" && mkdir -p "$ranks"
for rank in 0 1 2 3; do
  build/bench/teller_make_big_kineto "$ranks/trace_rank$rank.json" 64 "$((rank + 1))" >/dev/null
done
inputs+=("$ranks" "threads1:$ranks")
if [ "$big_mb" -gt 0 ]; then
  build/bench/teller_make_big_kineto "$data/kineto_${big_mb}mb.json" "$big_mb" >/dev/null
  inputs+=("$data/kineto_${big_mb}mb.json")
fi
lines=$data/e2e_lines.jsonl
python3 bench/e2e_bench.py build/teller build "$repeats" "${inputs[@]}" >"$lines"
rm -rf "$data/nsys_x150.sqlite" "$data/kineto_${big_mb}mb.json" "$ranks"
python3 bench/render_e2e.py "$lines" "$repeats" | python3 bench/splice_section.py docs/benchmarks.md e2e
echo "e2e_bench: wrote the end-to-end section of docs/benchmarks.md" >&2
