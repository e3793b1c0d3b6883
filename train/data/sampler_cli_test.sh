#!/usr/bin/env bash
# The //train/data:sampler command line: output format, flags, and exit codes for
# bad values. Expected lists come from PyTorch 1.13's DistributedSampler.
set -uo pipefail
bin="$1"
fails=0

expect_output() {  # expected, then the flags
  local want=$1; shift
  local got
  got=$("$bin" "$@" 2>&1)
  if [[ $? -ne 0 || "$got" != "$want" ]]; then
    echo "FAIL: sampler $* printed '$got', expected '$want'"; fails=$((fails + 1))
  fi
}

expect_error() {  # message fragment, then the flags; every error is exit 2
  local want=$1; shift
  local got
  got=$("$bin" "$@" 2>&1)
  local rc=$?
  if [[ $rc -ne 2 || "$got" != *"$want"* ]]; then
    echo "FAIL: sampler $* exited $rc with '$got', expected exit 2 with '$want'"
    fails=$((fails + 1))
  fi
}

expect_output "4,5,0,2" --size=10 --num_replicas=3 --rank=0
expect_output "6,0,3" --size=10 --num_replicas=3 --rank=1 --epoch=1 --drop_last
expect_output "1,5" --size=7 --num_replicas=4 --rank=3 --seed=42 --epoch=5
expect_output "0,4,8" --size=13 --num_replicas=4 --rank=0 --noshuffle --drop_last
expect_output "" --size=0 --num_replicas=2 --rank=1
expect_error "rank must be in [0, 1]" --size=10 --num_replicas=2 --rank=2
expect_error "--size must be given and >= 0" --size=-1
expect_error "num_replicas (the world size) must be >= 1, got 0" --size=5 --num_replicas=0
expect_error "unexpected argument 'extra'" --size=5 extra
# Flag-parse errors are usage errors too (exit 2, one line naming the flag).
expect_error "sampler: unknown flag '--sise=5'" --sise=5
expect_error "bad value 'inf' for --size" --size=inf
expect_error "bad value 'abc' for --size" --size=abc
expect_error "unknown flag '--flagfile=x'" --flagfile=x
help=$("$bin" --help)
if [[ $? -ne 0 || "$help" != *"--num_replicas"* ]]; then
  echo "FAIL: sampler --help printed '$help'"; fails=$((fails + 1))
fi
# Never a signal, never unbounded memory (issue 18).
expect_error "overflows a 64-bit size" --size=9223372036854775807
expect_error "GiB of physical memory" --size=1000000000000000
expect_output "5" --size=10 --num_replicas=2147483647 --rank=5 --noshuffle
expect_output "9" --size=10 --num_replicas=9223372036854775807 --rank=9 --noshuffle

if [[ $fails -ne 0 ]]; then echo "$fails failure(s)"; exit 1; fi
echo "all sampler CLI checks passed"
