"""A CPU-only engine-like program for `teller record` (no GPU, no vLLM needed).

It drives the fake vLLM v1 engine of tests/data/fake_engines (same qualified names as
vLLM's, so teller's default hooks wrap it): an EngineCore schedules five steps of
three requests, and two worker processes (multiprocessing, fork) run
GPUModelRunner.execute_model on each step's scheduler output, as vLLM's
multiprocessing executor does. It logs in vLLM's format with the request ids.

Usage: python3 toy_engine.py [--crash-worker]   (--crash-worker: rank 1 segfaults at
step 3 and the engine exits with status 3)
"""
import ctypes
import multiprocessing
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_engines"))

from vllm.v1.core.sched.scheduler import Scheduler  # noqa: E402
from vllm.v1.engine.core import EngineCore  # noqa: E402
from vllm.v1.worker.gpu_model_runner import GPUModelRunner  # noqa: E402

REQUESTS = {"a": "cmpl-a1b2c3d4e5f60718293a4b5c6d7e8f90-0",
            "b": "cmpl-0f1e2d3c4b5a69788796a5b4c3d2e1f0-0",
            "c": "cmpl-77777777777777777777777777777777-0"}
# (new, cached) per step: prefill a b; decode; c joins (mixed); decode; decode.
PLAN = [(["a", "b"], []), ([], ["a", "b"]), (["c"], ["a", "b"]), ([], ["a", "b", "c"]),
        ([], ["b", "c"])]
FINISHED_AFTER = {3: ["a"], 4: ["b", "c"]}


def log(level, where, message, prefix=""):
    stamp = time.strftime("%m-%d %H:%M:%S")
    # One write per line, as logging's StreamHandler does: processes share the pipe.
    sys.stdout.write("%s%s %s [%s] %s\n" % (prefix, level, stamp, where, message))
    sys.stdout.flush()


def spin(ms):
    end = time.monotonic() + ms / 1000.0
    while time.monotonic() < end:
        pass


def worker_main(rank, conn, crash_at):
    prefix = "(VllmWorker rank=%d pid=%d) " % (rank, os.getpid())
    log("INFO", "gpu_worker.py:112", "worker ready", prefix)
    runner = GPUModelRunner()
    step = 0
    while True:
        output = conn.recv()
        if output is None:
            break
        if step == crash_at and rank == 1:
            log("ERROR", "gpu_worker.py:200", "about to crash in execute_model", prefix)
            ctypes.string_at(0)  # SIGSEGV
        runner.execute_model(output)
        spin(3)
        conn.send(step)
        step += 1


class MultiprocRunner:
    """Stands in for vLLM's multiprocessing executor: each step goes to every worker."""

    def __init__(self, crash_at):
        context = multiprocessing.get_context("fork")
        self.conns, self.procs = [], []
        for rank in range(2):
            parent, child = context.Pipe()
            proc = context.Process(target=worker_main, args=(rank, child, crash_at), daemon=True)
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)

    def execute_model(self, scheduler_output):
        for conn in self.conns:
            conn.send(scheduler_output)
        return {"tokens": [conn.recv() for conn in self.conns]}

    def shutdown(self):
        for conn in self.conns:
            try:
                conn.send(None)
            except OSError:
                pass
        for proc in self.procs:
            proc.join(5)
        return [proc.exitcode for proc in self.procs]


def main():
    crash = "--crash-worker" in sys.argv
    plan = [([REQUESTS[k] for k in new], [REQUESTS[k] for k in cached]) for new, cached in PLAN]
    core = EngineCore(Scheduler(plan))
    core.runner = MultiprocRunner(crash_at=3 if crash else -1)
    log("INFO", "core.py:58", "Initializing a V1 LLM engine (v0.8.5) with config: model='toy'",
        "(EngineCore_0 pid=%d) " % os.getpid())
    for step, (new, _) in enumerate(PLAN):
        for key in new:
            log("INFO", "logger.py:39",
                "Received request %s: prompt: 'hello', params: SamplingParams(max_tokens=4)"
                % REQUESTS[key])
            log("INFO", "async_llm.py:270", "Added request %s." % REQUESTS[key])
        try:
            core.step()
        except EOFError:
            log("ERROR", "core.py:400", "EngineCore encountered a fatal error: worker died")
            core.runner.shutdown()
            sys.exit(3)
        for key in FINISHED_AFTER.get(step, []):
            log("INFO", "async_llm.py:410", "Finished request %s." % REQUESTS[key])
    codes = core.runner.shutdown()
    log("INFO", "launcher.py:80", "Shutting down; workers exited with %s" % codes)


if __name__ == "__main__":
    main()
