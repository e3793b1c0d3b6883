#!/usr/bin/env bash
# The //train/examples:resnet_ddp command line on tiny synthetic runs (two
# simulated ranks, 8x8 images, two images per rank per step): the per-epoch
# line, every rank's per-step loss, the step limit, --sync_bn, --amp=bf16,
# --save_init, and bad flags exiting 2 with a message.
set -uo pipefail
bin="$1"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
tiny=(--backend=sim --world_size=2 --image_size=8 --batch_size=2
  --synthetic_size=8 --num_classes=4 --progress=off)

# 8 images over 2 ranks, 2 per step: 2 steps per epoch.
out=$("$bin" "${tiny[@]}" --epochs=2 --print_step_losses --save_init=init.st) ||
  fail "the tiny run exited $?"
[[ $(grep -cE '^Epoch 00[12]/002 \| train loss [0-9.]+ \| val top-1 [0-9.]+ \(([0-2])/2\) \| [0-9.]+ images/s$' <<<"$out") == 2 ]] ||
  fail "expected two epoch lines:
$out"
[[ $(grep -cE '^\[GPU[01]\] step [0-3] loss [0-9.e+-]+$' <<<"$out") == 8 ]] ||
  fail "expected 4 steps x 2 ranks of losses:
$out"
[[ -s init.st ]] || fail "--save_init wrote nothing"
grep -q 'layer4.1.bn2.running_var' init.st ||
  fail "--save_init lacks the BatchNorm buffers"
rm -f init.st

# --max_steps stops inside the first epoch; its line still comes. With
# --sync_bn, then --amp=bf16, then f64 with the cosine schedule.
for extra in "--sync_bn --kernels=pytorch" "--amp=bf16" "--dtype=f64 --lr_schedule=cosine"; do
  # shellcheck disable=SC2086
  out=$("$bin" "${tiny[@]}" --epochs=3 --max_steps=1 --print_step_losses \
    $extra) || fail "$extra exited $?"
  [[ $(grep -c ' step ' <<<"$out") == 2 && $(grep -c '^Epoch 001/003' <<<"$out") == 1 &&
    $(grep -c '^Epoch' <<<"$out") == 1 ]] || fail "--max_steps=1 $extra:
$out"
done

expect_usage() {  # phrase, flags...
  local phrase=$1
  shift
  local err
  err=$("$bin" --backend=sim "$@" 2>&1 >/dev/null)
  local rc=$?
  [[ $rc == 2 ]] || fail "$* exited $rc, expected 2"
  [[ "$err" == *"$phrase"* ]] || fail "$* printed: $err"
}
expect_usage "expected resnet18, resnet34 or resnet50" --arch=resnet101
expect_usage "is not a folder" --data=/nonexistent/images
expect_usage "expected step or cosine" --lr_schedule=linear
expect_usage "expected off or bf16" --amp=fp8
expect_usage "f16 needs a GradScaler" --amp=f16
expect_usage "expected f32 or f64" --dtype=f16
expect_usage "expected fastest or pytorch" --kernels=mkl
expect_usage "autocast lowers f32 models only" --amp=bf16 --dtype=f64
expect_usage "--batch_size=0 (expected 1 <= batch_size <= 65536)" --batch_size=0
expect_usage "--image_size=0 (expected 1 <= image_size <= 4096)" --image_size=0
expect_usage "--val_fraction=1 (expected 0 < val_fraction < 1)" --val_fraction=1

# Too few images for the ranks is a runtime error naming the counts.
err=$("$bin" "${tiny[@]}" --synthetic_size=2 2>&1 >/dev/null)
rc=$?
[[ $rc == 1 && "$err" == *"each rank needs one full batch"* ]] ||
  fail "--synthetic_size=2 exited $rc: $err"

[[ $fails -eq 0 ]] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
