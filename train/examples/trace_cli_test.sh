#!/usr/bin/env bash
# --trace=FILE on the examples (train/examples/runner/trace_file.h): the file parses
# as JSON, every event sits on a rank track 0..N-1, and each rank has the
# forward/backward per module, the bucket all-reduces, the optimizer step and
# data loading. A FILE that cannot be created is a usage error (exit 2)
# before training. With MPIRUN_WRAPPER, also under mpirun (each rank writes a
# part, rank 0 merges them and removes the parts).
#
#   trace_cli_test.sh CHECK_TRACE_PY TOY_DDP DIGITS_DDP [MPIRUN_WRAPPER]
set -uo pipefail
checker=$1
toy=$2
digits=$3
mpirun_wrapper=${4:-}
tmp=${TEST_TMPDIR:-$(mktemp -d)}
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

names="forward,backward,wait for gradient all-reduces,Sgd step,load batch,AllReduce bucket 0,Linear[0] forward,Linear[0] backward"

check() {  # trace file, ranks
  local out
  out=$(/usr/bin/python3 "$checker" "$1" --ranks "$2" --names "$names" 2>&1) ||
    fail "$1: $out"
}

if [[ -z "$mpirun_wrapper" ]]; then
  "$digits" --backend=sim --world_size=4 --epochs=1 --trace="$tmp/digits.json" >/dev/null ||
    fail "digits_ddp --trace exited $?"
  check "$tmp/digits.json" 4
  "$toy" --backend=sim --world_size=2 --epochs=1 --trace="$tmp/toy.json" >/dev/null ||
    fail "toy_ddp --trace exited $?"
  check "$tmp/toy.json" 2
  # Off by default: no file appears.
  (cd "$tmp" && "$digits" --backend=sim --world_size=2 --epochs=1 >/dev/null)
  [[ -z "$(ls "$tmp"/*.rank* 2>/dev/null)" ]] || fail "stray trace parts"
  got=$("$digits" --epochs=1 --trace=/nonexistent/folder/t.json 2>&1)
  rc=$?
  want="--trace=/nonexistent/folder/t.json: cannot create the file"
  [[ $rc -eq 2 && "$got" == *"$want"* ]] ||
    fail "bad --trace exited $rc with '$got', expected 2 and '$want'"
else
  "$mpirun_wrapper" 2 "$digits" --backend=mpi --epochs=1 --trace="$tmp/mpi.json" >/dev/null ||
    fail "mpirun digits_ddp --trace exited $?"
  check "$tmp/mpi.json" 2
  [[ -z "$(ls "$tmp"/mpi.json.rank* 2>/dev/null)" ]] || fail "the parts were not removed"
fi

if [[ $fails -ne 0 ]]; then echo "$fails failure(s)"; exit 1; fi
echo "all trace checks passed"
