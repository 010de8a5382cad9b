#!/usr/bin/env bash
# Real processes with real faults under `teller record` (scripts/real_drill.py): every
# case over --repeats runs (default 5), the table written to docs/results.md between the
# real-drill markers and every run to docs/results.json ("real_drill"). Needs root for
# the memory cgroup and the network namespace (those cases are skipped, and say so,
# without it) and Debian's python3-torch (scripts/setup.sh installs it).
# Usage: scripts/real_drill.sh [--repeats N] [--cases a,b]   (after scripts/setup.sh build)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/teller ] || { echo "real_drill: build/teller missing; run scripts/setup.sh build" >&2; exit 1; }
table=$(mktemp) runs=$(mktemp)
trap 'rm -f "$table" "$runs"' EXIT
status=0
python3 scripts/real_drill.py --markdown "$table" --json "$runs" "$@" || status=$?
python3 - "$table" "$runs" <<'PY'
import json, re, sys
table, runs = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
path = "docs/results.md"
text = open(path).read()
begin, end = "<!-- real-drill:begin -->", "<!-- real-drill:end -->"
block = begin + "\n" + table + end
if begin in text:
    text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
else:
    text += "\n## Real drill: real processes, real faults\n\n" + block + "\n"
open(path, "w").write(text)
results = json.load(open("docs/results.json"))
results["real_drill"] = runs
json.dump(results, open("docs/results.json", "w"), indent=1)
open("docs/results.json", "a").write("\n")
PY
exit $status
