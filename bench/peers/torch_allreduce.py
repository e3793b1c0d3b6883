#!/usr/bin/python3
"""The PyTorch peer of bench/comm_benchmark: torch.distributed.all_reduce on
the gloo backend (PyTorch 1.13, CPU), one process per rank via mp.spawn,
timed like nccl-tests and printed in the same table:

    bench/peers/torch_allreduce.py --world_size 2 --min_bytes 8 --max_bytes 268435456

Before the first size, --warmup_seconds of it untimed (as comm_benchmark
does: the first second of a run is slower). Each size: warm-up, then
back-to-back all-reduces between barriers; the time
of one operation is the slowest rank's elapsed / iterations. Results are
checked exactly (rank r contributes r + 1); #wrong counts bad elements.
"""
import argparse
import os
import socket
import sys
import time

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from rank_exit import exit_rank
except ImportError:
    sys.exit("torch_allreduce: PyTorch is not installed; "
             "sudo apt-get install python3-torch")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(buf, iters):
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf)
    elapsed = torch.tensor([(time.perf_counter() - start) / iters],
                           dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return elapsed.item()


def worker(rank, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.world_size)
    n = args.world_size
    if rank == 0:
        print(f"# PyTorch {torch.__version__} gloo all_reduce, {n} processes")
        print("#       size         count      type   redop |     time   algbw   busbw  #wrong")
        print("#        (B)    (elements)                   |     (us)  (GB/s)  (GB/s)")
    if args.warmup_seconds > 0:
        buf = torch.ones(max(args.min_bytes // 4, 1), dtype=torch.float32)
        probe = timed(buf, 2)
        # batches of about 50 ms, as bench/repeat_timer.h's WarmUpBatch
        batch = int(min(max(0.05 / max(probe, 1e-9), 1), 100000))
        spent = 2 * probe
        while spent < args.warmup_seconds:  # every rank sees the same max
            spent += timed(buf, batch) * batch
    size = args.min_bytes
    while size <= args.max_bytes:
        count = max(size // 4, 1)
        buf = torch.ones(count, dtype=torch.float32)
        probe = timed(buf, 2)
        iters = torch.tensor([int(min(max(args.target_seconds / max(probe, 1e-9), 5), 100000))])
        dist.broadcast(iters, 0)
        seconds = timed(buf, int(iters.item()))
        buf.fill_(rank + 1)
        dist.all_reduce(buf)
        wrong = torch.tensor([int((buf != n * (n + 1) / 2).sum().item())])
        dist.all_reduce(wrong)
        if rank == 0:
            algbw = count * 4 / seconds / 1e9
            busbw = algbw * 2 * (n - 1) / n
            print(f"{count * 4:12d}  {count:12d}  {'f32':>8s}  {'sum':>6s} | "
                  f"{seconds * 1e6:8.2f}  {algbw:6.2f}  {busbw:6.2f}  {int(wrong.item()):6d}",
                  flush=True)
        size *= 2
    exit_rank()  # rank_exit.py says why not destroy_process_group


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world_size", type=int, default=2)
    parser.add_argument("--min_bytes", type=int, default=8)
    parser.add_argument("--max_bytes", type=int, default=256 << 20)
    parser.add_argument("--target_seconds", type=float, default=0.2)
    parser.add_argument("--warmup_seconds", type=float, default=1.0,
                        help="untimed seconds of the first size before "
                        "timing (0: none)")
    args = parser.parse_args()
    if not 0 <= args.warmup_seconds <= 60:  # false for nan
        parser.error("--warmup_seconds must be 0 (no warm-up) or a number of "
                     f"seconds in (0, 60], got {args.warmup_seconds}")
    mp.spawn(worker, args=(args, free_port()), nprocs=args.world_size, join=True)


if __name__ == "__main__":
    main()
