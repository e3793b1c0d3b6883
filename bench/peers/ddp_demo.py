#!/usr/bin/python3
"""The DDP tutorials' Conv2d script ("ddp_demo.py") in PyTorch: the peer of
tandem's //train:ddp_demo.

The tutorial's script, run on the CPU: the gloo backend instead of NCCL, no
.cuda() calls, and torch.manual_seed(--seed) before the data and the model
are made so that runs are repeatable (the tutorial seeds nothing). Everything
else is the script: RandomDataset (torch.randn images 3x32x32, labels 0),
Conv2d(3, 16, 3) -> Linear(16*30*30, num_classes) -> Softmax(dim=1),
CrossEntropyLoss, SGD(lr=0.1, momentum=0.9), DDP, a DistributedSampler with
set_epoch, and on rank 0 "Step: N, Loss: X" per step and
"Epoch N Finished !" per epoch.

    torchrun --nproc_per_node=2 bench/peers/ddp_demo.py --batchSize 64 --epochs 10
    bench/peers/ddp_demo.py --world_size=2 --batchSize 64   # mp.spawn, no torchrun

--gpu_id sets CUDA_VISIBLE_DEVICES as the tutorial does (nothing here uses a
GPU). Uses Debian's python3-torch (PyTorch 1.13, CPU), with OpenBLAS on one
thread (OPENBLAS_NUM_THREADS=1 unless set: see below) so that the losses do
not depend on the machine's core count; tandem's ddp_demo prints the same
losses bit for bit (bench/peers/compare_ddp_demo.py).
"""
import argparse
import os
import socket
import sys

# torch.set_num_threads(1) below does not reach OpenBLAS in Debian's build
# (PyTorch calls libblas's sgemm_, OpenBLAS, which starts one thread per
# core); its threaded driver splits the K loop of a GEMM differently, so
# the Linear layer's bits would depend on the machine's core count. One
# thread, set before OpenBLAS loads, makes the run the same everywhere.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, Dataset
    from torch.utils.data.distributed import DistributedSampler
    from rank_exit import exit_rank
except ImportError:
    sys.exit("ddp_demo.py: PyTorch is not installed; "
             "sudo apt-get install python3-torch")


class RandomDataset(Dataset):
    def __init__(self, dataset_size, image_size=32):
        images = torch.randn(dataset_size, 3, image_size, image_size)
        labels = torch.zeros(dataset_size, dtype=int)
        self.data = list(zip(images, labels))

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        return self.data[idx]


class Model(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.conv2d = nn.Conv2d(3, 16, 3)
        self.fc = nn.Linear(30 * 30 * 16, num_classes)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        batch_size = x.shape[0]
        x = self.conv2d(x)
        x = x.reshape(batch_size, -1)
        x = self.fc(x)
        out = self.softmax(x)
        return out


def main(rank, world_size, args):
    torch.set_num_threads(1)
    dist.init_process_group(backend="gloo", rank=rank, world_size=world_size)
    torch.manual_seed(args.seed)
    dataset = RandomDataset(args.dataset_size)
    model = Model(args.num_classes)
    sampler = DistributedSampler(dataset)
    data_loader = DataLoader(dataset, batch_size=args.batchSize,
                             sampler=sampler)
    model = DDP(model)  # CPU + gloo: no device_ids
    loss_func = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    model.train()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for step, (images, labels) in enumerate(data_loader):
            preds = model(images)
            loss = loss_func(preds, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if rank == 0:
                print(f"Step: {step}, Loss: {loss.item()}", flush=True)
        if rank == 0:
            print(f"Epoch {epoch} Finished !", flush=True)
    exit_rank()  # rank_exit.py says why not destroy_process_group


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu_id", type=str, default="")
    parser.add_argument("--batchSize", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--dataset-size", type=int, default=128)
    parser.add_argument("--num-classes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    # Without torchrun: spawn this many ranks.
    parser.add_argument("--world_size", type=int, default=2)
    args = parser.parse_args()
    if args.gpu_id:
        os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu_id
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun
        main(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
    else:
        os.environ["MASTER_ADDR"] = "localhost"
        os.environ["MASTER_PORT"] = str(free_port())
        mp.spawn(main, args=(args.world_size, args), nprocs=args.world_size)
