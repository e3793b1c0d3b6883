#!/usr/bin/env bash
# The start-up and per-step checks of toy_ddp and digits_ddp under mpirun:
#   - per-rank flags (MPMD, `-np 1 toy_ddp --epochs=3 : -np 1 toy_ddp
#     --epochs=4`) fail every rank within seconds, naming each rank's value,
#     not inside OpenMPI and not after a 300 s timeout;
#   - one row of huge pixels, in one rank's shard only, stops every rank
#     with the same non-finite error.
#
#   mpi_checks_test.sh MPIRUN_WRAPPER TOY_DDP DIGITS_DDP
# (MPIRUN_WRAPPER NP BINARY ARGS... passes ARGS through, so ": -np 1 ..."
# makes an MPMD job.)
set -uo pipefail
mpirun_wrapper=$1 toy=$2 digits=$3
export MPIRUN_TIMEOUT=60
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# name, max seconds, expected phrase, command...: exits non-zero, in time,
# every rank printing the phrase.
expect_every_rank_fails() {
  local name=$1 max=$2 phrase=$3
  shift 3
  local start=$SECONDS out rc
  out=$("$@" 2>&1 </dev/null)
  rc=$?
  local took=$((SECONDS - start))
  if [[ $rc -eq 0 ]]; then
    fail "$name: exited 0: $out"
  elif ((took > max)); then
    fail "$name: took ${took}s (limit ${max}s)"
  else
    local ranks
    ranks=$(grep -cF -- "$phrase" <<<"$out")
    if ((ranks < 2)); then
      fail "$name: expected every rank to print \"$phrase\"; got: $out"
    else
      echo "ok: $name (exit $rc in ${took}s)"
    fi
  fi
}

expect_every_rank_fails "toy_ddp MPMD --epochs" 30 \
  "ranks disagree on the configuration: --epochs is 3 on rank 0 and 4 on rank 1; start every rank with the same flags and data" \
  "$mpirun_wrapper" 1 "$toy" --epochs=3 : -np 1 "$toy" --epochs=4
expect_every_rank_fails "toy_ddp MPMD --lr" 30 \
  "--lr is 0.5 on rank 0 and 0.25 on rank 1" \
  "$mpirun_wrapper" 1 "$toy" --lr=0.5 : -np 1 "$toy" --lr=0.25
expect_every_rank_fails "digits_ddp MPMD --epochs" 30 \
  "--epochs is 2 on rank 0 and 3 on rank 1" \
  "$mpirun_wrapper" 1 "$digits" --epochs=2 : -np 1 "$digits" --epochs=3

# Row 100 of the digits, every pixel 3e38: it lands in one rank's shard.
huge="${TEST_TMPDIR:-/tmp}/huge_row.csv"
zcat train/data/digits.csv.gz |
  awk -F, 'BEGIN{OFS=","} NR==100{for(i=1;i<=64;i++)$i="3e38"} {print}' \
    >"$huge"
expect_every_rank_fails "digits_ddp one rank's huge row" 60 \
  "non-finite values at epoch 1, step" \
  "$mpirun_wrapper" 2 "$digits" --data="$huge"
# ... and with the same error on both ranks.
errors=$("$mpirun_wrapper" 2 "$digits" --data="$huge" 2>&1 </dev/null |
  grep -F "FAILED_PRECONDITION" | sed 's/^rank [0-9]*: //' | sort -u)
if [[ $(grep -c . <<<"$errors") -ne 1 ]]; then
  fail "digits_ddp one rank's huge row: ranks report different errors: $errors"
else
  echo "ok: both ranks report: $errors"
fi

[[ $fails -eq 0 ]] || {
  echo "$fails failure(s)"
  exit 1
}
