"""tandem vs PyTorch 1.13 under bf16 CPU autocast: Linear, Conv2d, an MLP.

Reads the lines of tandem's //tensor/amp:amp_fidelity_dump ("name v0 v1 ...")
from the file given as argv[1] and recomputes the same forward and backward on
the same inputs (v(i, k) = sin(0.37 i + k) * scale, in float32) twice:
  1. with torch.autocast("cpu", dtype=torch.bfloat16), as a user would;
  2. as autocast's contract computed exactly in PyTorch (bf16 operands,
     float64 sums, a bf16 rounding at every kernel output and at the same
     points in backward).
It prints, per tensor, the largest difference in bf16 ulps of the reference
value (an ulp of bf16 at |v| is 2^(floor(log2 |v|) - 7)). Exit status 1 when
tandem is further than --max_ulps (default 1) from the exact contract.
PyTorch 1.13's own CPU bf16 kernels on a processor without AVX-512 (no
oneDNN bf16) round partial sums to bf16, so on such a machine they sit
further from the contract than tandem does; the first table shows by how
much.

    /usr/bin/python3 bench/peers/amp_fidelity.py dump.txt
"""
import argparse
import math
import sys

import torch
import torch.nn.functional as F


def inp(shape, k, scale, grad):
    n = math.prod(shape)
    v = torch.tensor([math.sin(0.37 * i + k) * scale for i in range(n)],
                     dtype=torch.float64).float().reshape(shape)
    return v.requires_grad_(grad)


def torch_values():
    out = {}
    ac = lambda: torch.autocast("cpu", dtype=torch.bfloat16)
    x, w, b = inp((8, 16), 1, 1.0, True), inp((12, 16), 2, 0.25, True), inp((12,), 3, 0.1, True)
    t = inp((8, 12), 4, 1.0, False)
    with ac():
        y = F.linear(x, w, b)
        loss = F.mse_loss(y, t)
    loss.backward()
    out.update({"linear.y": y, "linear.loss": loss, "linear.dx": x.grad,
                "linear.dw": w.grad, "linear.db": b.grad})
    x, w, b = inp((2, 3, 6, 6), 5, 1.0, True), inp((4, 3, 3, 3), 6, 0.3, True), inp((4,), 7, 0.1, True)
    t = inp((2, 4, 6, 6), 8, 1.0, False)
    with ac():
        y = F.conv2d(x, w, b, padding=1)
        loss = F.mse_loss(y, t)
    loss.backward()
    out.update({"conv.y": y, "conv.loss": loss, "conv.dx": x.grad,
                "conv.dw": w.grad, "conv.db": b.grad})
    x = inp((8, 16), 9, 1.0, False)
    w1, b1 = inp((32, 16), 10, 0.25, True), inp((32,), 11, 0.1, True)
    w2, b2 = inp((10, 32), 12, 0.18, True), inp((10,), 13, 0.1, True)
    labels = torch.tensor([i % 10 for i in range(8)])
    with ac():
        h = F.relu(F.linear(x, w1, b1))
        logits = F.linear(h, w2, b2)
        loss = F.cross_entropy(logits, labels)
    loss.backward()
    out.update({"mlp.logits": logits, "mlp.loss": loss, "mlp.dw1": w1.grad,
                "mlp.db1": b1.grad, "mlp.dw2": w2.grad, "mlp.db2": b2.grad})
    return {k: v.detach().float().flatten().tolist() for k, v in out.items()}


class RoundBf16(torch.autograd.Function):
    """Rounds to bf16 (kept in float64) forward AND backward: the points where
    an autocast kernel stores a bf16 tensor (inputs cast, outputs, and the
    gradients flowing back through them)."""

    @staticmethod
    def forward(ctx, t):
        return t.bfloat16().double()

    @staticmethod
    def backward(ctx, g):
        return g.bfloat16().double()


def exact_values():
    """Autocast's contract computed exactly: bf16 operands, products summed
    in float64 (no intermediate rounding), one rounding to bf16 per kernel
    output; losses in float64. What a bf16 kernel with f32 accumulation
    approaches (equal when the sums are short)."""
    R = RoundBf16.apply
    out = {}
    d = lambda t: t.detach().double().requires_grad_(t.requires_grad)
    x, w, b = (d(inp((8, 16), 1, 1.0, True)), d(inp((12, 16), 2, 0.25, True)),
               d(inp((12,), 3, 0.1, True)))
    t = inp((8, 12), 4, 1.0, False).double()
    y = R(F.linear(R(x), R(w), R(b)))
    loss = F.mse_loss(y, t)
    loss.backward()
    out.update({"linear.y": y, "linear.loss": loss, "linear.dx": x.grad,
                "linear.dw": w.grad, "linear.db": b.grad})
    x, w, b = (d(inp((2, 3, 6, 6), 5, 1.0, True)), d(inp((4, 3, 3, 3), 6, 0.3, True)),
               d(inp((4,), 7, 0.1, True)))
    t = inp((2, 4, 6, 6), 8, 1.0, False).double()
    y = R(F.conv2d(R(x), R(w), R(b), padding=1))
    loss = F.mse_loss(y, t)
    loss.backward()
    out.update({"conv.y": y, "conv.loss": loss, "conv.dx": x.grad,
                "conv.dw": w.grad, "conv.db": b.grad})
    x = inp((8, 16), 9, 1.0, False).double()
    w1, b1 = d(inp((32, 16), 10, 0.25, True)), d(inp((32,), 11, 0.1, True))
    w2, b2 = d(inp((10, 32), 12, 0.18, True)), d(inp((10,), 13, 0.1, True))
    labels = torch.tensor([i % 10 for i in range(8)])
    h = F.relu(R(F.linear(R(x), R(w1), R(b1))))
    logits = R(F.linear(h, R(w2), R(b2)))
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    out.update({"mlp.logits": logits, "mlp.loss": loss, "mlp.dw1": w1.grad,
                "mlp.db1": b1.grad, "mlp.dw2": w2.grad, "mlp.db2": b2.grad})
    return {k: v.detach().float().flatten().tolist() for k, v in out.items()}


def ulp(v):
    if v == 0:
        return 2.0 ** -133
    return 2.0 ** (math.floor(math.log2(abs(v))) - 7)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dump")
    parser.add_argument("--max_ulps", type=float, default=1.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with open(args.dump) as f:
        # %.9g round-trips float32: parse back to float32 exactly.
        dump = {l.split()[0]: torch.tensor([float(v) for v in l.split()[1:]],
                                           dtype=torch.float32).tolist()
                for l in f}
    worst_exact = 0.0
    for title, ref in (("PyTorch 1.13 torch.autocast('cpu', bfloat16)",
                        torch_values()),
                       ("exact autocast contract (float64 sums, bf16 roundings)",
                        exact_values())):
        print(f"tandem vs {title}:")
        worst_all = 0.0
        for name, want in ref.items():
            got = dump.get(name)
            if got is None or len(got) != len(want):
                print(f"  {name}: missing or wrong size in the dump")
                return 1
            worst = max((abs(g - w) / ulp(w) for g, w in zip(got, want)), default=0)
            exact = sum(g == w for g, w in zip(got, want))
            print(f"  {name:12s} {len(got):4d} values, {exact:4d} identical, "
                  f"max {worst:.3f} bf16 ulp")
            worst_all = max(worst_all, worst)
        print(f"  worst: {worst_all:.3f} bf16 ulp")
        worst_exact = worst_all
    print(f"limit (against the exact contract): {args.max_ulps} bf16 ulp")
    return 0 if worst_exact <= args.max_ulps else 1

if __name__ == "__main__":
    sys.exit(main())
