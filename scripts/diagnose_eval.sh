#!/usr/bin/env bash
# Scores `teller diagnose` against the simulator's labels and writes the results
# into docs/results.md (between the diagnose-eval markers) and docs/results.json
# (key "diagnose"). Two datasets: the small preset (seed 20260101; the rules were
# written while looking at it, so it is the development set) and the paper preset
# (seed 20260101; never looked at while writing the rules: held out).
# Usage: scripts/diagnose_eval.sh [OUT_DIR]   (default: a temporary folder, removed)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build >/dev/null
out=${1:-}
if [ -z "$out" ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
start=$(date +%s)
for preset in small paper; do
  build/teller synth dataset --preset "$preset" -o "$out/$preset" -q >/dev/null
  build/teller evaluate "$out/$preset" -q --top-k 3 --markdown "$out/$preset.md" \
    --json "$out/$preset.json" >/dev/null
done
seconds=$(( $(date +%s) - start ))
python3 - "$out" "$seconds" <<'PY'
import json, os, sys
out, seconds = sys.argv[1], sys.argv[2]
small = open(os.path.join(out, "small.md")).read().strip()
paper = open(os.path.join(out, "paper.md")).read().strip()
block = f"""Written by `scripts/diagnose_eval.sh` ({seconds} s): `teller synth dataset --preset P`
then `teller evaluate` on every bundle. A hit needs one of the top 3 findings to name the
rank, the engine step and the operator family of an operator instance the fault affected
(`affected_operators` in labels.json, families by `localize::ClassifyOperator`).

Small preset (development set: the rules were written while looking at it):

{small}

Paper preset (held out: not looked at while writing the rules):

{paper}"""
path = "docs/results.md"
text = open(path).read() if os.path.exists(path) else "# Results\n"
begin, end = "<!-- diagnose-eval:begin -->", "<!-- diagnose-eval:end -->"
if begin not in text:
    text = text.rstrip() + "\n\n## First diagnosis against the simulator's labels\n\n" + begin + "\n" + end + "\n"
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(path, "w").write(head + begin + "\n" + block + "\n" + end + tail)
jpath = "docs/results.json"
data = json.load(open(jpath)) if os.path.exists(jpath) else {}
data["diagnose"] = {p: json.load(open(os.path.join(out, p + ".json"))) for p in ("small", "paper")}
for p in data["diagnose"].values():
    p.pop("cases", None) if len(p.get("cases", [])) > 200 else None
with open(jpath, "w") as f:
    json.dump(data, f, indent=1)
    f.write("\n")
PY
echo "diagnose_eval: wrote docs/results.md and docs/results.json" >&2
