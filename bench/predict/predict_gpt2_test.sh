#!/bin/bash
# predict_gpt2 prints a header and one row per GPU count and mode (8, 64,
# 512 x ddp, fsdp) with numbers in every column; a bad --gpus is a usage
# error (exit 2). Checks the rows, not the predicted times.
set -u
bin="$1"
out="$("$bin" 2>&1)" || { echo "predict_gpt2 failed: $out"; exit 1; }
echo "$out"
for gpus in 8 64 512; do
  for mode in ddp fsdp; do
    if ! grep -Eq "^ *${gpus} +${mode}( +[0-9.]+){6}$" <<<"$out"; then
      echo "no row for ${gpus} GPUs, ${mode}"
      exit 1
    fi
  done
done
rows="$(grep -Ec '^ *[0-9]+ +(ddp|fsdp) ' <<<"$out")"
[ "$rows" = 6 ] || { echo "expected 6 rows, found $rows"; exit 1; }
grep -q "step_ms" <<<"$out" || { echo "no header"; exit 1; }
"$bin" --gpus=12 >/dev/null 2>&1
rc=$?
[ "$rc" = 2 ] || { echo "--gpus=12: expected exit 2, got $rc"; exit 1; }
echo PASS
