"""`teller record --watch`: detection latency from fault to verdict, and the ring's memory.

Usage: python3 bench/watch_bench.py TELLER NVTX_TEST_PROGRAM [REPEATS]
Prints one JSON object: per fault, the seconds from the fault (the program prints its
CLOCK_REALTIME) to the trigger line and to the verdict line teller printed; per ring
setting, the traced process's peak RSS and the largest ring its progress file showed.
"""
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERDICTS = ("FAILED", "DEGRADED", "HEALTHY", "UNDETERMINED")


def run_fault(teller, command, kill_after_verdict):
    """Runs the command under --watch; returns (trigger s, verdict s, verdict line)."""
    folder = tempfile.mkdtemp(prefix="watch_bench_")
    argv = [teller, "record", "--watch", "--no-cupti", "-o", folder + "/run", "--"] + command
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, text=True)
    fault_ns = trigger_ns = verdict_ns = None
    verdict = ""
    deadline = time.time() + 60
    for line in proc.stdout:
        now = time.time_ns()
        words = line.split()
        if line.startswith(("watch-engine fault", "nvtx-test-program hang")) and words[-1].isdigit():
            fault_ns = int(words[-1])
        if line.startswith("teller: watch:") and trigger_ns is None:
            trigger_ns = now
        if line.startswith(VERDICTS) and verdict_ns is None:
            verdict_ns, verdict = now, line.strip()
            if kill_after_verdict:
                os.killpg(proc.pid, signal.SIGKILL)
        if time.time() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    seconds = lambda ns: None if ns is None or fault_ns is None else (ns - fault_ns) / 1e9
    return seconds(trigger_ns), seconds(verdict_ns), verdict


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def peak_rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_memory(teller, program, seconds, ring, ring_mb):
    """Peak RSS of the traced program and the largest ring it reported."""
    folder = tempfile.mkdtemp(prefix="watch_bench_mem_")
    argv = [teller, "record", "--watch", "--no-cupti", "--ring", ring, "--ring-mb", str(ring_mb),
            "-o", folder + "/run", "--", program, "stream", str(seconds)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rss_kb, ring_bytes = 0, 0
    while proc.poll() is None:
        for child in children(proc.pid):
            rss_kb = max(rss_kb, peak_rss_kb(child))
        for path in glob.glob(folder + "/run/proc-*/progress"):
            try:
                for line in open(path):
                    if line.startswith("ring_bytes"):
                        ring_bytes = max(ring_bytes, int(line.split()[1]))
            except OSError:
                pass
        time.sleep(0.2)
    written = sum(os.path.getsize(p) for p in glob.glob(folder + "/run/proc-*/*.bin"))
    return {"ring": ring, "ring_mb": ring_mb, "seconds": seconds, "peak_rss_kb": rss_kb,
            "largest_ring_bytes": ring_bytes, "bytes_written_at_exit": written}


def main():
    teller, program = sys.argv[1], sys.argv[2]
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    engine = [sys.executable, os.path.join(REPO, "tests/data/watch_engine.py"), "--seconds", "2"]
    faults = [("python step hang", engine + ["--fault", "hang"], True),
              ("python CUDA error", engine + ["--fault", "cuda_error"], False),
              ("python segfault", engine + ["--fault", "segfault"], False),
              ("native NVTX step hang", [program, "hang", "2"], True)]
    latency = []
    for name, command, kill in faults:
        runs = [run_fault(teller, command, kill) for _ in range(repeats)]
        latency.append({"fault": name, "trigger_s": [r[0] for r in runs],
                        "verdict_s": [r[1] for r in runs], "verdict": runs[-1][2]})
    memory = [run_memory(teller, program, 10, "60s", 16), run_memory(teller, program, 10, "60s", 64),
              run_memory(teller, program, 10, "2s", 64)]
    print(json.dumps({"latency": latency, "memory": memory}))


if __name__ == "__main__":
    main()
