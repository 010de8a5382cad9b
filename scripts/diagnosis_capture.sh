#!/usr/bin/env bash
# Writes the diagnosis JSON and the terminal summary of the shipped sample, of every bundle of
# `teller synth dataset --preset small` and of each real trace in ../shared/real-traces
# (when there) into OUT_DIR, one file each: the capture a refactoring is checked with.
# Capture before and after a change and compare the folders with
# scripts/diagnosis_compare.py (which leaves out the `tuning` record and timings).
# Usage: scripts/diagnosis_capture.sh TELLER_BINARY OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
teller=$(realpath "$1")
out=$2
mkdir -p "$out"
export TELLER_CACHE_DIR=none
diagnose() {  # name, inputs...
  local name=$1
  shift
  "$teller" diagnose "$@" -q --json "$out/$name.json" >"$out/$name.txt" 2>"$out/$name.stderr" ||
    echo "exit $?" >>"$out/$name.stderr"
}
diagnose sample samples/vllm_tp2_sample
dataset="$out/small-dataset"
if [ ! -d "$dataset" ]; then
  "$teller" synth dataset --preset small -o "$dataset" -q >/dev/null
fi
for bundle in "$dataset"/*/; do
  [ -f "$bundle/meta.json" ] || continue
  diagnose "small-$(basename "$bundle")" "$bundle"
done
traces=${TELLER_REAL_TRACES:-../shared/real-traces}
if [ -d "$traces" ]; then
  for trace in "$traces"/*.json.gz "$traces"/*.sqlite; do
    [ -f "$trace" ] || continue
    name=$(basename "$trace")
    diagnose "real-${name%%.*}" "$trace"
  done
fi
echo "diagnosis_capture: $(ls "$out"/*.json | wc -l) diagnoses in $out" >&2
