#!/usr/bin/python3
"""Where a gpt_ddp step's CPU time goes, from a perf profile: the share of
each part of the step (matmuls, attention, LayerNorm, GELU, softmax and
cross-entropy, all-reduce, optimizer, the rest), by the symbol each sample
was in. Model set-up (weight draws) is left out and the rest rescaled, so
that the split is the training steps' (run enough steps that the final
validation, counted with the forward ops, is small: --eval_blocks=1).

    perf record -o /tmp/gpt.data bazel-bin/train/examples/gpt_ddp \\
        --n_layer=6 --n_head=6 --n_embd=384 --block_size=256 --batch_size=8 \\
        --max_steps=4 --warmup_steps=1 --eval_blocks=1 --progress=off \\
        --data=CORPUS
    bench/gpt_step_split.py /tmp/gpt.data     # bench/PERFORMANCE.md's table
"""
import re
import subprocess
import sys

# First match wins; patterns are searched in the demangled symbol.
PARTS = [
    ("set-up (excluded)", r"DrawConv1D|NormalFill|CephesLogf|CephesSinCos|"
                          r"KaimingUniform|init::|Generator::"),
    ("matmuls (GEMM)", r"sgemm|gemm_|cblas|CpuLinear|CpuMatMul|MatMul"),
    ("attention", r"Attention|RowTimesT|WeightedRows|SoftmaxRow|ScaleScores|"
                  r"TransposeWiden"),
    ("LayerNorm", r"LayerNorm"),
    ("GELU", r"Gelu|tanhf|expm1f"),
    ("softmax + cross-entropy", r"Softmax|LogSoftmax|Nll|CrossEntropy|Sleef"),
    ("all-reduce (sim)", r"comm::|sim::|Reduce|AllReduce|futex|Bucket"),
    ("optimizer (AdamW)", r"AdamW|optim::|ClipGrad"),
    ("memory (page faults, copies, zeroing)", r"memmove|memcpy|memset|"
     r"clear_page|page_fault|Permute|Copy|Fill"),
]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: bench/gpt_step_split.py PERF_DATA")
    out = subprocess.run(
        ["perf", "report", "-i", sys.argv[1], "--no-children", "--sort",
         "dso,symbol", "-g", "none", "--percent-limit", "0", "--stdio"],
        capture_output=True, text=True, check=True).stdout
    shares = {name: 0.0 for name, _ in PARTS}
    shares["other"] = 0.0
    for line in out.splitlines():
        m = re.match(r"^\s+([\d.]+)%\s+(\S.*?)\s+\[[.k]\]\s+(.*?)[\s-]*$",
                     line)
        if not m:
            continue
        pct, dso, sym = float(m.group(1)), m.group(2), m.group(3)
        if dso.startswith("[JIT]"):
            # oneDNN's JIT-generated sgemm kernels (tensor/cpu/blas.cc sends
            # A.B there); the only JIT code in the process.
            sym = "sgemm (oneDNN JIT)"
        if "[k]" in line and not re.search(PARTS[-1][1], sym):
            shares["kernel (scheduling, other)"] = shares.get(
                "kernel (scheduling, other)", 0.0) + pct
            continue
        for name, pattern in PARTS:
            if re.search(pattern, sym):
                shares[name] += pct
                break
        else:
            shares["other"] += pct
    setup = shares.pop("set-up (excluded)")
    total = sum(shares.values())
    print(f"| part of the step | share of CPU time |")
    print(f"|---|---:|")
    for name, pct in sorted(shares.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {100 * pct / total:.1f} % |")
    print(f"\n(set-up excluded: {setup:.1f} % of all samples)")


if __name__ == "__main__":
    main()
