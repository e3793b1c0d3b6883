#!/usr/bin/env bash
# The //train/examples:digits_ddp command line: a short simulated run prints the
# header, one line per epoch and the accuracy on rank 0 only; bad flags and
# --backend=nccl without a CUDA device exit 2 with a message that says what to
# run instead (never a crash or a hang).
set -uo pipefail
bin="$1"
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

got=$("$bin" --backend=sim --world_size=2 --epochs=1)
rc=$?
[[ $rc -eq 0 ]] || fail "--backend=sim --world_size=2 --epochs=1 exited $rc"
[[ $(wc -l <<<"$got") -eq 3 ]] || fail "expected 3 lines, got:
$got"
[[ "$got" == "digits_ddp: 1438 train / 359 test samples, 2 rank(s) on sim, batch 32 per rank, MLP 64-128-10"* ]] ||
  fail "unexpected header in:
$got"
grep -qE '^Epoch: 001/001 \| Train loss: [0-9]+\.[0-9]{4}$' <<<"$got" ||
  fail "no epoch line in:
$got"
grep -qE '^Test accuracy: [01]\.[0-9]{4} \([0-9]+/359, all ranks\)$' <<<"$got" ||
  fail "no accuracy line in:
$got"

expect_error() {  # exit code, message fragment, then the flags
  local want_rc=$1 want=$2; shift 2
  local got rc
  got=$("$bin" "$@" 2>&1)
  rc=$?
  if [[ $rc -ne $want_rc || "$got" != *"$want"* ]]; then
    fail "digits_ddp $* exited $rc with '$got', expected $want_rc and '$want'"
  fi
}
if ! nvidia-smi -L >/dev/null 2>&1; then
  expect_error 2 "digits_ddp: --backend=nccl: needs a CUDA device, and none was found" --backend=nccl
  expect_error 2 "Run on the CPU instead: --backend=sim" --backend=nccl --world_size=2
fi
expect_error 2 "unknown --backend=tcp" --backend=tcp
expect_error 2 "gloo joins jobs started by tandemrun or torchrun" --backend=gloo
expect_error 2 "--world_size=-1; expected 0 (default) or more" --world_size=-1
expect_error 2 "the MPI job has 1 rank(s); start it with mpirun -np 2" --backend=mpi --world_size=2

if [[ $fails -ne 0 ]]; then echo "$fails failure(s)"; exit 1; fi
echo "all digits_ddp CLI checks passed"
