"""Entry point of a drill rank, started by torchrun (RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT in the environment). Usage:
    torchrun --nproc_per_node 2 drill_serve.py --steps 40 [--fault KIND --fault-rank R
        --fault-steps A:B --amount X]
KIND: stall (X ms before the rank's work), compute (X times the layer work), hang,
kill (SIGKILL), exception, oom (hoards memory in a memory cgroup, --cgroup, until the
OOM killer ends it), net_slow (the rank's veth shaped to X Mbit/s, in a namespace).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from drill_engine import DecodeEngine, Fault  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--fault", default="none")
    parser.add_argument("--fault-rank", type=int, default=-1)
    parser.add_argument("--fault-steps", default="0:-1")
    parser.add_argument("--amount", type=float, default=0.0)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--cgroup", default="", help="oom: the memory cgroup to make and enter")
    return parser.parse_args()


def main():
    args = parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    first, last = (int(v) for v in args.fault_steps.split(":"))
    engine = DecodeEngine(rank, world_size, Fault(args.fault, args.fault_rank, first, last, args.amount,
                                                    args.cgroup),
                          hidden=args.hidden)
    dist.barrier()
    for step in range(args.steps):
        engine.step(engine.batch_of(step), step)
    dist.barrier()
    dist.destroy_process_group()
    print("rank %d: %d steps" % (rank, args.steps), flush=True)


if __name__ == "__main__":
    main()
