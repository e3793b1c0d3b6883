#!/usr/bin/env bash
# --virtual_world=4 on real processes: toy_ddp and digits_ddp under mpirun
# -np 2 (the mpi engine) and under tandemrun --nproc_per_node=2 (gloo) print
# exactly the lines one simulated rank prints for the same K (rank 0 prints
# them all, in virtual-rank order, so the output is compared as is) and
# write byte-identical checkpoints.
#
#   virtual_world_engines_cli_test.sh MPIRUN_WRAPPER TANDEMRUN TOY_DDP \
#     DIGITS_DDP DIGITS_CSV
set -uo pipefail
mpirun_wrapper=$1
tandemrun=$2
toy=$3
digits=$4
csv=$5
fails=0
tmp=${TEST_TMPDIR:-$(mktemp -d)}

# check NAME ARGS...: sim at 1 rank, then mpi and gloo at 2.
check() {
  local name=$1
  shift
  rm -rf "$tmp/$name".*
  "$@" --backend=sim --world_size=1 --checkpoint_dir="$tmp/$name.sim" \
    >"$tmp/$name.sim.txt" 2>&1 || {
    echo "FAIL: $name on one sim rank exited $?"
    cat "$tmp/$name.sim.txt"
    fails=$((fails + 1))
    return
  }
  timeout 300 "$mpirun_wrapper" 2 "$@" --backend=mpi \
    --checkpoint_dir="$tmp/$name.mpi" >"$tmp/$name.mpi.txt" 2>"$tmp/$name.mpi.err"
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "FAIL: mpirun -np 2 $name exited $rc:"
    cat "$tmp/$name.mpi.err"
    fails=$((fails + 1))
  fi
  timeout 300 "$tandemrun" --nproc_per_node=2 --master_port=0 -- "$@" \
    --backend=gloo --checkpoint_dir="$tmp/$name.gloo" \
    >"$tmp/$name.gloo.txt" 2>"$tmp/$name.gloo.err"
  rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "FAIL: tandemrun --nproc_per_node=2 $name exited $rc:"
    cat "$tmp/$name.gloo.err"
    fails=$((fails + 1))
  fi
  for engine in mpi gloo; do
    if ! diff "$tmp/$name.sim.txt" "$tmp/$name.$engine.txt"; then
      echo "FAIL: $name on $engine printed other lines than sim (above)"
      fails=$((fails + 1))
    fi
    for file in model.safetensors training_state.safetensors; do
      if ! cmp "$tmp/$name.sim/$file" "$tmp/$name.$engine/$file"; then
        echo "FAIL: $name on $engine wrote another $file than sim"
        fails=$((fails + 1))
      fi
    done
  done
  echo "$name: sim, mpi and gloo agree ($(wc -l <"$tmp/$name.sim.txt") lines, checkpoints byte-identical)"
}

check toy "$toy" --virtual_world=4 --loss_precision=17
check digits "$digits" --virtual_world=4 --epochs=2 --data="$csv"

if [[ $fails -ne 0 ]]; then echo "$fails failure(s)"; exit 1; fi
