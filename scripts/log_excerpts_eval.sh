#!/usr/bin/env bash
# Scores `teller diagnose --logs` on the real log excerpts of tests/fixtures/log_excerpts
# (collected from public issue threads, labelled by hand, docs/signatures.md): category
# accuracy on incidents, false alarms on normal excerpts, per split (dev: used while the
# catalog was written; holdout: never looked at for it). Writes docs/results.md (between
# the log-excerpts markers) and docs/results.json ("log_excerpts").
# Usage: scripts/log_excerpts_eval.sh   (after scripts/setup.sh build)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/teller ] || { echo "log_excerpts_eval: build/teller missing; run scripts/setup.sh build" >&2; exit 1; }
python3 - <<'PY'
import json, os, subprocess, collections, sys
root = "tests/fixtures/log_excerpts"
manifest = json.load(open(os.path.join(root, "manifest.json")))
cases = []
for e in manifest["excerpts"]:
    path = os.path.join(root, e["file"])
    run = subprocess.run(["build/teller", "diagnose", "--logs", "--json", "-", "--learned-model", "none",
                          "-q", path], capture_output=True, text=True)
    if run.returncode != 0:
        got = {"verdict": "error", "category": "none", "signature": None,
               "error": run.stderr.strip().splitlines()[-1] if run.stderr.strip() else str(run.returncode)}
    else:
        d = json.loads(run.stdout)
        logs = d.get("log_evidence", [])
        first = next((l for l in logs if l.get("first_cause")), None)
        got = {"verdict": d.get("verdict", "?"), "category": d.get("category", "none"),
               "signature": first["signature"] if first else None}
    cases.append({**e, "got": got})

def table(split):
    part = [c for c in cases if c.get("split") == split]
    incidents = [c for c in part if c["category"] != "normal"]
    normal = [c for c in part if c["category"] == "normal"]
    right = sum(c["got"]["category"] == c["category"] for c in incidents)
    alarms = sum(c["got"]["verdict"] not in ("healthy",) for c in normal)
    refused = sum(c["got"]["verdict"] == "error" for c in part)
    verdict = sum(c["got"]["verdict"] == c["verdict"] for c in part)
    by_cat = collections.OrderedDict()
    for cat in ("memory_resource", "cuda_kernel", "runtime_driver", "communication_network",
                "scheduling_software"):
        cs = [c for c in incidents if c["category"] == cat]
        by_cat[cat] = (sum(c["got"]["category"] == cat for c in cs), len(cs),
                       collections.Counter(c["got"]["category"] for c in cs if c["got"]["category"] != cat))
    return {"excerpts": len(part), "incidents": len(incidents), "category_right": right,
            "normal": len(normal), "false_alarms": alarms, "refused": refused,
            "verdict_right": verdict, "by_category": by_cat}

def pct(a, b):
    return f"{a}/{b} ({100.0 * a / b:.0f}%)" if b else "-"

results = {s: table(s) for s in ("dev", "holdout")}
lines = ["| part | excerpts | category right (incidents) | false alarms (normal) | verdict right | refused as a trace |",
         "| --- | --- | --- | --- | --- | --- |"]
for s, r in results.items():
    lines.append(f"| {s} | {r['excerpts']} | {pct(r['category_right'], r['incidents'])} | "
                 f"{pct(r['false_alarms'], r['normal'])} | {pct(r['verdict_right'], r['excerpts'])} | {r['refused']} |")
lines += ["", "Per category (held-out part; what the misses were read as):", "",
          "| category | right | misread as |", "| --- | --- | --- |"]
for cat, (right, n, wrong) in results["holdout"]["by_category"].items():
    lines.append(f"| {cat} | {pct(right, n)} | {', '.join(f'{k} x{v}' for k, v in wrong.most_common()) or '-'} |")
misses = [c for c in cases if c["split"] == "holdout" and
          ((c["category"] == "normal" and c["got"]["verdict"] != "healthy") or
           (c["category"] != "normal" and c["got"]["category"] != c["category"]))]
lines += ["", f"Held-out misses ({len(misses)}):", ""]
for c in misses:
    lines.append(f"- `{c['id']}` ({c['category']}): read {c['got']['verdict']} / {c['got']['category']}"
                 f" by {c['got']['signature'] or 'no signature'}")
engines = collections.Counter(c["engine"] for c in cases)
block = (f"{len(cases)} excerpts ({', '.join(f'{k} {v}' for k, v in engines.most_common())}) from public "
         "issue threads, each cited in `tests/fixtures/log_excerpts/manifest.json` and labelled with the "
         "cause the thread established; `scripts/log_excerpts_eval.sh` runs `teller diagnose --logs` on "
         "each. The split is fixed by the excerpt id (docs/signatures.md); the held-out part was not "
         "read while the catalog was written.\n\n" + "\n".join(lines))
sys.path.insert(0, "scripts")
from doc_section import write_section
write_section("docs/results.md", "log-excerpts", "Logs alone: real excerpts from public threads", block)
jpath = "docs/results.json"
data = json.load(open(jpath))
data["log_excerpts"] = {"summary": {s: {k: v for k, v in r.items() if k != "by_category"}
                                    for s, r in results.items()},
                        "cases": [{"id": c["id"], "split": c["split"], "label": c["category"],
                                   "got": c["got"]} for c in cases]}
with open(jpath, "w") as f:
    json.dump(data, f, indent=1)
    f.write("\n")
print("\n".join(lines[:4]))
PY
echo "log_excerpts_eval: wrote docs/results.md and docs/results.json" >&2
