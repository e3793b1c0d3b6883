#!/usr/bin/python3
"""Compares tandem's //train:ddp_demo with the PyTorch script
bench/peers/ddp_demo.py (PyTorch 1.13, gloo, CPU), run with the same flags,
and requires every loss to be bit-identical.

Both print "Step: N, Loss: X" with X as Python prints loss.item() (the
float32 loss widened to double, shortest repr: up to 17 digits) and
"Epoch N Finished !". Every line must be identical; the script reports how
many losses are bit for bit equal and the largest difference in float32
units in the last place (ulps), and fails on any differing bit.

What makes the bits equal (docs/checkpoints.md, docs/pytorch_compat.md):
tandem's Generator reproduces torch.randn's AVX2 Box-Muller (Cephes
log/sincos); ddp_demo makes PyTorch's kernel calls (oneDNN's convolution
primitives, OpenBLAS sgemm for the Linear layer and its gradients) and
computes softmax, log-softmax, the NLL loss and the bias gradient's sum in
PyTorch's order with SLEEF's expf/logf. The PyTorch side runs OpenBLAS on
one thread (ddp_demo.py sets OPENBLAS_NUM_THREADS=1), as tandem does.

    ./bazelw build //train:ddp_demo
    /usr/bin/python3 bench/peers/compare_ddp_demo.py      # world size 2
    /usr/bin/python3 bench/peers/compare_ddp_demo.py --world_size 1 --epochs 5
    /usr/bin/python3 bench/peers/compare_ddp_demo.py --world_size 4 \
        --batchSize 8 --epochs 3 --num-classes 5

Exits 0 when every line is identical, 1 otherwise (listing the lines), 2 on
setup errors. //bench:compare_ddp_demo_test runs it (skipping without
PyTorch).
"""
import argparse
import os
import re
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PEER = os.path.join(HERE, "ddp_demo.py")
TANDEM = os.path.join(ROOT, "bazel-bin", "train", "examples", "ddp_demo")
LOSS = re.compile(r"^Step: (\d+), Loss: (.*)$")


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(f"compare_ddp_demo: {' '.join(cmd)} exited with "
                         f"{proc.returncode}\n{proc.stderr}")
        sys.exit(2)
    return proc.stdout.splitlines()


def f32_bits(x):
    b = struct.unpack("<i", struct.pack("<f", x))[0]
    return b if b >= 0 else -(b & 0x7FFFFFFF)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world_size", type=int, default=2)
    p.add_argument("--batchSize", type=int, default=32)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--dataset-size", type=int, default=128)
    p.add_argument("--num-classes", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="sim",
                   help="tandem's engine: sim (threads) or gloo")
    p.add_argument("--tandem", default=TANDEM,
                   help="the ddp_demo binary (default: bazel-bin's)")
    args = p.parse_args()
    if not os.path.exists(args.tandem):
        sys.stderr.write(f"compare_ddp_demo: {args.tandem} is missing; run "
                         "./bazelw build //train:ddp_demo\n")
        return 2
    flags = [f"--batchSize={args.batchSize}", f"--epochs={args.epochs}",
             f"--dataset-size={args.dataset_size}",
             f"--num-classes={args.num_classes}", f"--seed={args.seed}"]
    torch_lines = run(["/usr/bin/python3", PEER,
                       f"--world_size={args.world_size}"] + flags)
    tandem_lines = run([args.tandem, f"--backend={args.backend}",
                        f"--world_size={args.world_size}"] + flags)
    bad = []
    worst = 0
    bitwise = 0
    if len(torch_lines) != len(tandem_lines):
        bad.append(f"{len(torch_lines)} lines from PyTorch, "
                   f"{len(tandem_lines)} from tandem")
    for i, (t, d) in enumerate(zip(torch_lines, tandem_lines)):
        mt, md = LOSS.match(t), LOSS.match(d)
        if not mt or not md:
            if t != d:
                bad.append(f"line {i + 1}: torch {t!r} tandem {d!r}")
            continue
        a, b = float(mt.group(2)), float(md.group(2))
        ulps = abs(f32_bits(a) - f32_bits(b))
        worst = max(worst, ulps)
        bitwise += ulps == 0
        if t != d:
            bad.append(f"line {i + 1}: torch {t!r} tandem {d!r} ({ulps} ulp)")
    steps = sum(1 for t in torch_lines if LOSS.match(t))
    print(f"compare_ddp_demo: world size {args.world_size}, {steps} losses: "
          f"{bitwise} bit-identical, largest difference {worst} ulp(s)")
    for b in bad:
        print("  " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
