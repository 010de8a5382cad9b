"""Starts the drill's ranks as torchrun does: one process per rank with RANK,
LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set, each pinned to one core.
When a rank fails, the others are stopped (SIGTERM) after a grace period, as torchrun's
agent does. (Debian's torchrun of torch 1.13 fails under Python 3.11 before it starts a
worker, so the drill carries this launcher.) Usage:
    drill_launch.py --nproc N [--grace S] [--netns NS --netns-rank R --master-addr A]
        -- drill_serve.py ARGS...
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--grace", type=float, default=5.0)
    parser.add_argument("--master-addr", default="127.0.0.1")
    parser.add_argument("--netns", default="", help="a network namespace for --netns-rank")
    parser.add_argument("--netns-rank", type=int, default=-1)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    port, cores = free_port(), os.cpu_count() or 1
    workers = []
    for rank in range(args.nproc):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(args.nproc),
                   LOCAL_WORLD_SIZE=str(args.nproc), MASTER_ADDR=args.master_addr,
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        prefix = []
        if args.netns:  # the veth pair: tdv1 in the namespace, tdv0 on the host
            in_netns = rank == args.netns_rank
            env["GLOO_SOCKET_IFNAME"] = "tdv1" if in_netns else "tdv0"
            prefix = ["ip", "netns", "exec", args.netns] if in_netns else []
        worker = subprocess.Popen(prefix + [sys.executable] + command, env=env)
        try:
            os.sched_setaffinity(worker.pid, {rank % cores})
        except OSError:
            pass
        workers.append(worker)
    failed_at = None
    while any(w.poll() is None for w in workers):
        if failed_at is None and any(w.returncode not in (None, 0) for w in workers):
            failed_at = time.monotonic()
        if failed_at is not None and time.monotonic() - failed_at > args.grace:
            for w in workers:
                if w.poll() is None:
                    w.send_signal(signal.SIGTERM)
        time.sleep(0.05)
    codes = [w.returncode for w in workers]
    print("drill_launch: exit codes %s" % codes, file=sys.stderr, flush=True)
    sys.exit(0 if all(c == 0 for c in codes) else 1)


if __name__ == "__main__":
    main()
