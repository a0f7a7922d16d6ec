"""PyTorch's side of bench/gpu_gpt.sh: the GPT of tests/pytorch/nano_gpt.py (nanoGPT's
model, manual attention) trained on one device with AdamW, in FP32 (TF32 off) or under
BF16 autocast, eagerly, with PyTorch's fused attention (scaled_dot_product_attention, the
path nanoGPT takes on PyTorch 2) and with torch.compile, each where this PyTorch has it.

Prints one line per variant: "VARIANT tokens_per_second MFU peak_MiB" or
"VARIANT unavailable REASON". MFU as nanoGPT estimates it: 6 N + 12 L H Q T FLOPs per
token (N without the position embedding) over the device's dense peak (--peak_tflops).

Usage: python3 pytorch_gpu_gpt.py [--device cuda] [--precision bf16] [--batch 8] ...
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

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


def profile_kernels(step, steps, path):
    """Writes each GPU kernel's device time over `steps` steps, one line per kernel name:
    "name<TAB>total microseconds<TAB>launches" (bench/gpu_kernel_groups.py reads it)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    with open(path, "w") as out:
        for event in prof.key_averages():
            # self_device_time_total since PyTorch 2.4; self_cuda_time_total before it.
            micros = getattr(event, "self_device_time_total", None)
            if micros is None:
                micros = event.self_cuda_time_total
            if micros > 0:
                name = event.key.replace("\t", " ").replace("\n", " ")
                out.write(f"{name}\t{micros}\t{event.count}\n")


def run(cfg, args, variant):
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = nano_gpt.GPT(cfg).to(device)
    if variant == "fused-attention":
        if not hasattr(F, "scaled_dot_product_attention"):
            return f"{variant} unavailable (no scaled_dot_product_attention in torch {torch.__version__})"
        for block in model.transformer.h:
            block.attn.forward = fused_attention_forward.__get__(block.attn)
    step_model = model
    if variant == "compile":
        if not hasattr(torch, "compile"):
            return f"{variant} unavailable (no torch.compile in torch {torch.__version__})"
        step_model = torch.compile(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)
    tokens = torch.randint(0, cfg["vocab_size"], (args.batch, cfg["block_size"] + 1), device=device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.precision == "bf16")

    def step():
        with autocast:
            loss = step_model(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    try:
        for _ in range(args.warmup):
            step()
        sync()
        if args.kernel_profile:
            profile_kernels(step, args.steps, args.kernel_profile)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        for _ in range(args.steps):
            loss = step()
        loss.item()  # one read at the end, as nanoGPT reads it only when it logs
        sync()
        seconds = (time.perf_counter() - start) / args.steps
    except Exception as error:  # compile failures, out of memory
        return f"{variant} unavailable ({type(error).__name__}: {str(error).splitlines()[0][:120]})"
    tokens_per_second = args.batch * cfg["block_size"] / seconds
    mfu = tokens_per_second * flops_per_token(cfg) / (args.peak_tflops * 1e12)
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else float("nan")
    return f"{variant} {tokens_per_second:.1f} {mfu:.4f} {peak:.0f}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="bf16")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--block_size", type=int, default=1024)
    parser.add_argument("--n_layer", type=int, default=12)
    parser.add_argument("--n_head", type=int, default=12)
    parser.add_argument("--n_embd", type=int, default=768)
    parser.add_argument("--vocab_size", type=int, default=50304)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    # H100 SXM dense BF16; FP32 jobs should pass the FP32 peak (67).
    parser.add_argument("--peak_tflops", type=float, default=989.5)
    parser.add_argument("--variants", default="eager,fused-attention,compile")
    # Writes the GPU kernels of --steps steps to this file (profile_kernels) before timing.
    parser.add_argument("--kernel_profile", default="")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cfg = {"vocab_size": args.vocab_size, "block_size": args.block_size, "n_layer": args.n_layer,
           "n_head": args.n_head, "n_embd": args.n_embd, "bias": True, "gelu": "none"}
    for variant in args.variants.split(","):
        print(run(cfg, args, variant), flush=True)


if __name__ == "__main__":
    main()
