"""PyTorch DDP on CPU (gloo), the peer of bench/gpt_bench.cc: the same GPT (the module of
tests/pytorch/nano_gpt.py), data (the license texts as bytes, the same batch formula),
AdamW, global batch and world size 2, one process per rank, one thread each.

Prints "tokens_per_second". Run with Debian's python3-torch: /usr/bin/python3.
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "pytorch"))
import nano_gpt  # noqa: E402

CONFIG = {"vocab_size": 256, "block_size": 128, "n_layer": 4, "n_head": 4, "n_embd": 256,
          "bias": True, "gelu": "none"}
LICENSES = ["GPL-3", "GPL-2", "LGPL-2.1", "Apache-2.0", "GFDL-1.3", "MPL-2.0"]


def run(rank, world, warmup, steps, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DistributedDataParallel(nano_gpt.GPT(CONFIG))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    text = b"".join(open(f"/usr/share/common-licenses/{n}", "rb").read() for n in LICENSES)
    tokens = torch.tensor(list(text), dtype=torch.long)
    n, t, batch = tokens.numel(), CONFIG["block_size"], 16
    per_rank = batch // world
    timed = 0.0
    for step in range(warmup + steps):
        start = time.perf_counter()
        rows = []
        for j in range(rank * per_rank, (rank + 1) * per_rank):
            s = nano_gpt.sequence_start(0, step * batch + j, n, t)
            rows.append(tokens[s:s + t + 1])
        b = torch.stack(rows)
        optimizer.zero_grad(set_to_none=True)
        loss = model(b[:, :-1], b[:, 1:])
        loss.backward()
        optimizer.step()
        loss.item()
        if step >= warmup:
            timed += time.perf_counter() - start
    if rank == 0:
        with open(out, "w") as f:
            f.write(f"{steps * batch * t / timed:.1f}\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    warmup = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    out = f"/tmp/shardwise-gpt-ddp-{os.getpid()}.txt"
    mp.spawn(run, args=(2, warmup, steps, 29500 + os.getpid() % 1000, out), nprocs=2)
    with open(out) as f:
        print(f.read().strip())
