"""PyTorch DDP on CPU (gloo), the peer of bench/training_bench.cc: the same model, loss,
optimizer, global batch and world size, one process per rank, one thread each.

Prints "steps_per_second". Run with Debian's python3-torch: /usr/bin/python3.
"""
import sys

import torch
from torch.nn.parallel import DistributedDataParallel

from ddp_timing import timed_seconds_per_step

WIDTHS = [1024, 4096, 4096, 1024]


def setup(rank, world):
    layers = []
    for i in range(len(WIDTHS) - 1):
        layers.append(torch.nn.Linear(WIDTHS[i], WIDTHS[i + 1]))
        if i + 2 < len(WIDTHS):
            layers.append(torch.nn.ReLU())
    model = DistributedDataParallel(torch.nn.Sequential(*layers))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.MSELoss()
    per_rank = 64 // world
    x = torch.randn(512, WIDTHS[0])
    y = torch.randn(512, WIDTHS[-1])

    def step(index):
        rows = torch.arange(index * 64 + rank * per_rank, index * 64 + (rank + 1) * per_rank) % 512
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(x[rows]), y[rows]).backward()
        optimizer.step()

    return step


if __name__ == "__main__":
    warmup = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    print(f"{1 / timed_seconds_per_step(setup, warmup, steps):.3f}")
