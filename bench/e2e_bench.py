"""End to end: `teller diagnose FILE` from the raw file to the written JSON, per phase.

Usage: python3 bench/e2e_bench.py TELLER REPEATS INPUT...
Each input is diagnosed REPEATS times with --timings (the default learned model, as a
user runs it); prints one JSON object per input: file size, events, the median of the
process's wall time (start-up and exit included), of the time --timings covers and of
each phase, and the peak RSS of the last run.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run_once(argv, path):
    """One run of argv (with --timings): its timings and the child's own peak RSS (wait4)."""
    with tempfile.TemporaryFile(mode="w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        _, _, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = 0
        err.seek(0)
        text = err.read()
    line = next((l for l in text.splitlines() if l.startswith("teller: timings ")), None)
    if line is None:
        raise SystemExit(f"e2e_bench: no timings from {path}: {text[-500:]}")
    timings = json.loads(line[len("teller: timings "):])
    timings["wall_s"] = wall
    return timings, usage.ru_maxrss


def measure(label, path, repeats, argv_of):
    """Runs argv_of() REPEATS times; one JSON line of medians."""
    runs, rss_kb = [], 0
    for _ in range(repeats):
        timings, rss_kb = run_once(argv_of(), path)
        runs.append(timings)
    names = list(dict.fromkeys(name for r in runs for name in r["phases"]))
    phases = {n: statistics.median(r["phases"].get(n, 0.0) for r in runs) for n in names}
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs) \
        if os.path.isdir(path) else os.path.getsize(path)
    return {"input": label, "bytes": size,
            "total_s": statistics.median(r["total_s"] for r in runs),
            "wall_s": statistics.median(r["wall_s"] for r in runs),
            "phases": phases, "peak_rss_kb": rss_kb}


def main():
    teller, repeats, inputs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    scratch = tempfile.mkdtemp(prefix="e2e_bench_")
    out = os.path.join(scratch, "diagnosis.json")
    first_events = None
    for path in inputs:
        name = os.path.basename(path.rstrip("/"))
        row = measure(name, path, repeats,
                      lambda: [teller, "diagnose", path, "--timings", "-q", "--json", out])
        row["events"] = json.load(open(out)).get("collection", {}).get("events", 0)
        first_events = row["events"] if first_events is None else first_events
        print(json.dumps(row))
    # What a store costs: import and build of the first input, then diagnosing the store.
    first = inputs[0]
    name = os.path.basename(first.rstrip("/"))
    bundle, store = os.path.join(scratch, "bundle"), os.path.join(scratch, "trace.db")

    def fresh(argv, target):
        subprocess.run(["rm", "-rf", target], check=True)
        return argv
    for label, argv_of in [
            (f"teller import {name}", lambda: fresh([teller, "import", first, "-o", bundle, "-q",
                                                     "--timings"], bundle)),
            (f"teller build {name}", lambda: fresh([teller, "build", first, "-o", store, "-q",
                                                    "--timings"], store)),
            (f"teller diagnose (its store)", lambda: [teller, "diagnose", store, "--timings", "-q",
                                                     "--json", out])]:
        row = measure(label, first, repeats, argv_of)
        row["events"] = first_events  # the first input's, as its diagnosis counted them
        print(json.dumps(row))


if __name__ == "__main__":
    main()
