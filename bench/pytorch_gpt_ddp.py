"""PyTorch DDP on CPU (gloo), the peer of bench/gpt_bench.cc: the same GPT (the module of
tests/pytorch/nano_gpt.py), data (the license texts as bytes, the same batch formula),
AdamW, global batch and world size (2 unless given), one process per rank, one thread each.

usage: pytorch_gpt_ddp.py [WARMUP_STEPS] [TIMED_STEPS] [WORLD]
Prints "tokens_per_second". Run with Debian's python3-torch: /usr/bin/python3.
"""
import os
import sys

import torch
from torch.nn.parallel import DistributedDataParallel

from ddp_timing import timed_seconds_per_step

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "pytorch"))
import nano_gpt  # noqa: E402

CONFIG = {"vocab_size": 256, "block_size": 128, "n_layer": 4, "n_head": 4, "n_embd": 256,
          "bias": True, "gelu": "none"}
LICENSES = ["GPL-3", "GPL-2", "LGPL-2.1", "Apache-2.0", "GFDL-1.3", "MPL-2.0"]
BATCH = 16


def setup(rank, world):
    model = DistributedDataParallel(nano_gpt.GPT(CONFIG))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    text = b"".join(open(f"/usr/share/common-licenses/{n}", "rb").read() for n in LICENSES)
    tokens = torch.tensor(list(text), dtype=torch.long)
    n, t = tokens.numel(), CONFIG["block_size"]
    per_rank = BATCH // world

    def step(index):
        rows = []
        for j in range(rank * per_rank, (rank + 1) * per_rank):
            start = nano_gpt.sequence_start(0, index * BATCH + j, n, t)
            rows.append(tokens[start:start + t + 1])
        batch = torch.stack(rows)
        optimizer.zero_grad(set_to_none=True)
        loss = model(batch[:, :-1], batch[:, 1:])
        loss.backward()
        optimizer.step()
        loss.item()

    return step


if __name__ == "__main__":
    warmup = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    world = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    seconds = timed_seconds_per_step(setup, warmup, steps, world)
    print(f"{BATCH * CONFIG['block_size'] / seconds:.1f}")
