#!/usr/bin/env bash
# Runs the benchmarks side by side on the same files and writes docs/benchmarks.md.
# Usage: scripts/bench.sh [SYNTHETIC_KINETO_MB]   (default 400)
# Inputs are made under build/bench-data (or $TELLER_BENCH_DATA); real traces come from
# ../shared/real-traces when present.
set -euo pipefail
cd "$(dirname "$0")/.."
mb=${1:-400}
scripts/setup.sh build >/dev/null
cmake --build build --target make_kineto simdjson_floor sqlite_scan_floor kineto_ingest_bench \
  log_ingest_bench nsys_ingest_bench reconstruct_bench teller >/dev/null
cmake --build build --target capture_nvtx_bench capture_minimal_nvtx_tool >/dev/null 2>&1 || true
data=${TELLER_BENCH_DATA:-build/bench-data}
mkdir -p "$data"
real=../shared/real-traces
pin=""
command -v taskset >/dev/null && pin="taskset -c 0"
results=$data/results.jsonl
: >"$results"

run() {  # group input tool command...
  local group=$1 input=$2 tool=$3
  shift 3
  echo "bench: $group / $tool on $(basename "$input")" >&2
  local line
  line=$($pin "$@" "$input")
  echo "{\"group\":\"$group\",\"input\":\"$(basename "$input")\",\"size_bytes\":$(stat -c %s "$input"),\"tool\":\"$tool\",\"result\":$line}" >>"$results"
}

kineto_inputs=()
if [ -f "$real/hta__v100_2rank_allreduce_rank1.json.gz" ]; then
  zcat "$real/hta__v100_2rank_allreduce_rank1.json.gz" >"$data/v100_2rank_allreduce_rank1.json"
  kineto_inputs+=("$data/v100_2rank_allreduce_rank1.json")
fi
build/bench/make_kineto "$data/synthetic_${mb}mb.json" "$mb" 2>/dev/null
kineto_inputs+=("$data/synthetic_${mb}mb.json")
for input in "${kineto_inputs[@]}"; do
  run kineto "$input" simdjson_floor build/bench/simdjson_floor
  run kineto "$input" teller build/bench/kineto_ingest_bench
  run kineto "$input" python_json python3 bench/python_json_walk.py
done

if [ -f "$real/nvfuser__h200_cross_entropy_report1.sqlite" ]; then
  bench/make_nsys.sh "$real/nvfuser__h200_cross_entropy_report1.sqlite" "$data/nsys_x150.sqlite" 150 2>/dev/null
  run nsys "$data/nsys_x150.sqlite" sqlite_scan_floor build/bench/sqlite_scan_floor
  run nsys "$data/nsys_x150.sqlite" teller build/bench/nsys_ingest_bench
fi

# Service logs (issue 3's target: 1M lines in 10 s): the bench writes the log, then imports it.
echo "bench: log / teller" >&2
line=$($pin build/bench/log_ingest_bench "$data/mixed_engine.log" 1000000)
echo "{\"group\":\"log\",\"tool\":\"teller\",\"result\":$line}" >>"$results"

echo 5600000 >"$data/paper_scale_nodes"
run reconstruct "$data/paper_scale_nodes" teller bash -c 'build/bench/reconstruct_bench "$(cat "$0")"'

if [ -x build/bench/capture_nvtx_bench ] && [ -f build/lib/libteller_nvtx_injection.so ]; then
  echo "bench: capture overhead" >&2
  line=$($pin build/bench/capture_nvtx_bench build/lib/libteller_nvtx_injection.so \
         build/bench/libcapture_minimal_nvtx_tool.so 1000000)
  echo "{\"group\":\"capture_nvtx\",\"result\":$line}" >>"$results"
  line=$($pin python3 bench/capture_python_bench.py build/lib/libteller_capture.so python/teller_hook)
  echo "{\"group\":\"capture_python\",\"result\":$line}" >>"$results"
fi

# TPE (issue 5): training and encoding on the paper-preset request-step corpus, and
# sentencepiece BPE training (spm_train) on the same chains, as lines and as counts.
if ! command -v spm_train >/dev/null; then
  echo "bench: installing sentencepiece" >&2
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  { $sudo_cmd apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq sentencepiece >/dev/null; } ||
    echo "bench: sentencepiece not installed; TPE runs without the spm comparison" >&2
fi
echo "bench: diagnose" >&2
cmake --build build --target diagnose_bench >/dev/null
rm -rf "$data/diagnose_paper"
build/teller synth dataset --preset paper -o "$data/diagnose_paper" -q >/dev/null
line=$($pin build/bench/diagnose_bench "$data/diagnose_paper")
echo "{\"group\":\"diagnose\",\"tool\":\"teller\",\"result\":$line}" >>"$results"

echo "bench: tpe" >&2
cmake --build build --target tpe_bench >/dev/null
rm -rf "$data/tpe_paper"
build/teller synth dataset --preset paper -o "$data/tpe_paper" -q >/dev/null
line=$($pin build/bench/tpe_bench "$data/tpe_paper" --spm-input "$data/tpe_spm.txt" \
       --spm-tsv "$data/tpe_spm.tsv")
echo "{\"group\":\"tpe\",\"tool\":\"teller\",\"result\":$line}" >>"$results"
if command -v spm_train >/dev/null; then
  for size in 512 1024; do
    spm_size=$(python3 -c 'import json, sys; r = json.loads(sys.argv[1]); print(next(t["spm_vocab_size"] for t in r["train"] if t["vocab_size"] == int(sys.argv[2])))' "$line" "$size")
    for input in txt tsv; do
      format=text
      [ "$input" = tsv ] && format=tsv
      echo "bench: tpe / spm_train $size on $input" >&2
      TIMEFORMAT="%R %U %S"
      if ! times=$( { time $pin spm_train --input="$data/tpe_spm.$input" --input_format=$format \
        --model_prefix="$data/tpe_spm_${size}_$input" --model_type=bpe --vocab_size="$spm_size" \
        --character_coverage=1.0 --split_by_whitespace=false --split_by_unicode_script=false \
        --split_by_number=false --max_sentencepiece_length=64 --max_sentence_length=65536 \
        --input_sentence_size=0 --shuffle_input_sentence=false --add_dummy_prefix=false \
        --remove_extra_whitespaces=false --normalization_rule_name=identity \
        --hard_vocab_limit=false --num_threads=1 --minloglevel=2 >/dev/null 2>&1; } 2>&1 ); then
        echo "bench: spm_train failed on $data/tpe_spm.$input" >&2
        continue
      fi
      read -r wall user sys <<<"$times"
      pieces=$(wc -l <"$data/tpe_spm_${size}_$input.vocab")
      echo "{\"group\":\"tpe\",\"tool\":\"spm_train\",\"input\":\"$input\",\"result\":{\"vocab_size\":$size,\"spm_vocab_size\":$spm_size,\"pieces\":$pieces,\"seconds\":$wall,\"cpu_seconds\":$(echo "$user $sys" | awk '{print $1 + $2}')}}" >>"$results"
    done
  done
fi

# Keep every section other scripts write between their markers (<!-- NAME:begin/end -->:
# big_inputs.sh, watch_bench.sh, e2e_bench.sh, fleet_bench.sh), in their order.
kept=$(mktemp)
python3 - docs/benchmarks.md >"$kept" <<'PY' || true
import re, sys
try:
    text = open(sys.argv[1]).read()
except OSError:
    sys.exit(0)
print("\n\n".join(m.group(0) for m in re.finditer(r"<!-- ([\w-]+):begin -->.*?<!-- \1:end -->", text, flags=re.S)))
PY
python3 bench/render_benchmarks.py "$results" >docs/benchmarks.md
[ -s "$kept" ] && printf '\n%s\n' "$(cat "$kept")" >>docs/benchmarks.md
rm -f "$kept"
echo "bench: wrote docs/benchmarks.md" >&2
