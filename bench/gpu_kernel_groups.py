"""Groups the GPU kernels of one training step by what they compute, for
bench/gpu_gpt_profile.sh: Shardwise's from Nsight Compute's CSV (each kernel's
gpu__time_duration.sum), PyTorch's from its profiler (bench/pytorch_gpu_gpt.py
--kernel_profile: "name<TAB>total microseconds<TAB>launches" per kernel name).

Prints a markdown table: per group, milliseconds and launches per step on each side.

Usage: python3 gpu_kernel_groups.py NCU_CSV OUR_STEPS TORCH_TSV TORCH_STEPS
"""
import csv
import re
import sys

# First match wins, case-insensitive, on the kernel's name.
GROUPS = [
    ("GEMMs (cuBLAS)", r"gemm|xmma|cutlass|nvjet|cublas"),
    ("NCCL collectives", r"nccl"),
    ("cross-entropy", r"crossentropy|cross_entropy|log_softmax|logsoftmax|nll_loss"),
    ("attention (softmax, fused kernels)",
     r"softmax|attention|flash|fmha|querygradient|keyvaluegradient|^(.*::)?forwardkernel$"),
    ("LayerNorm", r"layernorm|layer_norm"),
    ("GELU", r"gelu|activation"),
    ("optimizer (AdamW, clipping norms)", r"adam|sgd|multi_tensor|cliptonorm|squarespartial|finalsum"),
    ("embedding", r"embedding|iota|index"),
    ("casts and copies", r"narrow|widen|round|cast|copy|memcpy|memset|convert|doubletofloat"),
    ("elementwise and reductions",
     r"elementwise|vectorized|accumulate|multiply|divide|add|reduce|sum|broadcast|fill|scale"),
]


def group_of(name):
    for group, pattern in GROUPS:
        if re.search(pattern, name, re.IGNORECASE):
            return group
    return "other"


def read_ncu(path):
    """{kernel name: [total microseconds, launches]} from `ncu --csv` output."""
    with open(path, newline="") as f:
        lines = f.readlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        sys.exit(f"{path}: no Nsight Compute CSV header")
    kernels = {}
    for row in csv.DictReader(lines[start:]):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}
        micros = value * scale.get(row.get("Metric Unit", "nsecond"), 1e-3)
        entry = kernels.setdefault(row["Kernel Name"], [0.0, 0])
        entry[0] += micros
        entry[1] += 1
    return kernels


def read_tsv(path):
    kernels = {}
    with open(path) as f:
        for line in f:
            name, micros, launches = line.rstrip("\n").rsplit("\t", 2)
            kernels[name] = [float(micros), int(launches)]
    return kernels


def by_group(kernels, steps):
    groups = {}
    for name, (micros, launches) in kernels.items():
        entry = groups.setdefault(group_of(name), [0.0, 0])
        entry[0] += micros / 1000 / steps
        entry[1] += launches / steps
    return groups


def main():
    our_kernels, our_steps = read_ncu(sys.argv[1]), int(sys.argv[2])
    their_kernels, their_steps = read_tsv(sys.argv[3]), int(sys.argv[4])
    ours = by_group(our_kernels, our_steps)
    theirs = by_group(their_kernels, their_steps)
    names = [g for g, _ in GROUPS] + ["other"]
    print("| kernels | Shardwise ms per step | launches | PyTorch eager ms per step | launches |")
    print("| --- | --- | --- | --- | --- |")
    total_ours = sum(v[0] for v in ours.values())
    total_theirs = sum(v[0] for v in theirs.values())
    for name in names:
        a, b = ours.get(name, [0.0, 0]), theirs.get(name, [0.0, 0])
        if a[0] == 0 and b[0] == 0:
            continue
        print(f"| {name} | {a[0]:.2f} | {a[1]:.0f} | {b[0]:.2f} | {b[1]:.0f} |")
    print(f"| all kernels | {total_ours:.2f} | {sum(v[1] for v in ours.values()):.0f} | "
          f"{total_theirs:.2f} | {sum(v[1] for v in theirs.values()):.0f} |")
    # The slowest kernels on each side, for the reading.
    for side, kernels, steps in (("Shardwise", our_kernels, our_steps),
                                 ("PyTorch", their_kernels, their_steps)):
        top = sorted(kernels.items(), key=lambda kv: -kv[1][0])[:8]
        print(f"\n{side}'s 8 longest kernels, ms per step: " + "; ".join(
            f"{name[:70]} {micros / 1000 / steps:.2f} ({launches / steps:.0f}x)"
            for name, (micros, launches) in top))


if __name__ == "__main__":
    main()
