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


def run_once(teller, path, out):
    """One diagnosis: its --timings and the child's own peak RSS (wait4)."""
    with tempfile.TemporaryFile(mode="w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen([teller, "diagnose", path, "--timings", "-q", "--json", out],
                                stdout=subprocess.DEVNULL, stderr=err)
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


def main():
    teller, repeats, inputs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    out = os.path.join(tempfile.mkdtemp(prefix="e2e_bench_"), "diagnosis.json")
    for path in inputs:
        runs, rss_kb = [], 0
        for _ in range(repeats):
            timings, rss_kb = run_once(teller, path, out)
            runs.append(timings)
        events = json.load(open(out)).get("collection", {}).get("events", 0)
        names = list(dict.fromkeys(name for r in runs for name in r["phases"]))
        phases = {n: statistics.median(r["phases"].get(n, 0.0) for r in runs) for n in names}
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs) \
            if os.path.isdir(path) else os.path.getsize(path)
        print(json.dumps({"input": os.path.basename(path.rstrip("/")), "bytes": size,
                          "events": events, "total_s": statistics.median(r["total_s"] for r in runs),
                          "wall_s": statistics.median(r["wall_s"] for r in runs),
                          "phases": phases, "peak_rss_kb": rss_kb}))


if __name__ == "__main__":
    main()
