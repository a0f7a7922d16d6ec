"""The trainer shared by the PyTorch references of tests/pytorch/ (nano_gpt.py, llama.py):
what a Shardwise job spec says, run by PyTorch itself on one process over the whole
global batch (the computation every FSDP strategy and world size is specified to equal).

Batches are drawn with Shardwise's stated formula (docs/job-spec.md, "Token batches");
then gradient accumulation, clipping by global norm, AdamW with nanoGPT's two parameter
groups (or one), and a warmup + cosine, linear or constant schedule; in BF16 mode the
forward and backward run on a BF16 copy of the FP32 master parameters. The initial
weights come from, and the trained ones go to, FP32 safetensors files. Written for this
project.

The configuration (one JSON object) has these keys:
  model         handed as is to the model's constructor; its "block_size" is also the
                training sequence length T (each batch row holds T + 1 tokens)
  init          safetensors file of the initial FP32 weights (tied aliases absent)
  init_hf_dir   instead of init: a Hugging Face checkpoint folder (hf_checkpoint.py)
  train         token file, little-endian uint16 ids
  seed          the batch formula's seed
  global_batch  sequences per step; accumulation: micro-batches per step (divides it)
  steps         optimizer steps
  dtype         "bf16" for BF16 compute on FP32 master weights; anything else (or
                absent) trains in FP32
  lr, beta1, beta2, eps, weight_decay   AdamW's
  decay_params  "MATRICES" (decay only on parameters of two or more dimensions) or
                anything else (decay on all)
  max_grad_norm clipping by global norm, off when 0
  schedule      {"decay": "COSINE" | "LINEAR" | "CONSTANT", "warmup_steps",
                 "decay_steps", "min_lr"}
  out_model     safetensors file the trained FP32 weights go to (tied aliases absent)
  out_hf_dir    optional: {"dir", "config" (config.json's contents), "dtype" ("F32",
                "BF16", "F16"), "shards"}: the trained weights also as a Hugging Face
                checkpoint
  out_losses    JSON file: {"losses": [the mean loss of each step], "torch": version}
"""
import json
import math

import torch

import hf_checkpoint

MASK64 = (1 << 64) - 1


def sequence_start(seed, index, num_tokens, block_size):
    """The first token of the index-th sequence of the run (SplitMix64 of seed and index)."""
    z = (seed + (index + 1) * 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    z ^= z >> 31
    return z % (num_tokens - block_size)


def read_safetensors(path):
    """The F32 tensors of a safetensors file, by name."""
    return hf_checkpoint.read_file(path, dtypes=("F32",))


def write_safetensors(path, tensors):
    """Writes tensors (cast to F32) as a safetensors file, names sorted."""
    with open(path, "wb") as f:
        f.write(hf_checkpoint.encode(tensors, torch.float32))


def learning_rate(cfg, step):
    """The schedule's learning rate at step (0-based): linear warmup, then the decay."""
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


def make_optimizer(cfg, params):
    """AdamW over params (name -> parameter): with "MATRICES", weight decay only on the
    parameters of two or more dimensions (nanoGPT's groups); otherwise on all."""
    if cfg["decay_params"] == "MATRICES":
        groups = [{"params": [p for p in params.values() if p.dim() >= 2],
                   "weight_decay": cfg["weight_decay"]},
                  {"params": [p for p in params.values() if p.dim() < 2], "weight_decay": 0.0}]
    else:
        groups = [{"params": list(params.values()), "weight_decay": cfg["weight_decay"]}]
    return torch.optim.AdamW(groups, lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]),
                             eps=cfg["eps"])


def read_tokens(path):
    """The token file: little-endian uint16 ids, as int64."""
    tokens = torch.frombuffer(bytearray(open(path, "rb").read()), dtype=torch.int16)
    return tokens.to(torch.int64) & 0xFFFF


def micro_batch(cfg, tokens, step, m, t):
    """Rows [m * b / micro, (m + 1) * b / micro) of the step's global batch of b sequences,
    each of t + 1 tokens (inputs and shifted targets)."""
    b, micro = cfg["global_batch"], cfg["accumulation"]
    rows = []
    for j in range(m * b // micro, (m + 1) * b // micro):
        start = sequence_start(cfg["seed"], step * b + j, tokens.numel(), t)
        rows.append(tokens[start:start + t + 1])
    return torch.stack(rows)


def load_initial(model, cfg, tied, from_hf):
    """Loads the initial weights into model, from cfg's "init" file or "init_hf_dir"
    checkpoint (Hugging Face's layout, mapped by from_hf); each tied alias (absent from the
    file, or ignored there as from_pretrained ignores it) takes its source's tensor."""
    if "init_hf_dir" in cfg:
        initial = from_hf(hf_checkpoint.read_dir(cfg["init_hf_dir"])[1])
    else:
        initial = read_safetensors(cfg["init"])
    for alias, source in tied.items():
        initial[alias] = initial[source]
    model.load_state_dict(initial, strict=True)


def train(cfg, make_model, tied, from_hf=hf_checkpoint.llama_from_hf,
          to_hf=hf_checkpoint.llama_to_hf):
    """Trains make_model(cfg["model"]) as cfg says and writes the trained weights (less the
    tied aliases) and the loss of every step.

    make_model builds a fresh module whose forward(inputs, targets) returns the mean loss;
    tied maps each state-dict name that is the same parameter as another (a tied LM head)
    to that other name, e.g. {"lm_head.weight": "transformer.wte.weight"}; from_hf and
    to_hf map a Hugging Face checkpoint's tensors to the state dict and back (hf_checkpoint).
    """
    torch.set_num_threads(1)
    model_cfg = cfg["model"]
    model = make_model(model_cfg)
    load_initial(model, cfg, tied, from_hf)
    bf16 = cfg.get("dtype") == "bf16"
    # FSDP's MixedPrecision at BF16: forward and backward on a BF16 copy of the FP32
    # master parameters; the gradients, cast back to FP32, step the master.
    compute = make_model(model_cfg).to(torch.bfloat16) if bf16 else model

    params = dict(model.named_parameters())  # a tied weight once
    optimizer = make_optimizer(cfg, params)
    tokens = read_tokens(cfg["train"])
    t, micro = model_cfg["block_size"], cfg["accumulation"]
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
            batch = micro_batch(cfg, tokens, step, m, t)
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
    state = {k: v for k, v in model.state_dict().items() if k not in tied}
    write_safetensors(cfg["out_model"], state)
    if "out_hf_dir" in cfg:
        out = cfg["out_hf_dir"]
        hf_checkpoint.write_dir(out["dir"], to_hf(state), out["config"],
                                hf_checkpoint.DTYPES[out.get("dtype", "F32")],
                                out.get("shards", 1))
    json.dump({"losses": losses, "torch": torch.__version__}, open(cfg["out_losses"], "w"))
