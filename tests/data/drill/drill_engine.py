"""A small tensor-parallel transformer decode loop on CPU, for scripts/real_drill.sh.

Each rank holds a shard of every layer; a step runs the layers and, after each, a gloo
all-reduce of the activations, as tensor-parallel decode does. The fault, when one is
asked for, is real: it happens in this process, on this rank, in the steps named.
The labels are what the drill did, written by drill_serve.py.
"""
import os
import signal
import subprocess
import time

import torch
import torch.distributed as dist


class Batch:
    def __init__(self, request_ids, phase):
        self.request_ids = request_ids
        self.phase = phase


class Fault:
    """kind on rank `rank` for steps [first, last] (amount: ms of a stall or a link delay,
    the compute's multiple; cgroup: where an OOM fault makes its memory cgroup)."""

    def __init__(self, kind="none", rank=-1, first=0, last=-1, amount=0.0, cgroup=""):
        self.kind, self.rank, self.first, self.last, self.amount = kind, rank, first, last, amount
        self.cgroup = cgroup

    def active(self, rank, step):
        return self.kind != "none" and rank == self.rank and self.first <= step <= self.last


class TensorParallelLayer(torch.nn.Module):
    def __init__(self, hidden, shards):
        super().__init__()
        self.up = torch.nn.Linear(hidden, 4 * hidden // shards)
        self.down = torch.nn.Linear(4 * hidden // shards, hidden)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x)))


class DecodeEngine:
    def __init__(self, rank, world_size, fault, hidden=512, layers=4, batch_size=8):
        torch.manual_seed(0)
        self.rank, self.world_size, self.fault = rank, world_size, fault
        self.layers = [TensorParallelLayer(hidden, world_size) for _ in range(layers)]
        self.x = torch.randn(batch_size, hidden)
        self.batch_size = batch_size
        self.started = time.monotonic()

    def batch_of(self, step):
        first = step * self.batch_size
        return Batch(["req-%d" % (first + i) for i in range(self.batch_size)], "decode")

    def step(self, batch, step_index):
        faulty = self.fault.active(self.rank, step_index)
        if self.fault.kind == "net_slow" and self.rank == self.fault.rank:
            if step_index == self.fault.first:
                set_link_rate("%gmbit" % self.fault.amount)
            elif step_index == self.fault.last + 1:
                set_link_rate(None)
        if faulty and step_index == self.fault.first:
            note_fault_time()
        if faulty:
            self._before_work(step_index)
        x = self.x
        with torch.no_grad():
            for layer in self.layers:
                y = layer(x)
                if faulty and self.fault.kind == "compute":
                    for _ in range(int(self.fault.amount) - 1):
                        y = layer(x)
                dist.all_reduce(y)
                x = torch.tanh(y / self.world_size)
        return len(batch.request_ids)

    def _before_work(self, step_index):
        kind = self.fault.kind
        if kind == "stall":
            time.sleep(self.fault.amount / 1000.0)
        elif kind == "hang":
            while True:
                time.sleep(1.0)
        elif kind == "kill":
            # A served process killed mid-flight has run for long: at least one timed flush
            # of the collector (200 ms) has written its events, on a fast machine too.
            time.sleep(max(0.0, 0.5 - (time.monotonic() - self.started)))
            os.kill(os.getpid(), signal.SIGKILL)
        elif kind == "exception":
            raise RuntimeError("drill: bad input in step %d" % step_index)
        elif kind == "oom":
            enter_memory_cgroup(self.fault.cgroup, headroom=64 << 20)
            hoard = []
            while True:  # the memory cgroup's OOM killer ends this
                hoard.append(torch.ones(16 * 1024 * 1024, dtype=torch.uint8))


def note_fault_time():
    """When the fault began, for the drill's time from fault to verdict."""
    path = os.environ.get("DRILL_FAULT_CLOCK")
    if path:
        with open(path, "w") as out:
            out.write("%.6f\n" % time.time())


def set_link_rate(rate):
    """This rank's side of its veth pair (the drill runs it in a network namespace): a
    token bucket shapes what it sends to rate (a degraded link, a noisy neighbour);
    None puts back a plain FIFO, no shaping."""
    shaping = ["tbf", "rate", rate, "burst", "32kbit", "latency", "200ms"] if rate else ["pfifo"]
    subprocess.Popen(["tc", "qdisc", "replace", "dev", "tdv1", "root"] + shaping)


def resident_bytes():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def enter_memory_cgroup(path, headroom):
    """A memory cgroup (v1 or v2) limited to what this process holds now plus headroom,
    as a container's limit would be; this process moves into it."""
    path = os.path.realpath(path)  # the drill hands a link to it
    os.makedirs(path, exist_ok=True)
    limit = str(resident_bytes() + headroom)
    for name in ("memory.limit_in_bytes", "memory.max"):
        if os.path.exists(os.path.join(path, name)):
            with open(os.path.join(path, name), "w") as out:
                out.write(limit)
    for name in ("memory.memsw.limit_in_bytes", "memory.swap.max"):  # no swapping out of it
        if os.path.exists(os.path.join(path, name)):
            try:
                with open(os.path.join(path, name), "w") as out:
                    out.write(limit if name.startswith("memory.memsw") else "0")
            except OSError:
                pass
    with open(os.path.join(path, "cgroup.procs"), "w") as out:
        out.write(str(os.getpid()))
