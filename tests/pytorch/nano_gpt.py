"""A nanoGPT-equivalent GPT trained with PyTorch itself: the reference that
tests/pytorch_parity_test.cc holds Shardwise's GPT jobs to.

The module reproduces nanoGPT's model.py GPT with dropout 0 and the manual attention path
(q k^T / sqrt(hs), causal mask, softmax, @ v), pre-LayerNorm blocks, a tied LM head; the
trainer (reference_training.py, shared with llama.py) reproduces what a Shardwise job
spec says: batches drawn with Shardwise's stated formula (docs/job-spec.md, "Token
batches"), gradient accumulation, clipping by global norm, AdamW with nanoGPT's two
parameter groups (or one), and a warmup + cosine or linear schedule. Written for this
project; it runs one process on the whole global batch (the computation every FSDP
strategy and world size is specified to equal).

A config may start from, or also write, a GPT2LMHeadModel checkpoint ("init_hf_dir",
"out_hf_dir": reference_training.py; the model from its config.json when "model" is
absent); "hf_prefix": false writes GPT2Model's names, without "transformer.".

Usage: python3 nano_gpt.py CONFIG.json   (the keys: reference_training.py; "model" holds
vocab_size, block_size, n_layer, n_head, n_embd, bias, gelu)
"""
import functools
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_checkpoint  # noqa: E402
import reference_training  # noqa: E402

# The LM head is the token embedding: absent from the initial and the trained weights.
TIED = {"lm_head.weight": "transformer.wte.weight"}


class LayerNorm(nn.Module):
    """nanoGPT's LayerNorm: an optional bias."""

    def __init__(self, dim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_head, self.n_embd = c["n_head"], c["n_embd"]
        self.c_attn = nn.Linear(c["n_embd"], 3 * c["n_embd"], bias=c["bias"])
        self.c_proj = nn.Linear(c["n_embd"], c["n_embd"], bias=c["bias"])
        size = c["block_size"]
        self.register_buffer("mask", torch.tril(torch.ones(size, size)).view(1, 1, size, size),
                             persistent=False)

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        q = q.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        v = v.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c["n_embd"], 4 * c["n_embd"], bias=c["bias"])
        self.gelu = nn.GELU(approximate=c["gelu"])
        self.c_proj = nn.Linear(4 * c["n_embd"], c["n_embd"], bias=c["bias"])

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = LayerNorm(c["n_embd"], c["bias"])
        self.attn = CausalSelfAttention(c)
        self.ln_2 = LayerNorm(c["n_embd"], c["bias"])
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c["vocab_size"], c["n_embd"]),
            wpe=nn.Embedding(c["block_size"], c["n_embd"]),
            h=nn.ModuleList([Block(c) for _ in range(c["n_layer"])]),
            ln_f=LayerNorm(c["n_embd"], c["bias"]),
        ))
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied

    def forward(self, idx, targets):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1))


def model_of_checkpoint(cfg):
    """A config without "model" takes init_hf_dir's config.json (GPT2LMHeadModel's), as
    from_pretrained does."""
    config = hf_checkpoint.read_dir(cfg["init_hf_dir"])[0]
    assert config.get("architectures") == ["GPT2LMHeadModel"], config.get("architectures")
    assert config.get("n_inner") in (None, 4 * config["n_embd"]), config.get("n_inner")
    gelu = {"gelu": "none", "gelu_new": "tanh"}[config["activation_function"]]
    return {"vocab_size": config["vocab_size"], "block_size": config["n_positions"],
            "n_layer": config["n_layer"], "n_head": config["n_head"], "n_embd": config["n_embd"],
            "bias": True, "gelu": gelu}


def main():
    """Trains the GPT of the config named on the command line."""
    cfg = json.load(open(sys.argv[1]))
    if "model" not in cfg:
        cfg["model"] = model_of_checkpoint(cfg)
    to_hf = functools.partial(hf_checkpoint.gpt2_to_hf, prefix=cfg.get("hf_prefix", True))
    reference_training.train(cfg, GPT, TIED, hf_checkpoint.gpt2_from_hf, to_hf)


if __name__ == "__main__":
    main()
