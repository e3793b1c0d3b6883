#!/usr/bin/python3
"""The PyTorch peer of bench/ddp_benchmark: the same models, batches and
training step under torch.nn.parallel.DistributedDataParallel on the gloo
backend (PyTorch 1.13, CPU), one process per rank via mp.spawn, one thread
per process (torch.set_num_threads(1) and OPENBLAS_NUM_THREADS=1: Debian's
PyTorch does its float GEMMs in OpenBLAS's pthread build, which
set_num_threads does not reach; without the variable each process ran its
GEMMs on every core, 2 cores' worth of FLOP/s for "one" rank):

    bench/peers/torch_ddp.py --world_sizes 1,2,4 --models small,large,conv

Models (f32, batch per rank), as in ddp_benchmark.cc:
    small  MLP 64 -> 256 -> 256 -> 10 (ReLU between), batch 32
    large  MLP 1024 -> 4096 -> 4096 -> 1024 (25 M parameters), batch 64
    conv   Conv2d(3, 16, 3) -> Flatten -> Linear(14400, 10) -> Softmax(dim=1)
           on 3 x 32 x 32 inputs, batch 64
One step on a fixed random batch per rank:
    logits = model(x); loss = F.cross_entropy(logits, y)
    optimizer.zero_grad(); loss.backward(); optimizer.step()     (SGD, lr 0.01)
Modes: ddp (DDP with its defaults: bucket_cap_mb=25, gradient_as_bucket_view
False), local (the bare model, the same number of processes running at
once, no communication) and ddp_bf16 (ddp with the forward and the loss
under torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's CPU mixed
precision recipe: no GradScaler for bf16).

Timing as ddp_benchmark: warm-up steps, a one-step probe (max over ranks)
sets the step count for about --target_seconds, then --repeats segments of
that many steps between barriers; step time = slowest rank's elapsed / steps
in the fastest segment. Prints a table and one
`RESULT backend=torch ...` line per case, in ddp_benchmark's format.
"""
import argparse
import os

# Before torch loads OpenBLAS (it reads these once, at load time); mp.spawn's
# children inherit them. One thread per process, like tandem's ranks.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
import socket
import sys
import time

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    from rank_exit import exit_rank
except ImportError:
    sys.exit("torch_ddp: PyTorch is not installed; "
             "sudo apt-get install python3-torch")

MODELS = {
    # name: (description, batch per rank, sample shape, classes)
    "small": ("MLP 64-256-256-10", 32, (64,), 10),
    "large": ("MLP 1024-4096-4096-1024", 64, (1024,), 1024),
    "conv": ("Conv2d 3-16 k3 + Linear 14400-10 + Softmax", 64, (3, 32, 32), 10),
}


def build(name):
    nn = torch.nn
    if name == "small":
        return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256),
                             nn.ReLU(), nn.Linear(256, 10))
    if name == "large":
        return nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(),
                             nn.Linear(4096, 4096), nn.ReLU(),
                             nn.Linear(4096, 1024))
    return nn.Sequential(nn.Conv2d(3, 16, 3), nn.Flatten(),
                         nn.Linear(16 * 30 * 30, 10), nn.Softmax(dim=1))


def gemm_flops(name, batch):
    """GEMM FLOPs of one step, counted as ddp_benchmark.cc counts them."""
    def linear(b, i, o, first):
        return 2 * b * i * o * (2 if first else 3)
    if name == "small":
        return linear(batch, 64, 256, True) + linear(batch, 256, 256, False) + \
            linear(batch, 256, 10, False)
    if name == "large":
        return linear(batch, 1024, 4096, True) + \
            linear(batch, 4096, 4096, False) + linear(batch, 4096, 1024, False)
    return 2 * (2 * 16 * 900 * 27 * batch) + linear(batch, 14400, 10, False)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def max_over_ranks(value):
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def run_case(rank, world, name, mode, args):
    desc, batch, shape, classes = MODELS[name]
    torch.manual_seed(1234)
    model = build(name)
    gen = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn((batch,) + shape, generator=gen)
    y = torch.randint(0, classes, (batch,), generator=gen)
    net = DDP(model) if mode in ("ddp", "ddp_bf16") else model
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss = None
    bf16 = mode == "ddp_bf16"

    def step():
        nonlocal loss
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = net(x)
            loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(args.warmup_steps):
        step()
    dist.barrier()
    t = time.perf_counter()
    step()
    probe = max_over_ranks(time.perf_counter() - t)
    steps = int(min(max(args.target_seconds / max(probe, 1e-9), args.min_steps),
                    args.max_steps))
    best = None
    for _ in range(max(1, args.repeats)):
        dist.barrier()
        t = time.perf_counter()
        for _ in range(steps):
            step()
        elapsed = max_over_ranks(time.perf_counter() - t)
        best = elapsed if best is None else min(best, elapsed)
    return best / steps, steps, loss.item()


def worker(rank, world, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    for name in args.models.split(","):
        desc, batch, _, _ = MODELS[name]
        flops = gemm_flops(name, batch)
        if rank == 0:
            print(f"\n# {name} ({desc}), batch {batch} per rank, "
                  f"{flops / 1e9:.3f} GFLOP per step per rank; PyTorch "
                  f"{torch.__version__} DDP gloo, {world} processes")
            print(f"# {'world':>5s}  {'mode':<14s} {'bucket':>7s} | "
                  f"{'step (ms)':>10s}  {'samples/s':>11s}  "
                  f"{'GFLOP/s/rank':>12s}  {'steps':>6s}  {'loss':>10s}",
                  flush=True)
        for mode in args.modes.split(","):
            seconds, steps, loss = run_case(rank, world, name, mode, args)
            if rank == 0:
                samples = world * batch / seconds
                gflops = flops / seconds / 1e9
                ddp = mode != "local"
                bucket = "25M" if ddp else "-"
                print(f"  {world:5d}  {mode:<14s} {bucket:>7s} | "
                      f"{seconds * 1e3:10.3f}  {samples:11.1f}  {gflops:12.2f}  "
                      f"{steps:6d}  {loss:10.4f}")
                print(f"RESULT backend=torch model={name} world={world} "
                      f"mode={mode} bucket_mb={25 if ddp else 0} "
                      f"step_ms={seconds * 1e3:.6f} samples_per_s={samples:.3f} "
                      f"gflops_per_rank={gflops:.4f} steps={steps}",
                      flush=True)
    exit_rank()  # rank_exit.py says why not destroy_process_group


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world_sizes", default="1,2,4")
    parser.add_argument("--models", default="small,large,conv")
    parser.add_argument("--modes", default="ddp,local")
    parser.add_argument("--target_seconds", type=float, default=2.0)
    parser.add_argument("--min_steps", type=int, default=3)
    parser.add_argument("--max_steps", type=int, default=2000)
    parser.add_argument("--warmup_steps", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1,
                        help="timed segments per case; the fastest counts")
    args = parser.parse_args()
    for name in args.models.split(","):
        if name not in MODELS:
            sys.exit(f"torch_ddp: unknown model '{name}'; expected small, "
                     "large or conv")
    for mode in args.modes.split(","):
        if mode not in ("ddp", "local", "ddp_bf16"):
            sys.exit(f"torch_ddp: unknown mode '{mode}'; expected ddp, local "
                     "or ddp_bf16")
    print(f"# PyTorch {torch.__version__} DDP peer, gloo, one thread per "
          f"process, {os.cpu_count()} CPUs", flush=True)
    for world in (int(w) for w in args.world_sizes.split(",")):
        mp.spawn(worker, args=(world, args, free_port()), nprocs=world,
                 join=True)


if __name__ == "__main__":
    main()
