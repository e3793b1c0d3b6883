#!/usr/bin/python3
"""Checks tandem's //train/data:sampler against PyTorch's DistributedSampler.

Runs both on many random configurations (dataset size, replicas, rank, seed,
epoch, shuffle, drop_last) and compares the index lists exactly. Uses Debian's
python3-torch (PyTorch 1.13, CPU):

    ./bazelw build //train/data:sampler
    bench/peers/check_sampler.py --binary bazel-bin/train/data/sampler --cases 300

Exits 0 when every case matches, 1 (printing the first mismatches) otherwise.
"""
import argparse
import random
import subprocess
import sys

try:
    from torch.utils.data.distributed import DistributedSampler
except ImportError:
    sys.exit("check_sampler: PyTorch is not installed; "
             "sudo apt-get install python3-torch")


def torch_indices(n, r, k, seed, epoch, shuffle, drop_last):
    sampler = DistributedSampler(range(n), num_replicas=r, rank=k,
                                 shuffle=shuffle, seed=seed,
                                 drop_last=drop_last)
    sampler.set_epoch(epoch)
    return [int(i) for i in sampler]


def tandem_indices(binary, n, r, k, seed, epoch, shuffle, drop_last):
    out = subprocess.run(
        [binary, f"--size={n}", f"--num_replicas={r}", f"--rank={k}",
         f"--seed={seed}", f"--epoch={epoch}",
         "--shuffle" if shuffle else "--noshuffle",
         "--drop_last" if drop_last else "--nodrop_last"],
        check=True, capture_output=True, text=True).stdout.strip()
    return [int(x) for x in out.split(",")] if out else []


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default="bazel-bin/train/data/sampler")
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1234,
                        help="seed of the case generator")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    mismatches = 0
    for _ in range(args.cases):
        n = rng.choice([0, 1, 2, 3, 5, 10, 17, 100, 1000, rng.randrange(5000)])
        r = rng.choice([1, 2, 3, 4, 7, 8, 16])
        case = (n, r, rng.randrange(r), rng.randrange(2**31), rng.randrange(50),
                rng.random() < 0.8, rng.random() < 0.5)
        want = torch_indices(*case)
        got = tandem_indices(args.binary, *case)
        if want != got:
            mismatches += 1
            if mismatches <= 5:
                print(f"MISMATCH n,R,rank,seed,epoch,shuffle,drop_last={case}\n"
                      f"  torch : {want[:20]}\n  tandem: {got[:20]}")
    print(f"check_sampler: {args.cases - mismatches}/{args.cases} cases identical")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
