"""A nanoGPT-equivalent GPT trained with PyTorch itself: the reference that
tests/pytorch_parity_test.cc holds Shardwise's GPT jobs to.

The module reproduces nanoGPT's model.py GPT with dropout 0 and the manual attention path
(q k^T / sqrt(hs), causal mask, softmax, @ v), pre-LayerNorm blocks, a tied LM head; the
trainer reproduces what a Shardwise job spec says: batches drawn with Shardwise's stated
formula (docs/job-spec.md, "Token batches"), gradient accumulation, clipping by global
norm, AdamW with nanoGPT's two parameter groups (or one), and a warmup + cosine or linear
schedule. Written for this project; it runs one process on the whole global batch (the
computation every FSDP strategy and world size is specified to equal).

Usage: python3 nano_gpt.py CONFIG.json   (the keys are read in main())
"""
import json
import math
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

MASK64 = (1 << 64) - 1


def sequence_start(seed, index, num_tokens, block_size):
    z = (seed + (index + 1) * 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    z ^= z >> 31
    return z % (num_tokens - block_size)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "F32", (name, entry["dtype"])
        begin, end = entry["data_offsets"]
        buf = bytearray(data[8 + size + begin:8 + size + end])
        tensors[name] = torch.frombuffer(buf, dtype=torch.float32).reshape(entry["shape"]).clone()
    return tensors


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        blob = tensors[name].detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


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


def learning_rate(cfg, step):
    lr, s = cfg["lr"], cfg["schedule"]
    if step < s["warmup_steps"]:
        return lr * (step + 1) / (s["warmup_steps"] + 1)
    if s["decay"] == "CONSTANT":
        return lr
    if step >= s["decay_steps"]:
        return s["min_lr"]
    ratio = (step - s["warmup_steps"]) / (s["decay_steps"] - s["warmup_steps"])
    coeff = 0.5 * (1.0 + math.cos(math.pi * ratio)) if s["decay"] == "COSINE" else 1.0 - ratio
    return s["min_lr"] + coeff * (lr - s["min_lr"])


def main():
    cfg = json.load(open(sys.argv[1]))
    torch.set_num_threads(1)
    model_cfg = cfg["model"]
    model = GPT(model_cfg)
    initial = read_safetensors(cfg["init"])
    initial["lm_head.weight"] = initial["transformer.wte.weight"]
    model.load_state_dict(initial, strict=True)
    bf16 = cfg.get("dtype") == "bf16"
    # FSDP's MixedPrecision at BF16: forward and backward on a BF16 copy of the FP32
    # master parameters; the gradients, cast back to FP32, step the master.
    compute = GPT(model_cfg).to(torch.bfloat16) if bf16 else model

    params = dict(model.named_parameters())  # the tied weight once
    if cfg["decay_params"] == "MATRICES":
        groups = [{"params": [p for p in params.values() if p.dim() >= 2],
                   "weight_decay": cfg["weight_decay"]},
                  {"params": [p for p in params.values() if p.dim() < 2], "weight_decay": 0.0}]
    else:
        groups = [{"params": list(params.values()), "weight_decay": cfg["weight_decay"]}]
    optimizer = torch.optim.AdamW(groups, lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]),
                                  eps=cfg["eps"])

    tokens = torch.frombuffer(bytearray(open(cfg["train"], "rb").read()), dtype=torch.int16)
    tokens = tokens.to(torch.int64) & 0xFFFF
    n, t, b = tokens.numel(), model_cfg["block_size"], cfg["global_batch"]
    micro = cfg["accumulation"]
    losses = []
    for step in range(cfg["steps"]):
        for g in optimizer.param_groups:
            g["lr"] = learning_rate(cfg, step)
        if bf16:
            with torch.no_grad():
                compute.load_state_dict({k: v.to(torch.bfloat16) for k, v in model.state_dict().items()})
            compute.zero_grad(set_to_none=True)
        optimizer.zero_grad(set_to_none=True)
        step_loss = 0.0
        for m in range(micro):
            rows = []
            for j in range(m * b // micro, (m + 1) * b // micro):
                start = sequence_start(cfg["seed"], step * b + j, n, t)
                rows.append(tokens[start:start + t + 1])
            batch = torch.stack(rows)
            loss = compute(batch[:, :-1], batch[:, 1:]) / micro
            loss.backward()
            step_loss += loss.item()
        if bf16:
            compute_params = dict(compute.named_parameters())
            for name, p in params.items():
                p.grad = compute_params[name].grad.float()
        if cfg["max_grad_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(list(params.values()), cfg["max_grad_norm"])
        optimizer.step()
        losses.append(step_loss)
    state = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}
    write_safetensors(cfg["out_model"], state)
    json.dump({"losses": losses, "torch": torch.__version__}, open(cfg["out_losses"], "w"))


if __name__ == "__main__":
    main()
