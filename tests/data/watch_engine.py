"""A CPU-only engine for `teller record --watch` (no GPU, no SGLang needed).

It drives the fake SGLang scheduler of tests/data/fake_engines (teller's default hooks
wrap Scheduler.run_batch as the engine step): steps of about 5 ms for --seconds, then
the fault, then (for "idle") seconds without a step before a clean exit. Before the
fault it prints "watch-engine fault <name> <CLOCK_REALTIME ns>" so that a test or a
benchmark can time the detection.

Usage: python3 watch_engine.py --fault none|idle|hang|cuda_error|segfault [--seconds S]
"""
import argparse
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_engines"))

from sglang.srt.managers.scheduler import ForwardMode, ScheduleBatch, Scheduler  # noqa: E402


def spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def hang(batch):
    time.sleep(3600)  # a collective that never completes


def cuda_error(batch):
    raise RuntimeError("CUDA error: an illegal memory access was encountered\n"
                       "CUDA kernel errors might be asynchronously reported at some other API "
                       "call, so the stacktrace below might be incorrect.")


def segfault(batch):
    ctypes.string_at(0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fault", default="none",
                        choices=["none", "idle", "hang", "cuda_error", "segfault"])
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    scheduler = Scheduler()
    scheduler.work = lambda batch: spin(0.005)
    step = 0
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        rids = ["req-%d" % (step // 4), "req-%d" % (step // 4 + 1)]
        scheduler.run_batch(ScheduleBatch(rids, ForwardMode.DECODE))
        step += 1
        time.sleep(0.001)
    print("watch-engine fault %s %d" % (args.fault, time.time_ns()), flush=True)
    if args.fault == "idle":
        time.sleep(2.5)  # waiting for requests: no step open
        return 0
    faults = {"hang": hang, "cuda_error": cuda_error, "segfault": segfault}
    if args.fault in faults:
        scheduler.work = faults[args.fault]
        scheduler.run_batch(ScheduleBatch(["req-last"], ForwardMode.DECODE))
    return 0


if __name__ == "__main__":
    sys.exit(main())
