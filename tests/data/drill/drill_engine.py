"""A small tensor-parallel transformer decode loop on CPU, for scripts/real_drill.sh.

Each rank holds a shard of every layer; a step runs the layers and, after each, a gloo
all-reduce of the activations, as tensor-parallel decode does. The fault, when one is
asked for, is real: it happens in this process, on this rank, in the steps named.
The labels are what the drill did, written by drill_serve.py.
"""
import os
import signal
import time

import torch
import torch.distributed as dist


class Batch:
    def __init__(self, request_ids, phase):
        self.request_ids = request_ids
        self.phase = phase


class Fault:
    """kind on rank `rank` for steps [first, last]."""

    def __init__(self, kind="none", rank=-1, first=0, last=-1, amount=0.0):
        self.kind, self.rank, self.first, self.last, self.amount = kind, rank, first, last, amount

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

    def batch_of(self, step):
        first = step * self.batch_size
        return Batch(["req-%d" % (first + i) for i in range(self.batch_size)], "decode")

    def step(self, batch, step_index):
        faulty = self.fault.active(self.rank, step_index)
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
            os.kill(os.getpid(), signal.SIGKILL)
        elif kind == "exception":
            raise RuntimeError("drill: bad input in step %d" % step_index)
        elif kind == "oom":
            hoard = []
            while True:  # the memory cgroup's OOM killer ends this
                hoard.append(torch.ones(16 * 1024 * 1024, dtype=torch.uint8))
