"""Renders the watch section of docs/benchmarks.md from bench/watch_bench.py's JSON."""
import datetime
import json
import os
import statistics
import sys

from machine import cpu_model

data = json.load(open(sys.argv[1]))
repeats = sys.argv[2]


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return "never"
    return f"{statistics.median(values):.2f} s (max {max(values):.2f})"


out = ["## Watch mode: detection latency and ring memory (issue 22)\n",
       f"`scripts/watch_bench.sh {repeats}` ({datetime.date.today().isoformat()}, {cpu_model()}, "
       f"{os.cpu_count()} cores), `bench/watch_bench.py`: `teller record --watch` (defaults: "
       "`--hang-after 5s`, 10x the longest earlier step) on `tests/data/watch_engine.py` (a fake "
       "SGLang scheduler, steps of ~6 ms) and `nvtx_test_program hang` (NVTX steps 1 ms apart). "
       "Latency runs from the fault (the program prints its clock) to the trigger line and to the "
       f"verdict line teller prints; median of {repeats} runs. Goal: <= 15 s.\n",
       "| fault | to trigger | to verdict | verdict |", "|---|---|---|---|"]
for row in data["latency"]:
    verdict = row["verdict"].replace("|", "/")
    out.append(f"| {row['fault']} | {spread(row['trigger_s'])} | {spread(row['verdict_s'])} | "
               f"`{verdict}` |")
out.append("")
out.append("Memory: `nvtx_test_program stream 10` (65 NVTX ranges per ~20 us step, back to back: "
           "millions of events a second) under `--watch` with each ring setting; the traced "
           "process's peak RSS, the largest ring its progress file reported, and what it wrote "
           "at exit.\n")
out.append("| --ring | --ring-mb | peak RSS | largest ring | written at exit |")
out.append("|---|---|---|---|---|")
for row in data["memory"]:
    out.append(f"| {row['ring']} | {row['ring_mb']} | {row['peak_rss_kb'] / 1024:.0f} MB | "
               f"{row['largest_ring_bytes'] / 1048576:.1f} MB | "
               f"{row['bytes_written_at_exit'] / 1048576:.1f} MB |")
print("\n".join(out))
