#!/usr/bin/env bash
# Table 6 (paper 5.2, TPE compression) on our benchmark: builds teller when needed,
# generates the paper-preset dataset into a temporary folder, trains one vocabulary per
# size on the request_disjoint train split and measures it on the test split
# (`teller tpe table`), then writes the table into docs/results.md between the table6
# markers and the numbers into docs/results.json under "table6" (other keys kept).
# Usage: scripts/table6.sh [OUT_DIR]   (default: a temporary folder, removed)
# TELLER_BUILD_DIR picks the build folder (default: build).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TELLER_BUILD_DIR:-build}
scripts/setup.sh "$build" >/dev/null
out=${1:-}
if [ -z "$out" ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
start=$(date +%s)
rm -rf "$out/dataset"
"$build/teller" synth dataset --preset paper -o "$out/dataset" -q >/dev/null
"$build/teller" tpe table "$out/dataset" --train request_disjoint:train \
  --test request_disjoint:test --vocab-sizes 256,512,1024 --json "$out/table6.json" -q \
  >"$out/table6.md"
python3 - "$out/table6.md" "$out/table6.json" "$(( $(date +%s) - start ))" <<'PY'
import json, os, sys

table = open(sys.argv[1]).read().strip()
numbers = json.load(open(sys.argv[2]))
seconds = sys.argv[3]
paper = [
    {"vocab_size": 256, "events_per_step_after": 361.43, "compression": 6.20, "reduction_percent": 83.88},
    {"vocab_size": 512, "events_per_step_after": 25.90, "compression": 86.56, "reduction_percent": 98.84},
    {"vocab_size": 1024, "events_per_step_after": 3.88, "compression": 577.81, "reduction_percent": 99.83},
]
block = "\n".join([
    "Written by `scripts/table6.sh` (`teller synth dataset --preset paper`, then `teller tpe",
    f"table`; {seconds} s). " + table,
    "",
    "The paper's Table 6, for comparison: 2241.92 events/step before TPE; after: "
    + "; ".join(f"{p['vocab_size']}: {p['events_per_step_after']:.2f} ({p['compression']:.2f}x, "
                f"{p['reduction_percent']:.2f}%)" for p in paper) + ".",
    "teller's merge rule (docs/tpe.md) only joins a node's [layer, name] pair and a node",
    "with its first child, never siblings, so a step keeps at least one token per chain",
    "(about one per leaf of its call tree) whatever the vocabulary size; the paper's",
    "ratios at 512 and 1024 (under 26 tokens per step) need merges across siblings.",
])

path = "docs/results.md"
begin, end = "<!-- table6:begin -->", "<!-- table6:end -->"
if not os.path.exists(path):
    text = ("# Results\n\nThe paper's tables reproduced on our benchmark. Each marked section is\n"
            "written by the script it names; do not edit between the markers by hand.\n")
else:
    text = open(path).read()
if begin not in text or end not in text:
    text = text.rstrip("\n") + "\n\n## Table 6: TPE compression (paper 5.2)\n\n" + begin + "\n" + end + "\n"
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(path, "w").write(head + begin + "\n" + block + "\n" + end + tail)

path = "docs/results.json"
results = json.load(open(path)) if os.path.exists(path) else {}
numbers["paper"] = {"events_per_step_before": 2241.92, "rows": paper}
results["table6"] = numbers
with open(path, "w") as f:
    json.dump(results, f, indent=1, sort_keys=True)
    f.write("\n")
PY
echo "table6: wrote docs/results.md and docs/results.json" >&2
