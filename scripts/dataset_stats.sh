#!/usr/bin/env bash
# Builds the paper-preset benchmark dataset, checks that every bundle imports and
# reconstructs with no error or data-loss counter, and writes the statistics into
# docs/benchmark.md between the dataset-stats markers.
# Usage: scripts/dataset_stats.sh [OUT_DIR]   (default: a temporary folder, removed)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build >/dev/null
out=${1:-}
if [ -z "$out" ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
start=$(date +%s)
build/teller synth dataset --preset paper -o "$out/dataset" -q >/dev/null
bundles=0 bad=0
for bundle in "$out"/dataset/*/; do
  [ -f "$bundle/meta.json" ] || continue
  bundles=$((bundles + 1))
  counters=$(build/teller stats "$bundle" -q | awk '$NF == "error" || $NF == "data_loss"')
  if [ -n "$counters" ]; then
    bad=$((bad + 1))
    echo "dataset_stats: $(basename "$bundle"): $counters" >&2
  fi
done
{
  cat "$out/dataset/stats.md"
  echo
  echo "Import check: $bundles bundles imported and reconstructed by \`teller stats\`;"
  echo "bundles with an error or data-loss counter: $bad. Whole run: $(( $(date +%s) - start )) s."
} >"$out/stats_block.md"
python3 - "$out/stats_block.md" <<'PY'
import re, sys
block = open(sys.argv[1]).read().strip()
path = "docs/benchmark.md"
text = open(path).read()
begin, end = "<!-- dataset-stats:begin -->", "<!-- dataset-stats:end -->"
if begin not in text or end not in text:
    sys.exit("docs/benchmark.md lacks the dataset-stats markers")
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(path, "w").write(head + begin + "\n" + block + "\n" + end + tail)
PY
echo "dataset_stats: wrote docs/benchmark.md ($bundles bundles, $bad with errors)" >&2
[ "$bad" -eq 0 ]
