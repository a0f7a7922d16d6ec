"""Times training steps under PyTorch DDP on CPU (gloo): `world` processes, one thread
each, the shared harness of bench/pytorch_ddp.py and bench/pytorch_gpt_ddp.py.

`setup(rank, world)` (a module-level function, so that it can be sent to the processes)
builds the rank's DDP model and returns `step(index)`, which runs one training step.
timed_seconds_per_step() returns rank 0's mean seconds per step after `warmup` steps.
"""
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _rank(rank, world, setup, warmup, steps, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    step = setup(rank, world)
    timed = 0.0
    for index in range(warmup):
        step(index)
    # SHARDWISE_TORCH_PROFILE=FILE: rank 0's timed steps under the autograd profiler, its
    # table of operators by self CPU time written to FILE (bench/gpt_profile.sh).
    profile_to = os.environ.get("SHARDWISE_TORCH_PROFILE") if rank == 0 else None
    with torch.autograd.profiler.profile(enabled=bool(profile_to)) as profile:
        for index in range(warmup, warmup + steps):
            start = time.perf_counter()
            step(index)
            timed += time.perf_counter() - start
    if profile_to:
        with open(profile_to, "w") as f:
            # Every operator: bench/profile_groups.py takes shares of their total.
            f.write(profile.key_averages().table(sort_by="self_cpu_time_total", row_limit=-1))
    if rank == 0:
        with open(out, "w") as f:
            f.write(f"{timed / steps}\n")
    dist.destroy_process_group()


def timed_seconds_per_step(setup, warmup, steps, world=2):
    out = f"/tmp/shardwise-ddp-{os.getpid()}.txt"
    mp.spawn(_rank, args=(world, setup, warmup, steps, 29500 + os.getpid() % 1000, out),
             nprocs=world)
    with open(out) as f:
        seconds = float(f.read())
    os.remove(out)
    return seconds
