#!/usr/bin/python3
"""The flag sweep (issue 18 section 5): every numeric flag of every binary at
0, -1, its type's maximum, inf and nan (sampler, comm_benchmark,
comm_benchmark_mpi, mpi_allreduce_peer, ddp_benchmark, tensor_benchmark with
Google Benchmark's numeric flags, toy_ddp, digits_ddp, ddp_demo, amp_ddp,
resnet_ddp,
pipeline_demo, zero_benchmark, pipeline_benchmark, predict, predict_gpt2,
data_parallel_demo, pipe_demo).

    tests/misuse/flag_sweep.py [--only=TEXT]
    ./bazelw test //tests/misuse:flag_sweep_test

Each run starts from a fast, valid baseline command and changes one flag.
It must end by itself (a valid run or an error exit, any code below 128)
within SECONDS, under an address-space limit of MEMORY_GIB: no death by
signal (a failed allocation under the limit aborts, so unbounded memory
shows up as a signal), no hang. Values a flag's type cannot hold (-1 for an
unsigned flag, inf for an integer) must be refused by the flag parser, not
crash. Runs listed in KNOWN belong to another part of the tree and are
reported, not run (they would only burn the time limit); delete an entry once
its owner's fix is merged, and the sweep checks it again.
"""
import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_cases  # noqa: E402  (the shared runner: environment, limits)

SECONDS = 30
MEMORY_GIB = 4

INT_MAX = str(2**31 - 1)
INT64_MAX = str(2**63 - 1)
UINT64_MAX = str(2**64 - 1)
DOUBLE_MAX = "1.7976931348623157e308"
VALUES = {
    "int": ["0", "-1", INT_MAX, "inf", "nan"],
    "int64": ["0", "-1", INT64_MAX, "inf", "nan"],
    "uint64": ["0", "-1", UINT64_MAX, "inf", "nan"],
    "double": ["0", "-1", DOUBLE_MAX, "inf", "nan"],
}

# binary variable -> (baseline flags, {flag: type}). Baselines are the
# smallest valid runs, so a sweep value that is accepted finishes quickly.
BINARIES = {
    "SAMPLER": (["--size=10", "--num_replicas=2", "--rank=0"], {
        "size": "int64", "num_replicas": "int64", "rank": "int64",
        "seed": "int64", "epoch": "int64"}),
    "COMM_BENCHMARK": (["--world_sizes=2", "--ops=all_reduce",
                        "--min_bytes=8", "--max_bytes=64",
                        "--target_seconds=0.001", "--nostream",
                        "--warmup_seconds=0"], {
        "min_bytes": "int64", "max_bytes": "int64", "step_factor": "int64",
        "target_seconds": "double", "spin_us": "double",
        "warmup_seconds": "double"}),
    "DDP_BENCHMARK": (["--models=small", "--world_sizes=1", "--sweep_world=0",
                       "--nogemm_peak", "--target_seconds=0.01",
                       "--min_steps=1", "--max_steps=2", "--warmup_steps=0"], {
        "sweep_world": "int", "target_seconds": "double",
        "min_steps": "int64", "max_steps": "int64", "warmup_steps": "int64",
        "repeats": "int64"}),
    "TENSOR_BENCHMARK": (["--benchmark_filter=BM_MatMulCblas/M:256/K:256/N:256$",
                          "--benchmark_min_time=0.01"], {
        "blas_threads": "int", "benchmark_min_time": "double",
        "benchmark_repetitions": "int"}),
    "TOY_DDP": (["--backend=sim", "--world_size=2", "--epochs=1"], {
        "world_size": "int", "epochs": "int64", "batch_size": "int64",
        "lr": "double", "seed": "uint64", "loss_precision": "int",
        "checkpoint_every": "int64"}),
    "DDP_DEMO": (["--backend=sim", "--world_size=2", "--epochs=1",
                  "--dataset-size=8", "--batchSize=4"], {
        "world_size": "int", "epochs": "int64", "batchSize": "int64",
        "dataset_size": "int64", "num_classes": "int64", "seed": "uint64",
        "checkpoint_every": "int64"}),
    # MPI binaries run as singletons (one process, no mpirun needed).
    "COMM_BENCHMARK_MPI": (["--min_bytes=8", "--max_bytes=64",
                            "--target_seconds=0.001",
                            "--warmup_seconds=0"], {
        "min_bytes": "int64", "max_bytes": "int64",
        "target_seconds": "double", "warmup_seconds": "double"}),
    "MPI_ALLREDUCE_PEER": (["--min_bytes=8", "--max_bytes=64",
                            "--target_seconds=0.001",
                            "--warmup_seconds=0"], {
        "min_bytes": "int64", "max_bytes": "int64",
        "target_seconds": "double", "warmup_seconds": "double"}),
    "DIGITS_DDP": (["--backend=sim", "--world_size=2", "--epochs=1",
                    "--hidden=8", "--data=$DIGITS_CSV"], {
        "world_size": "int", "epochs": "int64", "global_batch_size": "int64",
        "lr": "double", "momentum": "double", "hidden": "int64",
        "seed": "uint64"}),
    "GPT_DDP": (["--backend=sim", "--world_size=2", "--n_layer=1",
                 "--n_head=2", "--n_embd=16", "--block_size=16",
                 "--batch_size=2", "--max_steps=2", "--warmup_steps=1",
                 "--data=$REPO/train/data/public_domain_english.txt"], {
        "world_size": "int", "n_layer": "int64", "n_head": "int64",
        "n_embd": "int64", "vocab": "int64", "block_size": "int64",
        "batch_size": "int64", "grad_accum": "int64", "max_steps": "int64",
        "warmup_steps": "int64", "log_every": "int64", "eval_every": "int64",
        "eval_blocks": "int64", "sample_tokens": "int64", "top_k": "int64",
        "seed": "uint64", "lr": "double", "min_lr": "double",
        "weight_decay": "double", "beta1": "double", "beta2": "double",
        "grad_clip": "double", "dropout": "double"}),
    "PIPELINE_DEMO": (["--backend=sim", "--world_size=2", "--steps=2"], {
        "world_size": "int", "steps": "int64", "chunks": "int64",
        "replicas": "int64", "batch_size": "int64", "hidden": "int64",
        "layers": "int64", "lr": "double", "seed": "uint64"}),
    "AMP_DDP": (["--backend=sim", "--world_size=2", "--steps=2"], {
        "world_size": "int", "steps": "int64", "batch_size": "int64",
        "lr": "double", "seed": "uint64"}),
    # ResNet-18 on 8x8 synthetic images, two steps (about 10 s under load):
    # the flags whose values size the run.
    "RESNET_DDP": (["--backend=sim", "--world_size=2", "--image_size=8",
                    "--batch_size=2", "--synthetic_size=8", "--epochs=1",
                    "--progress=off"], {
        "world_size": "int", "image_size": "int64", "batch_size": "int64",
        "synthetic_size": "int64", "num_classes": "int64",
        "epochs": "int64", "max_steps": "int64", "num_workers": "int64",
        "lr_step_epochs": "int64", "val_fraction": "double"}),
    # The large MLP of the memory table at one rank (about 4 s, 0.4 GB).
    "ZERO_BENCHMARK": (["--world_sizes=1", "--modes=ddp", "--speed_world=0"], {
        "speed_world": "int64", "speed_steps": "int64",
        "gpt_batch": "int64", "gpt_block": "int64"}),
    "PIPELINE_BENCHMARK": (["--part=throughput", "--width=8", "--batch=8",
                            "--steps=1"], {
        "width": "int64", "layers": "int64", "batch": "int64",
        "steps": "int64"}),
    # The one-process multi-device demos (issue 25: sizes that aborted).
    "DATA_PARALLEL_DEMO": (["--devices=2", "--steps=1", "--batch_size=4"], {
        "devices": "int64", "batch_size": "int64", "steps": "int64"}),
    "PIPE_DEMO": (["--devices=2", "--steps=1", "--batch_size=4",
                   "--chunks=2"], {
        "devices": "int64", "batch_size": "int64", "steps": "int64",
        "chunks": "int64"}),
    "PREDICT": (["--input=8", "--hidden=8", "--layers=1", "--batch=2",
                 "--steps=1", "--warmup=0", "--world_size=2"], {
        "nics_per_node": "int", "nic_gbps": "double", "world_size": "int",
        "compute_scale": "double", "input": "int64", "hidden": "int64",
        "layers": "int64", "classes": "int64", "batch": "int64",
        "warmup": "int64", "steps": "int64", "bucket_cap_mb": "int64"}),
    "PREDICT_GPT2": (["--gpus=8"], {
        "nics_per_node": "int", "nic_gbps": "double", "batch": "int64",
        "block": "int64", "tflops": "double", "bucket_cap_mb": "int64"}),
}

# (binary, flag, value) -> why it is not run here (owner and symptom, as
# found by this sweep). The examples' flags belong to the launch and checks
# branches.
KNOWN = {}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="",
                        help="run only the runs whose binary, flag or value "
                        "line contains this text")
    run_cases.add_tool_flags(parser)
    args = parser.parse_args()
    env = run_cases.tool_env(args)

    print("%-16s %-34s %-14s %7s  %s" % ("binary", "flag", "got", "seconds",
                                         "ok"))
    failures, known, ran = [], 0, 0
    for var, (baseline, flags) in BINARIES.items():
        binary = env[var]
        base = [a.replace("$DIGITS_CSV", env["DIGITS_CSV"]).replace(
            "$REPO", env["REPO"]) for a in baseline]
        for flag, kind in flags.items():
            for value in VALUES[kind]:
                name = os.path.basename(binary)
                setting = "--%s=%s" % (flag, value)
                if args.only and args.only not in " ".join(
                        [name, setting]):
                    continue
                why = KNOWN.get((name, flag, value))
                if why:
                    print("%-16s %-34s %-14s %7s  known: %s" % (
                        name, setting, "-", "-", why))
                    known += 1
                    continue
                scratch = tempfile.mkdtemp(prefix="sweep_")
                # The swept flag comes last: it overrides the baseline's.
                got, seconds, code, output = run_cases.run_command(
                    [binary] + base + [setting], SECONDS, env, scratch,
                    memory_bytes=MEMORY_GIB << 30)
                shutil.rmtree(scratch, ignore_errors=True)
                ran += 1
                ok = code is not None and code < 128
                print("%-16s %-34s %-14s %7.2f  %s" % (
                    name, setting, got, seconds, "ok" if ok else "FAIL"))
                sys.stdout.flush()
                if not ok:
                    failures.append((name, setting, got, output))
    for name, setting, got, output in failures:
        print("\n--- FAIL %s %s: %s (limits: %ds, %d GiB)\n%s" % (
            name, setting, got, SECONDS, MEMORY_GIB, output[-1500:]))
    print("\nflag sweep: %d run(s), %d failed, %d known (not run)" % (
        ran, len(failures), known))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
