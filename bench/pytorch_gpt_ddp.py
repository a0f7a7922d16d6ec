"""PyTorch DDP on CPU (gloo), the peer of bench/gpt_bench.cc: the same GPT (the module of
tests/pytorch/nano_gpt.py) or Llama (tests/pytorch/llama.py's, written from HF's
LlamaForCausalLM), data (the license texts as bytes, the same batch formula), AdamW,
global batch and world size (2 unless given), one process per rank, one thread each.

usage: pytorch_gpt_ddp.py [WARMUP_STEPS] [TIMED_STEPS] [WORLD] [gpt|llama]
Prints "tokens_per_second". Run with Debian's python3-torch: /usr/bin/python3.
"""
import os
import sys

import torch
from torch.nn.parallel import DistributedDataParallel

from ddp_timing import timed_seconds_per_step

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "pytorch"))
import llama  # noqa: E402
import nano_gpt  # noqa: E402
from reference_training import sequence_start  # noqa: E402

CONFIG = {"vocab_size": 256, "block_size": 128, "n_layer": 4, "n_head": 4, "n_embd": 256,
          "bias": True, "gelu": "none"}
# gpt_bench.cc's Llama: the GPT's width, depth and context; 4 heads on 2 K/V heads, tied.
LLAMA = {"vocab_size": 256, "hidden_size": 256, "intermediate_size": 688,
         "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
         "max_position_embeddings": 1024, "block_size": 128, "rms_norm_eps": 1e-6,
         "rope_theta": 10000.0, "rope_scaling": None, "attention_bias": False,
         "mlp_bias": False, "tie_word_embeddings": True}
MODEL = sys.argv[4] if len(sys.argv) > 4 else "gpt"
LICENSES = ["GPL-3", "GPL-2", "LGPL-2.1", "Apache-2.0", "GFDL-1.3", "MPL-2.0"]
BATCH = 16


def setup(rank, world):
    module = llama.LlamaForCausalLM(LLAMA) if MODEL == "llama" else nano_gpt.GPT(CONFIG)
    model = DistributedDataParallel(module)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    text = b"".join(open(f"/usr/share/common-licenses/{n}", "rb").read() for n in LICENSES)
    tokens = torch.tensor(list(text), dtype=torch.long)
    n, t = tokens.numel(), CONFIG["block_size"]
    per_rank = BATCH // world

    def step(index):
        rows = []
        for j in range(rank * per_rank, (rank + 1) * per_rank):
            start = sequence_start(0, index * BATCH + j, n, t)
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
