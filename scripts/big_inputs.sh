#!/usr/bin/env bash
# Bounded memory on big inputs (issue 8, item 3): generates Kineto JSON traces of the
# given sizes (bench/make_big_kineto.cc, the shape of the real vLLM trace), runs
# `teller import` and `teller build` on each under /usr/bin/time, and writes the
# table (size, events, peak RSS, seconds, MB/s) between the big-inputs markers of
# docs/benchmarks.md, plus docs/big_inputs.json for scripts/reliability.sh.
# Not part of the test suite: the 10 GB input takes minutes and ~12 GB of disk.
# Usage: scripts/big_inputs.sh [SIZE_MB...]          (default: 256 1024 2048 10240)
#        scripts/big_inputs.sh --render    (rewrite the docs from the last run's results.jsonl)
# Env: TELLER_BUILD_DIR (default build), TELLER_BIG_DATA (default $TELLER_BUILD_DIR/big-inputs),
#      TELLER_BIN (the teller to measure; default $TELLER_BUILD_DIR/teller, built here)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TELLER_BUILD_DIR:-build}
render_only=0
if [ "${1:-}" = "--render" ]; then
  render_only=1
  shift
fi
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(256 1024 2048 10240)
data=${TELLER_BIG_DATA:-$build/big-inputs}
mkdir -p "$data"
results=$data/results.jsonl
teller=${TELLER_BIN:-$build/teller}
if [ $render_only -eq 0 ]; then
  [ -x /usr/bin/time ] || { echo "big_inputs: needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
  if [ ! -f "$build/build.ninja" ]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  teller=${TELLER_BIN:-}
  if [ -z "$teller" ]; then
    cmake --build "$build" --target teller teller_make_big_kineto -j 2 >/dev/null
    teller=$build/teller
  else
    cmake --build "$build" --target teller_make_big_kineto -j 2 >/dev/null
  fi
  : >"$results"
  cleanup() { rm -rf "$data"/big_*; }
  trap cleanup EXIT

  measure() {  # label command... -> {"seconds":..,"peak_rss_kb":..}
    local label=$1
    shift
    local timing=$data/time.txt
    if ! /usr/bin/time -f '%e %M' -o "$timing" "$@" >"$data/out.txt" 2>"$data/err.txt"; then
      echo "big_inputs: $label failed:" >&2
      tail -5 "$data/err.txt" >&2
      exit 1
    fi
    read -r seconds rss_kb <"$timing"
    echo "{\"seconds\":$seconds,\"peak_rss_kb\":$rss_kb}"
  }

  # What the binary holds before reading anything (shared libraries, libtorch).
  baseline=$(measure "teller --version" "$teller" --version)
  window_events=${TELLER_WINDOW_EVENTS:-1000000}
  for mb in "${sizes[@]}"; do
    input=$data/big_${mb}mb.json
    echo "big_inputs: generating $mb MB" >&2
    gen=$("$build/bench/teller_make_big_kineto" "$input" "$mb")
    for mode in whole windowed; do
      if [ $mode = whole ]; then window=0; suffix=""; else window=$window_events; suffix="_windowed"; fi
      echo "big_inputs: teller import $mb MB ($mode)" >&2
      run=$(measure "import $mb MB $mode" "$teller" import "$input" -o "$data/big_imported" --window-events $window)
      eval "run_import$suffix=\$run"
      store_bytes=$(stat -c %s "$data/big_imported/trace.db")
      rm -rf "$data/big_imported"
      echo "big_inputs: teller build $mb MB ($mode)" >&2
      run=$(measure "build $mb MB $mode" "$teller" build "$input" -o "$data/big_store.db" --window-events $window)
      eval "run_build$suffix=\$run"
      windows=$(grep -o 'in [0-9]* windows' "$data/err.txt" | grep -o '[0-9]*' || echo 1)
      rm -f "$data/big_store.db"
    done
    rm -f "$input"
    echo "{\"size_mb\":$mb,\"generate\":$gen,\"import\":$run_import,\"build\":$run_build,\"import_windowed\":$run_import_windowed,\"build_windowed\":$run_build_windowed,\"windows\":$windows,\"window_events\":$window_events,\"baseline\":$baseline,\"store_bytes\":$store_bytes,\"teller\":\"$teller\"}" >>"$results"
  done

fi
python3 - "$results" <<'EOF'
import datetime, json, os, platform, re, sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
cpu = "unknown CPU"
try:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
except OSError:
    pass
mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
facts = {
    "date": datetime.date.today().isoformat(),
    "machine": f"{cpu}, {os.cpu_count()} cores, {mem_gb:.0f} GB",
    "command": "scripts/big_inputs.sh " + " ".join(str(r["size_mb"]) for r in rows),
    "teller": rows[0].get("teller", "") if rows else "",
    "rows": rows,
}
json.dump(facts, open("docs/big_inputs.json", "w"), indent=1)

def mb(value):
    return f"{value / 1048576:,.0f} MB"

MODES = [("import", "`teller import`, whole"), ("build", "`teller build`, whole"),
         ("import_windowed", "`teller import`, windowed"),
         ("build_windowed", "`teller build`, windowed")]
table = ["| input | events | command | peak RSS | above `--version` | seconds | MB/s |",
         "|---|---|---|---|---|---|---|"]
for r in rows:
    size = r["generate"]["bytes"]
    events = r["generate"]["events"]
    base = r["baseline"]["peak_rss_kb"] * 1024
    for name, label in MODES:
        m = r[name]
        rss = m["peak_rss_kb"] * 1024
        table.append(
            f"| {mb(size)} | {events:,} | {label} | {mb(rss)} | {mb(rss - base)} | "
            f"{m['seconds']:.1f} | {size / 1048576 / max(m['seconds'], 1e-9):,.0f} |")
summary = []
if rows:
    w = rows[-1]
    summary.append(
        f"Windowed runs use windows of {w['window_events']:,} events (`--window-events`, the "
        f"default; the largest input made {w['windows']} windows). `teller --version` alone "
        f"peaks at {mb(w['baseline']['peak_rss_kb'] * 1024)} (shared libraries, libtorch).")
if len(rows) >= 2:
    small, large = rows[0], rows[-1]
    added = large["generate"]["events"] - small["generate"]["events"]
    size_ratio = large["generate"]["bytes"] / small["generate"]["bytes"]
    growth = {name: (large[name]["peak_rss_kb"] - small[name]["peak_rss_kb"]) * 1024 / added
              for name, _ in MODES}
    time_ratio = {name: large[name]["seconds"] / max(small[name]["seconds"], 1e-9)
                  for name, _ in MODES}
    facts["marginal_bytes_per_event"] = growth
    facts["time_ratio"] = time_ratio
    summary.append(
        f"From {mb(small['generate']['bytes'])} to {mb(large['generate']['bytes'])} "
        f"({size_ratio:.1f}x the size), peak RSS grows by {growth['build']:.0f} bytes per added "
        f"event for the whole `build` ({growth['import']:.0f} for `import`) and by "
        f"{growth['build_windowed']:.1f} ({growth['import_windowed']:.1f}) windowed: "
        f"{mb(large['build']['peak_rss_kb'] * 1024)} against "
        f"{mb(large['build_windowed']['peak_rss_kb'] * 1024)} at the largest input. Time grows "
        f"{time_ratio['build']:.1f}x whole and {time_ratio['build_windowed']:.1f}x windowed; "
        f"windowed takes {large['build_windowed']['seconds'] / max(large['build']['seconds'], 1e-9):.2f}x "
        "the whole build's time (it reads the JSON three times, plan, split and import, and a fourth to refine the cuts on a long trace).")
facts["table"] = table
facts["summary"] = summary
json.dump(facts, open("docs/big_inputs.json", "w"), indent=1)

lines = [
    "<!-- big-inputs:begin -->",
    "## Big Kineto inputs: bounded memory (issue 8)",
    "",
    f"Produced by `{facts['command']}` on {facts['date']} ({facts['machine']}); do not edit",
    "between the markers by hand. Inputs from `bench/make_big_kineto.cc` (the real vLLM",
    "trace's shape: python_function, cpu_op, cuda_runtime, kernel, gpu_memcpy, ac2g flows,",
    "user annotations; pretty-printed like the profiler), deleted after each run. Peak RSS",
    "and seconds from `/usr/bin/time` around the whole command; `import` writes the imported",
    "bundle (`trace.db`), `build` imports, reconstructs and writes the store. Whole runs",
    "(`--window-events 0`) hold the trace in memory; windowed runs import, reconstruct and",
    "write one time window at a time (docs/reliability.md, \"Memory on big inputs\").",
    "",
] + table + [""] + summary
gen_rates = " / ".join(f"{r['generate']['megabytes_per_second']:,.0f}" for r in rows)
lines += [
    "",
    f"The generator wrote {gen_rates} MB/s (small files land in the page cache; the largest",
    "waits on the disk).",
    "<!-- big-inputs:end -->",
]
block = "\n".join(lines) + "\n"
path = "docs/benchmarks.md"
text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
begin, end = "<!-- big-inputs:begin -->", "<!-- big-inputs:end -->"
if begin in text and end in text:
    text = text[: text.index(begin)] + block + text[text.index(end) + len(end) + 1 :]
else:
    text = text.rstrip("\n") + "\n\n" + block
open(path, "w").write(text)
print(block)
EOF
echo "big_inputs: wrote docs/benchmarks.md (big-inputs section) and docs/big_inputs.json" >&2
