"""End to end: `teller diagnose FILE` from the raw file to the written JSON, per phase.

Usage: python3 bench/e2e_bench.py TELLER BUILD_DIR REPEATS INPUT...
Each input is diagnosed REPEATS times (once when it is over 256 MB) with --timings and no
snapshot cache (the default learned model, as a user runs it the first time); prints one
JSON object per input: file size, events, the median of the process's wall time (start-up
and exit included), of the time --timings covers and of each phase, and the peak RSS of
the last run. Then, on the first input: a second diagnosis that reads its cached snapshot,
`teller import`, `teller build`, a diagnosis of that store, and two references: Python's
json.load and walk of the file (bench/python_json_walk.py; HTA's parse begins with it)
and a bare SQLite bulk insert of the rows `build` wrote (bench/sqlite_insert_floor). The
generated big Kineto file (kineto_*mb.json), when given, gets the same store rows: `teller
build --window-events 0` (the whole trace in one SaveTrace, as for the first input), a
diagnosis of that store and the bulk insert of its rows, each once.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


BIG_BYTES = 256 << 20


def run_once(argv, path, env):
    """One run of argv (with --timings): its timings and the child's own peak RSS (wait4)."""
    with tempfile.TemporaryFile(mode="w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env)
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


def size_of(path):
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
    return os.path.getsize(path)


def measure(label, path, repeats, argv_of, cache="none"):
    """Runs argv_of() REPEATS times with TELLER_CACHE_DIR=cache; one JSON line of medians."""
    env = dict(os.environ, TELLER_CACHE_DIR=cache)
    runs, rss_kb = [], 0
    size = size_of(path)
    for _ in range(1 if size > BIG_BYTES else repeats):
        timings, rss_kb = run_once(argv_of(), path, env)
        runs.append(timings)
    names = list(dict.fromkeys(name for r in runs for name in r["phases"]))
    phases = {n: statistics.median(r["phases"].get(n, 0.0) for r in runs) for n in names}
    return {"input": label, "bytes": size,
            "total_s": statistics.median(r["total_s"] for r in runs),
            "wall_s": statistics.median(r["wall_s"] for r in runs),
            "phases": phases, "peak_rss_kb": rss_kb}


def insert_floor(name, store, scratch, build_dir, repeats):
    """SQLite's bulk insert of the rows of store (bench/sqlite_insert_floor), median of runs."""
    floor = os.path.join(build_dir, "bench", "sqlite_insert_floor")
    inserts = [json.loads(subprocess.run([floor, store, os.path.join(scratch, "floor.db")],
                                         check=True, capture_output=True, text=True).stdout)
               for _ in range(repeats)]
    os.remove(os.path.join(scratch, "floor.db"))
    print(json.dumps({"reference": "sqlite bulk insert", "input": name, "rows": inserts[0]["rows"],
                      "seconds": statistics.median(i["seconds"] for i in inserts)}))


def references(first, store, scratch, build_dir, repeats):
    """Python's json.load of the first input and SQLite's bulk insert of its store's rows."""
    bench = os.path.dirname(os.path.abspath(__file__))
    walks = [json.loads(subprocess.run(["python3", os.path.join(bench, "python_json_walk.py"),
                                        first], check=True, capture_output=True,
                                       text=True).stdout) for _ in range(repeats)]
    print(json.dumps({"reference": "python json.load + walk",
                      "events": walks[0]["events"],
                      "seconds": statistics.median(w["seconds"] for w in walks)}))
    insert_floor(os.path.basename(first.rstrip("/")), store, scratch, build_dir, repeats)


def big_store_rows(teller, big, scratch, build_dir, out):
    """The store rows for the generated big file: build, a diagnosis of its store, the floor."""
    name = os.path.basename(big)
    store = os.path.join(scratch, "big.db")
    rows = [measure(label, big, 1, argv_of) for label, argv_of in [
        (f"teller build {name}", lambda: [teller, "build", big, "-o", store, "-q", "--timings",
                                          "--window-events", "0"]),
        (f"teller diagnose (its store) {name}",
         lambda: [teller, "diagnose", store, "--timings", "-q", "--json", out])]]
    for row in rows:
        row["events"] = json.load(open(out)).get("collection", {}).get("events", 0)
        print(json.dumps(row))
    insert_floor(name, store, scratch, build_dir, 1)
    os.remove(store)


def main():
    teller, build_dir, repeats, inputs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    scratch = tempfile.mkdtemp(prefix="e2e_bench_")
    out = os.path.join(scratch, "diagnosis.json")
    first_events = None
    for spec in inputs:
        # "threads1:PATH": the same input imported on one thread (--threads 1).
        one_thread = spec.startswith("threads1:")
        path = spec[len("threads1:"):] if one_thread else spec
        name = os.path.basename(path.rstrip("/")) + (" (--threads 1)" if one_thread else "")
        extra = ["--threads", "1"] if one_thread else []
        row = measure(name, path, repeats,
                      lambda: [teller, "diagnose", path, "--timings", "-q", "--json", out] + extra)
        row["events"] = json.load(open(out)).get("collection", {}).get("events", 0)
        first_events = row["events"] if first_events is None else first_events
        print(json.dumps(row))
    # The first input again: its cached snapshot, then what a store costs.
    first = inputs[0]
    name = os.path.basename(first.rstrip("/"))
    bundle, store = os.path.join(scratch, "bundle"), os.path.join(scratch, "trace.db")
    cache = os.path.join(scratch, "cache")
    diagnose_first = [teller, "diagnose", first, "--timings", "-q", "--json", out]
    subprocess.run(diagnose_first, check=True, capture_output=True,
                   env=dict(os.environ, TELLER_CACHE_DIR=cache))

    def fresh(argv, target):
        subprocess.run(["rm", "-rf", target], check=True)
        return argv
    for label, argv_of, cache_dir in [
            (f"teller diagnose {name} again (its snapshot)", lambda: diagnose_first, cache),
            (f"teller import {name}", lambda: fresh([teller, "import", first, "-o", bundle, "-q",
                                                     "--timings"], bundle), "none"),
            (f"teller build {name}", lambda: fresh([teller, "build", first, "-o", store, "-q",
                                                    "--timings"], store), "none"),
            ("teller diagnose (its store)", lambda: [teller, "diagnose", store, "--timings", "-q",
                                                     "--json", out], "none")]:
        row = measure(label, first, repeats, argv_of, cache_dir)
        row["events"] = first_events  # the first input's, as its diagnosis counted them
        print(json.dumps(row))
    references(first, store, scratch, build_dir, repeats)
    big = next((p for p in inputs if os.path.basename(p).startswith("kineto_")
                and p.endswith("mb.json")), None)
    if big:
        big_store_rows(teller, big, scratch, build_dir, out)
    subprocess.run(["rm", "-rf", scratch], check=True)


if __name__ == "__main__":
    main()
