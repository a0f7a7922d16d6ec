"""The training loop both PyTorch sides of the GPU benchmarks time (pytorch_gpu_gpt.py,
pytorch_gpu_llama.py): AdamW on one device, in FP32 (TF32 off) or under BF16 autocast,
eagerly or through torch.compile; warm-up steps, an optional kernel profile, then timed
steps with the loss read once at the end (as nanoGPT reads it only when it logs).

A variant's line: "VARIANT tokens_per_second MFU peak_MiB" (MFU: tokens/s x FLOPs per
token over the device's dense peak; peak: the caching allocator's, torch.cuda's
max_memory_allocated), or "VARIANT unavailable REASON".

Under a GPU busy trace (SHARDWISE_GPU_BUSY_TRACE set: bench/gpu_gpt_busy.sh) a marker
kernel (torch.cuda._sleep's spin_kernel, a few cycles) runs before each timed step and
after the last, so the trace shows where each step begins and ends.
"""
import argparse
import os
import time

import torch


def add_arguments(parser: argparse.ArgumentParser, batch, block_size):
    """The options every PyTorch side takes; a model's own come beside them."""
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="bf16")
    parser.add_argument("--batch", type=int, default=batch)
    parser.add_argument("--block_size", type=int, default=block_size)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    # H100 SXM dense BF16; FP32 jobs should pass the FP32 peak (67).
    parser.add_argument("--peak_tflops", type=float, default=989.5)
    # Writes the GPU kernels of --steps steps to this file (profile_kernels) before timing.
    parser.add_argument("--kernel_profile", default="")


def disable_tf32():
    """The benchmarks compare FP32 as FP32: no TF32 tensor cores on either side."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


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


def time_training(model, variant, args, vocab_size, flops_per_token):
    """Trains `model` (on args.device already; called as model(idx, targets) -> loss) on
    random tokens and returns the variant's line. "compile" runs it through torch.compile."""
    device = torch.device(args.device)
    step_model = model
    if variant == "compile":
        if not hasattr(torch, "compile"):
            return f"{variant} unavailable (no torch.compile in torch {torch.__version__})"
        step_model = torch.compile(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)
    tokens = torch.randint(0, vocab_size, (args.batch, args.block_size + 1), device=device)
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
        traced = device.type == "cuda" and bool(os.environ.get("SHARDWISE_GPU_BUSY_TRACE"))
        start = time.perf_counter()
        for _ in range(args.steps):
            if traced:
                torch.cuda._sleep(1)
            loss = step()
        if traced:
            torch.cuda._sleep(1)
        loss.item()
        sync()
        seconds = (time.perf_counter() - start) / args.steps
    except Exception as error:  # compile failures, out of memory
        first_line = (str(error).splitlines() or [""])[0]
        return f"{variant} unavailable ({type(error).__name__}: {first_line[:120]})"
    tokens_per_second = args.batch * args.block_size / seconds
    mfu = tokens_per_second * flops_per_token / (args.peak_tflops * 1e12)
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else float("nan")
    return f"{variant} {tokens_per_second:.1f} {mfu:.4f} {peak:.0f}"
