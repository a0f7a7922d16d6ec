"""The baseline of bench/gpu_training.sh: the same MLP trained by PyTorch on one GPU.

Same model (Linear layers with GELU between them), MSE loss, SGD with momentum, batch
and step count as the Shardwise job it is compared with; random inputs and targets kept
on the GPU; loss.item() every step (Shardwise also reads the loss back every step); TF32
off, as PyTorch's default and the Shardwise job's; with --precision bf16, autocast to
bfloat16 (the Shardwise job then has param_dtype BF16). Prints "steps/s N".
"""
import argparse
import time

import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--widths", default="1024,4096,4096,1024")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    widths = [int(w) for w in args.widths.split(",")]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.GELU())
    model = torch.nn.Sequential(*layers).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(args.samples, widths[0], device="cuda")
    y = torch.randn(args.samples, widths[-1], device="cuda")
    warmup = 20
    start = None
    for step in range(args.steps + warmup):
        if step == warmup:
            torch.cuda.synchronize()
            start = time.perf_counter()
        rows = torch.arange(step * args.batch, (step + 1) * args.batch, device="cuda") % args.samples
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            out = model(x[rows])
        loss = torch.nn.functional.mse_loss(out.float(), y[rows])
        loss.backward()
        optimizer.step()
        loss.item()
    torch.cuda.synchronize()
    print(f"steps/s {args.steps / (time.perf_counter() - start):.2f}")


if __name__ == "__main__":
    main()
