#!/usr/bin/python3
"""Checks that tandem's //train/examples:toy_ddp prints the lines PyTorch prints.

Runs bench/peers/toy_ddp.py (PyTorch 1.13, gloo, mp.spawn, CPU) and the tandem
binary with the same flags, for each world size, and compares the output
rank by rank: the lines of each rank (selected by their "[GPUk]" prefix, in
the order that rank printed them) must be identical. How ranks interleave
differs from run to run and is not compared.

    ./bazelw build //train/examples:toy_ddp
    bench/peers/compare_toy_ddp.py                       # world sizes 1 2 3 4
    bench/peers/compare_toy_ddp.py --world_sizes 2 --epochs 5 --lr 0.1

With --margin it also runs both at 9 decimals and reports the largest loss
difference and how close any loss comes to a rounding boundary of the printed
precision (where a difference of 1e-7 could flip the last printed digit).

Exits 0 when every world size matches, 1 otherwise (with a diff), 2 on setup
errors.
"""
import argparse
import difflib
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "toy_ddp.py")
PREFIX = re.compile(r"^\[GPU(\d+)\] ")
LOSS = re.compile(r"Train/Val Loss: (-?[0-9.]+|nan|inf)$")


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(f"compare_toy_ddp: {' '.join(cmd)} exited with "
                         f"{proc.returncode}\n{proc.stderr}")
        sys.exit(2)
    return proc.stdout.splitlines()


def per_rank(lines):
    """{rank: [lines in order]}; lines without a prefix go under -1."""
    ranks = {}
    for line in lines:
        m = PREFIX.match(line)
        ranks.setdefault(int(m.group(1)) if m else -1, []).append(line)
    return ranks


def flags(args, world_size, precision):
    return [f"--world_size={world_size}", f"--epochs={args.epochs}",
            f"--batch_size={args.batch_size}", f"--lr={args.lr}",
            f"--seed={args.seed}", f"--log_ranks={args.log_ranks}",
            f"--loss_precision={precision}"]


def sorted_lines(lines):
    ranks = per_rank(lines)
    return [line for r in sorted(ranks) for line in ranks[r]]


def losses(lines):
    out = []
    for r, rank_lines in sorted(per_rank(lines).items()):
        for line in rank_lines:
            m = LOSS.search(line)
            if m:
                out.append((r, float(m.group(1))))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default="bazel-bin/train/examples/toy_ddp",
                        help="the tandem binary (./bazelw build //train/examples:toy_ddp)")
    parser.add_argument("--world_sizes", type=int, nargs="+",
                        default=[1, 2, 3, 4])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=123)
    parser.add_argument("--log_ranks", choices=["all", "0"], default="all")
    parser.add_argument("--loss_precision", type=int, default=2)
    parser.add_argument("--margin", action="store_true",
                        help="also report loss differences at 9 decimals")
    args = parser.parse_args()
    if not os.access(args.binary, os.X_OK):
        sys.stderr.write(f"compare_toy_ddp: {args.binary} not found; run "
                         "./bazelw build //train/examples:toy_ddp first\n")
        return 2

    failed = False
    for ws in args.world_sizes:
        torch_lines = sorted_lines(run([sys.executable, PEER] +
                                       flags(args, ws, args.loss_precision)))
        # The CPU reference: on a GPU machine the default backend is nccl.
        tandem_lines = sorted_lines(run([args.binary, "--backend=sim"] +
                                        flags(args, ws, args.loss_precision)))
        if torch_lines == tandem_lines:
            print(f"world_size={ws}: OK, {len(tandem_lines)} lines identical "
                  f"per rank")
        else:
            failed = True
            print(f"world_size={ws}: MISMATCH (lines per rank, in each "
                  "rank's order)")
            sys.stdout.writelines(difflib.unified_diff(
                [l + "\n" for l in torch_lines],
                [l + "\n" for l in tandem_lines],
                fromfile="pytorch", tofile="tandem"))
        if args.margin:
            t = losses(run([sys.executable, PEER] + flags(args, ws, 9)))
            d = losses(run([args.binary, "--backend=sim"] + flags(args, ws, 9)))
            if len(t) != len(d):
                print(f"  margin: {len(t)} PyTorch losses vs {len(d)} tandem")
                failed = True
                continue
            worst = max((abs(a[1] - b[1]) for a, b in zip(t, d)), default=0.0)
            step = 10.0 ** -args.loss_precision
            # Distance of each loss to the nearest rounding boundary
            # (k + 0.5) * step of the printed precision.
            closest = min((abs((v / step) % 1.0 - 0.5) * step
                           for _, v in t), default=float("inf"))
            print(f"  margin: max |loss difference| = {worst:.3g} over "
                  f"{len(t)} losses; closest loss to a rounding boundary of "
                  f"{args.loss_precision} decimals: {closest:.3g} away")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
