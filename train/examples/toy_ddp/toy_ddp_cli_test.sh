#!/usr/bin/env bash
# The //train/examples:toy_ddp command line: the lines of each rank (grouped by their
# [GPUk] prefix, each rank's order kept) equal PyTorch 1.13's for the same
# script (bench/peers/toy_ddp.py --world_size=2), --log_ranks=0 keeps only
# rank 0's lines, and bad flags exit 2 with a message.
set -uo pipefail
bin="$1"
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

per_rank() { sort -s -k1,1; }  # stable: keeps each rank's own order

want_ws2='[GPU0] Epoch: 001/003 | Batchsize 002 | Train/Val Loss: 0.66
[GPU0] Epoch: 002/003 | Batchsize 002 | Train/Val Loss: 0.23
[GPU0] Epoch: 003/003 | Batchsize 002 | Train/Val Loss: 0.13
[GPU0] Training accuracy 1.0
[GPU0] Test accuracy 1.0
[GPU1] Epoch: 001/003 | Batchsize 002 | Train/Val Loss: 0.67
[GPU1] Epoch: 002/003 | Batchsize 002 | Train/Val Loss: 0.45
[GPU1] Epoch: 003/003 | Batchsize 002 | Train/Val Loss: 0.11
[GPU1] Training accuracy 1.0
[GPU1] Test accuracy 1.0'

got=$("$bin" --backend=sim --world_size=2 | per_rank)
[[ "$got" == "$want_ws2" ]] || fail "--backend=sim --world_size=2 printed:
$got"
if ! nvidia-smi -L >/dev/null 2>&1; then
  # Without a GPU (and without mpirun) the default backend is sim. With GPUs
  # it is nccl: train/nccl_examples_test.sh covers that.
  got=$("$bin" --world_size=2 | per_rank)
  [[ "$got" == "$want_ws2" ]] || fail "--world_size=2 (auto) printed:
$got"
fi

got=$("$bin" --backend=sim --world_size=2 --log_ranks=0)
want_rank0=$(grep '^\[GPU0\]' <<<"$want_ws2")
[[ "$got" == "$want_rank0" ]] || fail "--log_ranks=0 printed:
$got"

expect_error() {  # exit code, message fragment, then the flags
  local want_rc=$1 want=$2; shift 2
  local got rc
  got=$("$bin" "$@" 2>&1)
  rc=$?
  if [[ $rc -ne $want_rc || "$got" != *"$want"* ]]; then
    fail "toy_ddp $* exited $rc with '$got', expected $want_rc and '$want'"
  fi
}
# Without mpirun, --backend=mpi is a one-process MPI job (a singleton).
expect_error 2 "the MPI job has 1 rank(s); start it with mpirun -np 2" --backend=mpi --world_size=2
if ! nvidia-smi -L >/dev/null 2>&1; then
  expect_error 2 "--backend=nccl: needs a CUDA device, and none was found" --backend=nccl
  expect_error 2 "Run on the CPU instead: --backend=sim" --backend=nccl
fi
expect_error 2 "unknown --backend=tcp" --backend=tcp
expect_error 2 "gloo joins jobs started by tandemrun or torchrun" --backend=gloo
expect_error 2 "toy_ddp: --log_ranks=1 (expected all or 0)" --log_ranks=1
expect_error 2 "--world_size=-3; expected 0 (default) or more" --world_size=-3
expect_error 2 "the simulated cluster runs 1 to 8192 ranks" --backend=sim --world_size=9000
expect_error 2 "toy_ddp: --batch_size=0 (expected batch_size >= 1)" --backend=sim --world_size=1 --batch_size=0
expect_error 1 "lower --batch_size or --world_size" --backend=sim --world_size=4 --batch_size=3

if [[ $fails -ne 0 ]]; then echo "$fails failure(s)"; exit 1; fi
echo "all toy_ddp CLI checks passed"
