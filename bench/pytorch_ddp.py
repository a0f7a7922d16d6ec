"""PyTorch DDP on CPU (gloo), the peer of bench/training_bench.cc: the same model, loss,
optimizer, global batch and world size, one process per rank, one thread each.

Prints "steps_per_second". Run with Debian's python3-torch: /usr/bin/python3.
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel


def run(rank, world, warmup, steps, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    widths = [1024, 4096, 4096, 1024]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    model = DistributedDataParallel(torch.nn.Sequential(*layers))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.MSELoss()
    per_rank = 64 // world
    x = torch.randn(512, widths[0])
    y = torch.randn(512, widths[-1])
    timed = 0.0
    for step in range(warmup + steps):
        start = time.perf_counter()
        rows = torch.arange(step * 64 + rank * per_rank, step * 64 + (rank + 1) * per_rank) % 512
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x[rows]), y[rows])
        loss.backward()
        optimizer.step()
        if step >= warmup:
            timed += time.perf_counter() - start
    if rank == 0:
        with open(out, "w") as f:
            f.write(f"{steps / timed:.3f}\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    warmup = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    out = f"/tmp/shardwise-ddp-{os.getpid()}.txt"
    mp.spawn(run, args=(2, warmup, steps, 29500 + os.getpid() % 1000, out), nprocs=2)
    with open(out) as f:
        print(f.read().strip())
