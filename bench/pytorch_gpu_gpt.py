"""PyTorch's side of bench/gpu_gpt.sh: the GPT of tests/pytorch/nano_gpt.py (nanoGPT's
model, manual attention) trained on one device with AdamW, in FP32 (TF32 off) or under
BF16 autocast, eagerly, with PyTorch's fused attention (scaled_dot_product_attention, the
path nanoGPT takes on PyTorch 2) and with torch.compile, each where this PyTorch has it
(the loop: pytorch_gpu_timing.py).

Prints one line per variant: "VARIANT tokens_per_second MFU peak_MiB" or
"VARIANT unavailable REASON". MFU as nanoGPT estimates it: 6 N + 12 L H Q T FLOPs per
token (N without the position embedding) over the device's dense peak (--peak_tflops).

Usage: python3 pytorch_gpu_gpt.py [--device cuda] [--precision bf16] [--batch 8] ...
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

import pytorch_gpu_timing

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "pytorch"))
import nano_gpt  # noqa: E402


def fused_attention_forward(self, x):
    b, t, c = x.size()
    q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
    shape = (b, t, self.n_head, c // self.n_head)
    q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


def flops_per_token(cfg):
    c, t, layers = cfg["n_embd"], cfg["block_size"], cfg["n_layer"]
    model = nano_gpt.GPT(cfg)
    n = sum(p.numel() for p in model.parameters()) - model.transformer.wpe.weight.numel()
    return 6 * n + 12 * layers * c * t


def run(cfg, args, variant):
    torch.manual_seed(0)
    model = nano_gpt.GPT(cfg).to(torch.device(args.device))
    if variant == "fused-attention":
        if not hasattr(F, "scaled_dot_product_attention"):
            return f"{variant} unavailable (no scaled_dot_product_attention in torch {torch.__version__})"
        for block in model.transformer.h:
            block.attn.forward = fused_attention_forward.__get__(block.attn)
    return pytorch_gpu_timing.time_training(model, variant, args, cfg["vocab_size"],
                                            flops_per_token(cfg))


def main():
    parser = argparse.ArgumentParser()
    pytorch_gpu_timing.add_arguments(parser, batch=8, block_size=1024)
    parser.add_argument("--n_layer", type=int, default=12)
    parser.add_argument("--n_head", type=int, default=12)
    parser.add_argument("--n_embd", type=int, default=768)
    parser.add_argument("--vocab_size", type=int, default=50304)
    parser.add_argument("--variants", default="eager,fused-attention,compile")
    # nanoGPT's GELU (the erf form) or GPT-2's own (HF's "gelu_new", the tanh form).
    parser.add_argument("--gelu", choices=["none", "tanh"], default="none")
    args = parser.parse_args()
    pytorch_gpu_timing.disable_tf32()
    cfg = {"vocab_size": args.vocab_size, "block_size": args.block_size, "n_layer": args.n_layer,
           "n_head": args.n_head, "n_embd": args.n_embd, "bias": True, "gelu": args.gelu}
    for variant in args.variants.split(","):
        print(run(cfg, args, variant), flush=True)


if __name__ == "__main__":
    main()
