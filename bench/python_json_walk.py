"""The common way: Python's json module loads the trace and walks every event.
Prints one JSON line: {"events": N, "seconds": S, "peak_rss_bytes": B}."""
import gzip
import json
import resource
import sys
import time

start = time.perf_counter()
opener = gzip.open if sys.argv[1].endswith(".gz") else open
with opener(sys.argv[1], "rb") as f:
    doc = json.load(f)
checksum = 0
events = 0
for event in doc["traceEvents"]:
    checksum += len(event.get("ph", "")) + len(event.get("name", ""))
    checksum += int(event.get("ts", 0) or 0) + int(event.get("dur", 0) or 0)
    events += 1
seconds = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"events": events, "seconds": seconds, "peak_rss_bytes": rss}))
