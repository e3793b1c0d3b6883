#!/usr/bin/python3
"""torchvision's resnet18 under PyTorch DDP (gloo, CPU): the peer of tandem's
//train:resnet_ddp on its synthetic images.

Each rank (a process from torch.multiprocessing) builds
torchvision.models.resnet18(num_classes=N), in float64 with --dtype=f64,
loads the initial weights tandem wrote (--init: resnet_ddp's --save_init, a
safetensors file under PyTorch's state-dict names, read here without the
safetensors package), wraps it in DDP and trains with
SGD(lr, momentum=0.9, weight_decay=5e-4) and cross-entropy on
resnet_ddp's synthetic images (train/data/datasets/image_splits.h): image k
is torch.randn(3, S, S) after manual_seed(seed + 1 + k), label k % N, row
(label % S) of channel (label // S) % 3 plus 2. A DistributedSampler(seed)
with set_epoch and drop_last batches. Each rank prints after every step

    [GPU1] step 3 loss 2.3025850929940455

as resnet_ddp --print_step_losses does (bench/peers/compare_resnet_ddp.py
compares the two).

    bench/peers/resnet_ddp.py --init=init.safetensors --world_size=2 --steps=10
    bench/peers/resnet_ddp.py --dtype=f32 --batch_size=32 --synthetic_size=512 \
        --time_epochs=3                      # images/s per epoch (bench/compare)
"""
import argparse
import json
import os
import socket
import struct
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn.functional as F
    import torchvision
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, Dataset
    from torch.utils.data.distributed import DistributedSampler
    from rank_exit import exit_rank
except ImportError as e:
    sys.exit(f"resnet_ddp.py: {e}; sudo apt-get install python3-torch "
             "python3-torchvision")

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64}


def read_safetensors(path):
    """{name: tensor} of a safetensors file (the format's 8-byte header
    length, JSON header, then the tensors' bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        dtype = DTYPES[entry["dtype"]]
        t = torch.frombuffer(bytearray(body[begin:end]), dtype=dtype)
        out[name] = t.reshape(entry["shape"]).clone()
    return out


class SyntheticImages(Dataset):
    def __init__(self, size, num_classes, image_size, seed):
        self.size, self.n, self.s, self.seed = size, num_classes, image_size, seed

    def __len__(self):
        return self.size

    def __getitem__(self, k):
        g = torch.Generator().manual_seed(self.seed + 1 + k)
        x = torch.randn(3, self.s, self.s, generator=g)
        y = k % self.n
        x[(y // self.s) % 3, y % self.s, :] += 2
        return x, y


def main(rank, world_size, args):
    torch.set_num_threads(1)
    dist.init_process_group(backend="gloo", rank=rank, world_size=world_size)
    dtype = torch.float64 if args.dtype == "f64" else torch.float32
    torch.manual_seed(args.seed)
    model = torchvision.models.resnet18(num_classes=args.num_classes)
    model = model.to(dtype)
    if args.init:
        model.load_state_dict(read_safetensors(args.init))
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9,
                                weight_decay=args.weight_decay)
    dataset = SyntheticImages(args.synthetic_size, args.num_classes,
                              args.image_size, args.seed)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank,
                                 shuffle=True, seed=args.seed)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler,
                        drop_last=True)
    model.train()
    if args.profile_steps:
        # Where a step's time goes (bench/PERFORMANCE.md): rank 0's CPU time
        # per op over that many steps after one warm-up step.
        batches = iter(loader)

        def one_step():
            x, y = next(batches)
            loss = F.cross_entropy(model(x.to(dtype)), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        one_step()
        with torch.profiler.profile() as prof:
            for _ in range(args.profile_steps):
                one_step()
        if rank == 0:
            sys.stdout.write(prof.key_averages().table(
                sort_by="self_cpu_time_total", row_limit=25) + "\n")
        exit_rank()
    if args.time_epochs:
        # Throughput, as resnet_ddp prints it: per epoch the images of every
        # rank over rank 0's wall time for the epoch's steps.
        for epoch in range(args.time_epochs):
            sampler.set_epoch(epoch)
            start = time.perf_counter()
            images = 0
            for x, y in loader:
                loss = F.cross_entropy(model(x.to(dtype)), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                images += y.numel() * world_size
            seconds = time.perf_counter() - start
            if rank == 0:
                sys.stdout.write(f"epoch {epoch + 1} {images / seconds:.1f} "
                                 "images/s\n")
                sys.stdout.flush()
        exit_rank()
    step = 0
    epoch = 0
    while step < args.steps:
        sampler.set_epoch(epoch)
        for images, labels in loader:
            if step >= args.steps:
                break
            loss = F.cross_entropy(model(images.to(dtype)), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            # One write per line: the ranks share the pipe, and print()
            # writes the text and its newline apart (lines could mix).
            sys.stdout.write(f"[GPU{rank}] step {step} loss "
                             f"{loss.item():.17g}\n")
            sys.stdout.flush()
            step += 1
        epoch += 1
    exit_rank()  # rank_exit.py says why not destroy_process_group


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # Without --init: torchvision's initialisation after manual_seed(seed),
    # which is what resnet_ddp draws too (docs/models.md).
    parser.add_argument("--init", default="")
    parser.add_argument("--world_size", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--image_size", type=int, default=32)
    parser.add_argument("--num_classes", type=int, default=10)
    parser.add_argument("--synthetic_size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--dtype", choices=["f32", "f64"], default="f64")
    # resnet_ddp's is 5e-4; other values show what a wrong update changes.
    parser.add_argument("--weight_decay", type=float, default=5e-4)
    # Time this many epochs instead of printing losses (bench/compare).
    parser.add_argument("--time_epochs", type=int, default=0)
    # Profile this many steps (after one warm-up) and print rank 0's ops.
    parser.add_argument("--profile_steps", type=int, default=0)
    args = parser.parse_args()
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(free_port())
    mp.spawn(main, args=(args.world_size, args), nprocs=args.world_size)
