"""Groups a GPT step's CPU time by kernel, Shardwise's beside PyTorch's (bench/gpt_profile.sh).

usage: profile_groups.py PERF_REPORT TORCH_TABLE OURS_TOKENS_PER_S TORCH_TOKENS_PER_S

PERF_REPORT is `perf report --no-children --sort=sym --stdio -q`: the share of samples per
symbol over every thread of both ranks. TORCH_TABLE is the autograd profiler's
key_averages() table of rank 0's timed steps: self CPU time per operator. Each side's
shares are of its own total; prints a Markdown table, largest groups first.
"""
import re
import sys

# (group, Shardwise symbol pattern, PyTorch operator pattern); the first match wins.
GROUPS = [
    ("GEMMs (BLAS)", r"gemm|cblas", r"aten::(mm|addmm|bmm|matmul|baddbmm|linear)$"),
    ("setup (initial weights, data files)", r"SeededWeights|__cos|__sin|memcmp|memchr|memmatch|"
     r"TokenFile|Load", r"^$"),
    ("LayerNorm", r"LayerNorm", r"layer_norm"),
    ("GELU", r"Gelu|Activation", r"gelu"),
    ("attention (softmax, mask, fused tiles)", r"Attention|Softmax|softmax|Causal|__expf|QueryTile|"
     r"TilePair|BackwardHead|ProbabilitiesAndGrads",
     r"aten::(_softmax|softmax|_softmax_backward_data|masked_fill_?|tril|where)$"),
    ("cross-entropy", r"CrossEntropy|Loss|__ieee754_log|__log|__ieee754_exp|exp@",
     r"nll_loss|log_softmax|cross_entropy"),
    ("AdamW", r"AdamW|Sgd|Optimizer", r"adamw|Optimizer|addcdiv|addcmul|lerp|sqrt|_foreach"),
    ("embedding", r"Embedding", r"embedding"),
    ("gradient sums and scaling", r"Accumulate|Divide|Multiply|Sum<|Scale", r"^$"),
    ("copies and casts", r"memcpy|memmove|Cast|Copy",
     r"copy_|aten::to$|_to_copy|contiguous|clone|aten::cat|aten::stack|index|slice|select|view|"
     r"reshape|transpose|permute|split|chunk|expand|unsqueeze|narrow|aten::t$"),
    ("communication (Gloo, sockets)", r"gloo|Gloo|send|recv|epoll|tcp|_copy_from_iter|"
     r"_copy_to_iter|softirq|sock|Communicat", r"c10d|allreduce|gloo|broadcast"),
    ("allocation and page faults", r"malloc|free|_int_|memset|clear_page|page_fault|mmap|munmap|"
     r"alloc|zap_|brk|_page", r"empty|zero_|zeros|fill_|resize_|ones"),
    ("pointwise adds and scales", r"Add|Residual",
     r"aten::(add|mul|div|sub|sum|mean|neg|rsub)_?$"),
    ("scheduling and system calls", r"\[k\]|schedule|switch|spin_|syscall|futex|irq",
     r"^$"),
]
OTHER = "the rest"


def group_of(name, column):
    for group in GROUPS:
        if re.search(group[column], name):
            return group[0]
    return OTHER


def perf_shares(path):
    shares = {}
    for line in open(path):
        match = re.match(r"\s*([\d.]+)%\s+(\[[.k]\])\s+(.*\S)", line)
        if match:
            group = group_of(f"{match.group(3)} {match.group(2)}", 1)
            shares[group] = shares.get(group, 0.0) + float(match.group(1))
    return shares


def torch_shares(path):
    """Self CPU per group as a share of the table's total self CPU time."""
    times, total = {}, 0.0
    for line in open(path):
        fields = re.split(r"\s{2,}", line.strip())
        if len(fields) < 7 or not fields[1].endswith("%"):
            continue
        seconds = parse_time(fields[2])
        if seconds is None:
            continue
        group = group_of(fields[0], 2)
        times[group] = times.get(group, 0.0) + seconds
        total += seconds
    return {group: 100.0 * t / total for group, t in times.items()} if total else {}


def parse_time(text):
    match = re.match(r"([\d.]+)(us|ms|s)$", text)
    if not match:
        return None
    return float(match.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[match.group(2)]


def main():
    ours, torch = perf_shares(sys.argv[1]), torch_shares(sys.argv[2])
    ours_rate, torch_rate = float(sys.argv[3]), float(sys.argv[4])
    lines = [f"Tokens/s in these runs (under the profilers): Shardwise {ours_rate:.0f}, "
             f"PyTorch DDP {torch_rate:.0f} ({ours_rate / torch_rate:.2f}x).", "",
             "| where the time goes | Shardwise, share of CPU samples (both ranks, all threads) "
             "| PyTorch, share of self CPU time (rank 0's operators) |", "| --- | --- | --- |"]
    names = sorted({*ours, *torch}, key=lambda g: -max(ours.get(g, 0), torch.get(g, 0)))
    for name in names:
        lines.append(f"| {name} | {ours.get(name, 0):.1f}% | {torch.get(name, 0):.1f}% |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
