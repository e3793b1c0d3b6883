#!/usr/bin/env bash
# Under tandemrun, toy_ddp, digits_ddp, ddp_demo and pipeline_demo (2 stages
# x 2 replicas, over gloo sub-communicators) on --backend=gloo (and on auto,
# which picks gloo there) print exactly the lines the simulated cluster
# prints for the same world size: each rank's lines in the same order (the
# processes' lines interleave differently from run to run, so the whole
# output is compared sorted), the summary naming the engine aside.
#
#   example_tandemrun_cli_test.sh TANDEMRUN TOY_DDP DIGITS_DDP DIGITS_CSV DDP_DEMO \
#     PIPELINE_DEMO
set -uo pipefail
tandemrun=$1
toy=$2
digits=$3
csv=$4
demo=$5
pipeline=$6
fails=0
tmp=${TEST_TMPDIR:-$(mktemp -d)}

# check NAME N BACKEND BINARY ARGS...
check() {
  local name=$1 n=$2 backend=$3
  shift 3
  "$@" --backend=sim --world_size="$n" >"$tmp/sim.txt" 2>&1 || {
    echo "FAIL: $name on sim exited $?"
    fails=$((fails + 1))
    return
  }
  timeout 300 "$tandemrun" --nproc_per_node="$n" --master_port=0 -- \
    "$@" --backend="$backend" >"$tmp/gloo.txt" 2>"$tmp/gloo.err"
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "FAIL: tandemrun --nproc_per_node=$n $name --backend=$backend exited $rc:"
    cat "$tmp/gloo.err"
    fails=$((fails + 1))
    return
  fi
  sed -i 's/ on gloo,/ on sim,/' "$tmp/gloo.txt"
  for ((r = 0; r < n; r++)); do
    if ! diff <(grep "^\[GPU$r\]" "$tmp/sim.txt") \
      <(grep "^\[GPU$r\]" "$tmp/gloo.txt") >"$tmp/diff.txt"; then
      echo "FAIL: $name rank $r lines differ between sim and gloo ($backend):"
      cat "$tmp/diff.txt"
      fails=$((fails + 1))
    fi
  done
  if ! diff <(sort "$tmp/sim.txt") <(sort "$tmp/gloo.txt") >"$tmp/diff.txt"; then
    echo "FAIL: $name output differs between sim and gloo ($backend):"
    cat "$tmp/diff.txt"
    fails=$((fails + 1))
  fi
}

check toy_ddp 2 gloo "$toy"
check toy_ddp 3 auto "$toy"
check digits_ddp 2 gloo "$digits" --data="$csv" --epochs=3 --progress=off
check digits_ddp 4 auto "$digits" --data="$csv" --epochs=2 --progress=off
check ddp_demo 2 gloo "$demo" --epochs=2 --dataset-size=24 --batchSize=4
check ddp_demo 3 auto "$demo" --epochs=2 --dataset-size=24 --batchSize=4
check pipeline_demo 4 gloo "$pipeline" --replicas=2 --steps=5

if [[ $fails -ne 0 ]]; then echo "$fails failure(s)"; exit 1; fi
echo "toy_ddp, digits_ddp, ddp_demo and pipeline_demo print the sim lines under tandemrun"
