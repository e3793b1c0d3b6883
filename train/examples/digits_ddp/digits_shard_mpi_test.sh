#!/usr/bin/env bash
# digits_ddp --shard=zero1|zero2|fsdp on the mpi engine (2 processes under
# mpirun): each mode prints the same training losses and the same test
# accuracy as DDP (--shard=none), digit for digit, because the modes give the
# same weights bit for bit.
#
#   digits_shard_mpi_test.sh MPIRUN_WRAPPER DIGITS_DDP
set -uo pipefail
mpirun_wrapper=$1
digits=$2
fails=0

run() {
  "$mpirun_wrapper" 2 "$digits" --backend=mpi --epochs=2 --shard="$1" 2>&1 |
    grep -E "Train loss|Test accuracy"
}

want=$(run none)
if [[ "$want" != *"Test accuracy"* ]]; then
  echo "FAIL: --shard=none printed no accuracy: '$want'"
  exit 1
fi
for mode in zero1 zero2 fsdp; do
  got=$(run "$mode")
  if [[ "$got" != "$want" ]]; then
    echo "FAIL: --shard=$mode printed '$got', expected DDP's '$want'"
    fails=$((fails + 1))
  fi
done

if [[ $fails -ne 0 ]]; then echo "$fails failure(s)"; exit 1; fi
echo "every --shard mode matches DDP under mpirun:"
echo "$want"
