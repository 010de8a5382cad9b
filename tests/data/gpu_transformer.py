"""GPU workload for tests/gpu/run.sh: 4 requests, one prefill step, 32 decode steps,
then (when more than one GPU process group can be made) an all-reduce through NCCL on
one GPU. Prints the wall time of the serving loop as JSON."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_engine"))

import torch  # noqa: E402

from toy_gpu_engine import Batch, ToyGpuEngine  # noqa: E402


def main():
    engine = ToyGpuEngine()
    ids = ["req-%d" % i for i in range(4)]
    tokens = torch.randint(0, 4096, (4, 128), device="cuda")
    torch.cuda.synchronize()
    start = time.perf_counter()
    tokens = engine.step(Batch(ids, "prefill", tokens))
    for _ in range(32):
        tokens = engine.step(Batch(ids, "decode", tokens))
    torch.cuda.synchronize()
    wall = time.perf_counter() - start
    nccl = False
    try:
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("nccl", rank=0, world_size=1)
        x = torch.ones(1 << 20, device="cuda")
        dist.all_reduce(x)
        torch.cuda.synchronize()
        dist.destroy_process_group()
        nccl = True
    except Exception as error:  # NCCL is optional here
        print("nccl skipped: %r" % (error,), file=sys.stderr)
    print(json.dumps({"serving_wall_s": round(wall, 4), "tokens": tokens.shape[1], "nccl": nccl}))


if __name__ == "__main__":
    main()
