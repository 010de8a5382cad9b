#!/usr/bin/env bash
# GPU check of the collector (ctest label gpu; needs an NVIDIA GPU, PyTorch with CUDA).
# Records tests/data/gpu_transformer.py (a small transformer: prefill + 32 decode
# steps, an NCCL all-reduce on one GPU) under `teller record`, checks the bundle has
# kernels bound to their launches and engine steps with request ids, and measures the
# overhead against the same workload without teller (wall, CPU, max RSS), 3 runs each.
# Usage: tests/gpu/run.sh BUILD_DIR [OUT_DIR]     exit 0 pass, 1 fail, 77 skip
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: run.sh BUILD_DIR [OUT_DIR]}
out=${2:-$(mktemp -d /tmp/teller_gpu.XXXXXX)}
record="$build/teller record"
[ -x "$build/teller" ] && "$build/teller" record --help >/dev/null 2>&1 || record="$build/teller_record_tool record"
py=${PYTHON:-python3}
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu: no GPU, skipped"; exit 77
fi
if ! $py -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "gpu: no PyTorch with CUDA, skipped"; exit 77
fi
[ -f "$build/lib/libteller_cupti_injection.so" ] || { echo "gpu: CUPTI injection not built"; exit 1; }
workload="$root/tests/data/gpu_transformer.py"
hooks="$root/tests/data/gpu_engine/gpu_hooks.txt"
fail=0

bundle="$out/run.teller"
rm -rf "$bundle"
$record -o "$bundle" --python-hooks="$hooks" -- $py "$workload" || { echo "gpu: recorded run failed"; fail=1; }
if [ -x "$build/teller" ]; then
  "$build/teller" stats "$bundle" >"$out/stats.txt" 2>&1 || { echo "gpu: teller stats failed"; fail=1; }
  cat "$out/stats.txt"
  "$build/teller" show "$bundle" >"$out/show.txt" 2>&1 || { echo "gpu: teller show failed"; fail=1; }
  grep -q "req-0" "$out/show.txt" || { echo "gpu: no step with request ids"; fail=1; }
fi
# Kernels, runtime calls and clock pairs with GPU time must be in the bundle.
$py - "$bundle" <<'PY' || fail=1
import glob, json, os, struct, sys
bundle = sys.argv[1]
meta = json.load(open(os.path.join(bundle, "meta.json")))
kinds = {}
for path in glob.glob(os.path.join(bundle, "proc-*", "events-*.bin")):
    data = open(path, "rb").read()
    pos = 0
    while pos + 32 <= len(data):
        kind, _, count, size = struct.unpack_from("<HHII", data, pos + 8)
        payload = data[pos + 32:pos + 32 + size]
        pos += 32 + size
        if kind != 2:
            continue
        off = 0
        for _ in range(count):
            rkind, _, _, rsize = struct.unpack_from("<HBBI", payload, off)
            kinds[rkind] = kinds.get(rkind, 0) + 1
            off += 8 + rsize
print("gpu: record kinds", dict(sorted(kinds.items())))
gpu_pairs = [p for p in meta["clock_pairs"] if "gpu_ns" in p]
print("gpu: clock pairs with gpu_ns:", len(gpu_pairs), "notes:", meta.get("notes"))
ok = kinds.get(10, 0) > 0 and kinds.get(9, 0) > 0 and kinds.get(8, 0) >= 33 and gpu_pairs
sys.exit(0 if ok else 1)
PY
[ $? -eq 0 ] || echo "gpu: bundle check failed"

# Overhead: the same workload with and without teller record, 3 runs each.
measure() {  # label command...
  local label=$1; shift
  for i in 1 2 3; do
    /usr/bin/time -f "{\"label\":\"$label\",\"elapsed_s\":%e,\"cpu_s\":%U+%S,\"max_rss_kb\":%M}" \
      "$@" 2>>"$out/time.jsonl" >>"$out/workload.jsonl" || true
  done
}
if [ -x /usr/bin/time ]; then
  : >"$out/time.jsonl"
  measure plain $py "$workload"
  measure teller bash -c "rm -rf '$out/o'; $record -o '$out/o' --python-hooks='$hooks' -- $py '$workload'"
  echo "gpu: overhead runs (date $(date -u +%F), $(nvidia-smi -L | head -1)):"
  grep '^{' "$out/time.jsonl"
  grep '^{' "$out/workload.jsonl"
fi
echo "gpu: outputs in $out"
exit $fail
