#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (CMake preset `fuzz`, build-fuzz/)
# and runs each for SECONDS, FUZZ_PARALLEL at a time (default: the cores; docs/fuzzing.md).
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   SECONDS: default $FUZZ_SECONDS, else 600.
# The corpus grows in build-fuzz/corpus/<target>/ (seeds: tests/fixtures, samples/,
# tests/fuzz/corpus/<target>/ and the crash fixtures of tests/fixtures/fuzz/<target>/).
# New crashes are kept in build-fuzz/crashes/<target>/, and one line per target is
# appended to build-fuzz/fuzz-log.jsonl. Exits 1 when a target crashed.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-${FUZZ_SECONDS:-600}}
[ $# -gt 0 ] && shift
all_targets=(bundle_fuzzer kineto_fuzzer kineto_windows_fuzzer nsys_fuzzer log_fuzzer
             flight_recorder_fuzzer tpe_vocabulary_fuzzer tpe_encoder_fuzzer model_loader_fuzzer weights_file_fuzzer labels_fuzzer dataset_files_fuzzer
             signature_catalog_fuzzer)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")
build=build-fuzz

if ! command -v clang++ >/dev/null || ! command -v clang >/dev/null; then
  echo "fuzz.sh: clang not found (scripts/setup.sh installs clang and libclang-rt-dev)" >&2
  exit 1
fi
jobs=$(nproc 2>/dev/null || echo 2)
configure_log=$(cmake --preset fuzz 2>&1) || { echo "$configure_log" >&2; exit 1; }
cmake --build "$build" --target teller_fuzz_all -j "$jobs"

# Seed inputs of a target, one path a line (fixtures are referenced, not copied into git).
seed_files() {
  case $1 in
    bundle_fuzzer)
      ls tests/fixtures/bundle/two_ranks/proc-*/*.bin tests/fixtures/bundle/two_ranks/logs/*.jsonl \
         samples/vllm_tp2_sample/logs/*.jsonl ;;
    kineto_fuzzer | kineto_windows_fuzzer) ls tests/fixtures/kineto/*.json tests/fixtures/legacy_profiler/*.json ;;
    nsys_fuzzer) ls tests/fixtures/nsys/*.sql ;;
    log_fuzzer) ls tests/fixtures/logs/*.log tests/fixtures/log_excerpts/*.log ;;
    flight_recorder_fuzzer) ls tests/fixtures/flight_recorder/*.json ;;
    signature_catalog_fuzzer) ls src/signatures/catalog/*.json ;;
  esac
  ls -d "tests/fuzz/corpus/$1"/* "tests/fixtures/fuzz/$1"/* 2>/dev/null || true
}
# Largest input libFuzzer makes (bytes): big enough for the seeds and, for logs, for a
# line over the importer's 64 KiB cut.
max_len() {
  case $1 in
    log_fuzzer) echo 100000 ;;
    model_loader_fuzzer) echo 32768 ;;
    signature_catalog_fuzzer) echo 131072 ;;
    tpe_encoder_fuzzer | tpe_vocabulary_fuzzer) echo 8192 ;;
    *) echo 65536 ;;
  esac
}
count_crashes() { find "$1" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' \
                    -o -name 'oom-*' -o -name 'timeout-*' \) | wc -l; }

export TELLER_FUZZ_SCRATCH
TELLER_FUZZ_SCRATCH=$(mktemp -d "$( [ -d /dev/shm ] && echo /dev/shm || echo /tmp )/teller-fuzz.XXXXXX")
trap 'rm -rf "$TELLER_FUZZ_SCRATCH"' EXIT
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
mkdir -p "$build/logs"
for target in "${targets[@]}"; do
  [ -x "$build/fuzz/$target" ] || { echo "fuzz.sh: no target $target" >&2; exit 2; }
done
# Fuzzes one target for $seconds; returns 1 when it found a crash.
fuzz_target() {
  local target=$1
  local binary=$build/fuzz/$target
  local corpus=$build/corpus/$target crashes=$build/crashes/$target seeds=$build/seeds/$target
  local before executions runs start remaining log found_before rc n found elapsed corpus_files line
  rm -rf "$seeds"
  mkdir -p "$corpus" "$crashes" "$seeds"
  while read -r file; do cp "$file" "$seeds/"; done < <(seed_files "$target")
  if [ "$target" = nsys_fuzzer ] && command -v sqlite3 >/dev/null; then
    # The SQL fixture as a real SQLite file too (small pages keep it small).
    { echo "PRAGMA page_size = 512;"; cat tests/fixtures/nsys/tiny_export.sql; } |
      sqlite3 "$seeds/tiny_export.sqlite"
  fi
  if [ "$target" = model_loader_fuzzer ]; then
    # A shipped model's text files joined by NUL bytes (the target's input format).
    for model in models/*/; do
      [ -f "$model/model.json" ] || continue
      { cat "$model/model.json"; printf '\0'; cat "$model/tpe.json"; printf '\0'
        cat "$model/templates.json"; } >"$seeds/$(basename "$model")"
    done
  fi
  before=$(count_crashes "$crashes")
  executions=0 runs=0 start=$SECONDS
  # libFuzzer stops at the first crash: start it again for the time left, until a run
  # ends cleanly or finds nothing new (it would only hit the same crash again).
  while remaining=$((seconds - (SECONDS - start))); [ "$remaining" -gt 0 ] && [ "$runs" -lt 20 ]; do
    runs=$((runs + 1))
    log=$build/logs/$target-$runs.log
    found_before=$(count_crashes "$crashes")
    rc=0
    "$binary" -max_total_time="$remaining" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=30 \
      -max_len="$(max_len "$target")" -print_final_stats=1 -artifact_prefix="$crashes/" \
      "$corpus" "$seeds" >"$log" 2>&1 || rc=$?
    n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    executions=$((executions + ${n:-0}))
    [ "$rc" -eq 0 ] && break
    echo "fuzz.sh: $target crashed (exit $rc), log $log:" >&2
    grep -m 3 -E 'ERROR: |fuzz invariant|runtime error|SUMMARY' "$log" >&2 || tail -n 5 "$log" >&2
    [ "$(count_crashes "$crashes")" -gt "$found_before" ] || break
  done
  found=$(( $(count_crashes "$crashes") - before ))
  [ "$rc" -ne 0 ] && [ "$found" -eq 0 ] && found=1  # crashed again on a known input
  elapsed=$((SECONDS - start))
  corpus_files=$(find "$corpus" -type f | wc -l)
  line=$(printf '{"date": "%s", "target": "%s", "seconds": %d, "executions": %d, "crashes": %d, "corpus_files": %d}' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$target" "$elapsed" "$executions" "$found" "$corpus_files")
  echo "$line" >>"$build/fuzz-log.jsonl"
  echo "fuzz.sh: $line"
  [ "$found" -eq 0 ]
}

# Targets run $parallel at a time (default: one per core; each libFuzzer run is
# single-threaded), so the time per target stays $seconds.
parallel=${FUZZ_PARALLEL:-$jobs}
failed=0 running=0
for target in "${targets[@]}"; do
  if [ "$running" -ge "$parallel" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
  fuzz_target "$target" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
exit "$failed"
