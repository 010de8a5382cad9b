"""A two-process PyTorch job as torch.multiprocessing.spawn starts it: no RANK,
WORLD_SIZE or other launcher variable in the environment. Each process joins a gloo
group on localhost with rank 1 - i (against the order the processes start in) and runs
three steps, train_step, which python_hook_test hooks as STEP (torch_spawn_hooks.txt):
the hooks must report each process's group rank. Run with the real torch (CPU only):

    python3 -c 'import torch_spawn_job; torch_spawn_job.main()'   # tests/data on PYTHONPATH
"""
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD_SIZE = 2


def train_step(x):
    dist.all_reduce(x)
    return x


def _worker(i, port):
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=WORLD_SIZE - 1 - i, world_size=WORLD_SIZE)
    x = torch.ones(4)
    for _ in range(3):
        x = train_step(x)
    print("process %d: group rank %d, sum %d" % (i, dist.get_rank(), int(x.sum())), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_worker, args=(port,), nprocs=WORLD_SIZE)
    print("spawned %d" % WORLD_SIZE)
