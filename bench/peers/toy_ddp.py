#!/usr/bin/python3
"""The DDP tutorial's toy example in PyTorch: the peer of tandem's //train/examples:toy_ddp.

This is Sebastian Raschka's "ddp-script.py" (LLMs-from-scratch, appendix A)
run on the CPU: the gloo backend instead of NCCL, no device_ids, and
torch.manual_seed right before the model is built so that every run starts
from the same weights. Everything else is the tutorial's code: the five-point
training set, an MLP 2 -> 30 -> 20 -> 2, SGD, a DistributedSampler with
set_epoch, one loss line per step on every rank, then each rank's training
accuracy (over its own shard) and test accuracy.

    bench/peers/toy_ddp.py --world_size=2

Uses Debian's python3-torch (PyTorch 1.13, CPU). The lines of different ranks
interleave differently from run to run; bench/peers/compare_toy_ddp.py
compares per rank.
"""
import argparse
import os
import socket
import sys

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, Dataset
    from torch.utils.data.distributed import DistributedSampler
    from rank_exit import exit_rank
except ImportError:
    sys.exit("toy_ddp.py: PyTorch is not installed; "
             "sudo apt-get install python3-torch")


class ToyDataset(Dataset):
    def __init__(self, X, y):
        self.features = X
        self.labels = y

    def __getitem__(self, index):
        return self.features[index], self.labels[index]

    def __len__(self):
        return self.labels.shape[0]


class NeuralNetwork(torch.nn.Module):
    def __init__(self, num_inputs, num_outputs):
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(num_inputs, 30),
            torch.nn.ReLU(),
            torch.nn.Linear(30, 20),
            torch.nn.ReLU(),
            torch.nn.Linear(20, num_outputs),
        )

    def forward(self, x):
        return self.layers(x)


def prepare_dataset(batch_size):
    X_train = torch.tensor([
        [-1.2, 3.1],
        [-0.9, 2.9],
        [-0.5, 2.6],
        [2.3, -1.1],
        [2.7, -1.5],
    ])
    y_train = torch.tensor([0, 0, 0, 1, 1])
    X_test = torch.tensor([
        [-0.8, 2.8],
        [2.6, -1.6],
    ])
    y_test = torch.tensor([0, 1])

    train_ds = ToyDataset(X_train, y_train)
    test_ds = ToyDataset(X_test, y_test)

    train_loader = DataLoader(
        dataset=train_ds,
        batch_size=batch_size,
        shuffle=False,  # False because of DistributedSampler below
        pin_memory=True,
        drop_last=True,
        # Chunks batches across GPUs without overlapping samples:
        sampler=DistributedSampler(train_ds),
    )
    test_loader = DataLoader(
        dataset=test_ds,
        batch_size=batch_size,
        shuffle=False,
    )
    return train_loader, test_loader


def compute_accuracy(model, dataloader, device):
    model = model.eval()
    correct = 0.0
    total_examples = 0
    for idx, (features, labels) in enumerate(dataloader):
        features, labels = features.to(device), labels.to(device)
        with torch.no_grad():
            logits = model(features)
        predictions = torch.argmax(logits, dim=1)
        compare = labels == predictions
        correct += torch.sum(compare)
        total_examples += len(compare)
    return (correct / total_examples).item()


def main(rank, world_size, args):
    torch.set_num_threads(1)
    dist.init_process_group(backend="gloo", rank=rank, world_size=world_size)

    def log(text):
        # --log_ranks=0 keeps exactly rank 0's lines of the default output.
        # One write per line, flushed: lines of different ranks (processes)
        # may interleave but never mid-line.
        if args.log_ranks == "all" or rank == 0:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()

    train_loader, test_loader = prepare_dataset(args.batch_size)
    torch.manual_seed(args.seed)
    model = NeuralNetwork(num_inputs=2, num_outputs=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    model = DDP(model)  # CPU + gloo: no device_ids

    num_epochs = args.epochs
    for epoch in range(num_epochs):
        train_loader.sampler.set_epoch(epoch)
        model.train()
        for features, labels in train_loader:
            logits = model(features)
            loss = F.cross_entropy(logits, labels)  # Loss function
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            log(f"[GPU{rank}] Epoch: {epoch+1:03d}/{num_epochs:03d}"
                f" | Batchsize {labels.shape[0]:03d}"
                f" | Train/Val Loss: {loss:.{args.loss_precision}f}")

    model.eval()
    train_acc = compute_accuracy(model, train_loader, device="cpu")
    log(f"[GPU{rank}] Training accuracy {train_acc}")
    test_acc = compute_accuracy(model, test_loader, device="cpu")
    log(f"[GPU{rank}] Test accuracy {test_acc}")
    exit_rank()  # rank_exit.py says why not destroy_process_group


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world_size", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=123)
    parser.add_argument("--log_ranks", choices=["all", "0"], default="all")
    # Digits of the printed loss (the tutorial prints 2); more digits show how
    # close the two implementations are.
    parser.add_argument("--loss_precision", type=int, default=2)
    args = parser.parse_args()
    if args.world_size < 1:
        sys.exit("toy_ddp.py: --world_size must be >= 1")
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(free_port())
    mp.spawn(main, args=(args.world_size, args), nprocs=args.world_size)
