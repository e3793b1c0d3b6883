#!/usr/bin/env bash
# A worker killed by SIGKILL costs nothing: digits_ddp (SGD with momentum)
# under `tandemrun --nproc_per_node=2 --max_restarts=1 --checkpoint_dir=...`
# whose rank 1 is killed with SIGKILL as soon as the first committed training
# state appears (rank 0 may then be killed between the two renames of the
# checkpoint's commit: see docs/checkpoints.md); tandemrun restarts both
# workers, they resume from the last checkpoint, and the final checkpoint
# files are byte-identical to those of a run that was never interrupted.
#
#   tandemrun_resume_test.sh TANDEMRUN DIGITS_DDP KILLER
#
# KILLER is kill_after_first_checkpoint.sh (the worker that dies).
set -uo pipefail
tandemrun=$1
digits=$2
killer=$3
tmp=${TEST_TMPDIR:-$(mktemp -d)}
fail() {
  echo "FAIL: $*"
  exit 1
}

# 20 epochs of 23 steps at 2 ranks, a checkpoint every 3 steps: the kill
# lands long before the end even on a fast machine.
args=(--backend=gloo --epochs=20 --checkpoint_every=3 --progress=off)

# The straight run.
timeout 300 "$tandemrun" --nproc_per_node=2 --master_port=0 -- \
  "$digits" "${args[@]}" --checkpoint_dir="$tmp/straight" >"$tmp/straight.txt" 2>&1 ||
  fail "the uninterrupted run failed: $(tail -5 "$tmp/straight.txt")"

# The workers: rank 1 of the first attempt dies after rank 0's first
# checkpoint (kill_after_first_checkpoint.sh); every other is digits_ddp.

timeout 300 "$tandemrun" --nproc_per_node=2 --master_port=0 --max_restarts=1 -- \
  "$killer" "$tmp/killed" "$digits" "${args[@]}" --checkpoint_dir="$tmp/killed" \
  >"$tmp/killed.txt" 2>&1 ||
  fail "the killed-and-restarted run failed: $(tail -5 "$tmp/killed.txt")"

grep -q "tandemrun: rank 1 failed (signal 9); restarting all 2 workers" "$tmp/killed.txt" ||
  fail "tandemrun did not report rank 1's SIGKILL and the restart: $(cat "$tmp/killed.txt")"
grep -q "digits_ddp: resuming from $tmp/killed at epoch " "$tmp/killed.txt" ||
  fail "the restarted run did not resume from the checkpoint: $(cat "$tmp/killed.txt")"
if grep -q "digits_ddp: resuming from $tmp/killed at epoch 20" "$tmp/killed.txt"; then
  fail "the kill came after the last epoch; the test proved nothing"
fi
for f in model.safetensors training_state.safetensors; do
  cmp -s "$tmp/straight/$f" "$tmp/killed/$f" ||
    fail "$f differs between the uninterrupted run and the killed-and-resumed one"
done
grep "resuming" "$tmp/killed.txt"
echo "a SIGKILLed worker, restarted by tandemrun, resumed to bit-identical weights"
