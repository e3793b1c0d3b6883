#!/usr/bin/env bash
# The examples on real GPUs (tag "gpu"): toy_ddp and digits_ddp with
# --backend=nccl on min(2, visible GPUs) ranks. toy_ddp prints the tutorial's
# lines in the tutorial's format, as many as on the CPU, with the same
# accuracies as the simulated run (the losses may differ from the CPU's in
# their last digits); digits_ddp reaches at least 95% test accuracy. Without a
# CUDA device it checks nothing and passes (the no-device exit is covered by
# toy_ddp_cli_test and digits_ddp_cli_test).
#
#   nccl_examples_test.sh TOY_DDP DIGITS_DDP
set -uo pipefail
toy=$1 digits=$2
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
by_rank() { sort -s -t']' -k1,1; }  # stable: each rank keeps its order

# The binary decides whether there is a device: exit 2 and "none was found".
probe=$("$toy" --backend=nccl --world_size=1 --epochs=0 2>&1)
rc=$?
if [[ $rc -eq 2 && "$probe" == *"none was found"* ]]; then
  echo "SKIP: no CUDA device ($probe)"
  exit 0
fi
[[ $rc -eq 0 ]] || fail "toy_ddp --backend=nccl --world_size=1 --epochs=0 exited $rc: $probe"

ws=2
probe=$("$toy" --backend=nccl --world_size=2 --epochs=0 2>&1)
rc=$?
if [[ $rc -eq 2 && "$probe" == *"CUDA device(s) are visible"* ]]; then
  ws=1
elif [[ $rc -ne 0 ]]; then
  fail "toy_ddp --backend=nccl --world_size=2 --epochs=0 exited $rc: $probe"
fi
echo "world size $ws"

# ---- toy_ddp: 5 training samples, batch 2 with drop_last, 3 epochs.
got=$("$toy" --backend=nccl --world_size="$ws" 2>&1)
rc=$?
[[ $rc -eq 0 ]] || fail "toy_ddp --backend=nccl --world_size=$ws exited $rc: $got"
per_rank=$(( (5 + ws - 1) / ws ))
lines_per_rank=$(( 3 * (per_rank / 2) + 2 ))
n=$(grep -c . <<<"$got")
[[ $n -eq $((ws * lines_per_rank)) ]] ||
  fail "toy_ddp printed $n lines, expected $((ws * lines_per_rank)):
$got"
bad=$(grep -vE '^\[GPU[0-9]+\] (Epoch: 00[1-3]/003 \| Batchsize 002 \| Train/Val Loss: [0-9]+\.[0-9]{2}|Training accuracy [0-9.]+|Test accuracy [0-9.]+)$' <<<"$got")
[[ -z "$bad" ]] || fail "toy_ddp lines in an unexpected format:
$bad"
for ((r = 0; r < ws; ++r)); do
  c=$(grep -c "^\[GPU$r\] " <<<"$got")
  [[ $c -eq $lines_per_rank ]] || fail "rank $r printed $c lines, expected $lines_per_rank"
done
sim=$("$toy" --backend=sim --world_size="$ws" | by_rank)
want_acc=$(grep 'accuracy' <<<"$sim")
got_acc=$(by_rank <<<"$got" | grep 'accuracy')
[[ "$got_acc" == "$want_acc" ]] || fail "toy_ddp accuracies on nccl:
$got_acc
on sim:
$want_acc"
echo "toy_ddp on nccl:"
echo "$got" | by_rank

# ---- digits_ddp: the full 20 epochs.
got=$("$digits" --backend=nccl --world_size="$ws" 2>&1)
rc=$?
[[ $rc -eq 0 ]] || fail "digits_ddp --backend=nccl --world_size=$ws exited $rc: $got"
echo "$got"
[[ "$got" == *"$ws rank(s) on nccl"* ]] || fail "digits_ddp header does not say nccl"
[[ $(grep -c '^Epoch: ' <<<"$got") -eq 20 ]] || fail "digits_ddp: expected 20 epoch lines"
acc=$(sed -nE 's/^Test accuracy: ([0-9.]+) \([0-9]+\/359, all ranks\)$/\1/p' <<<"$got")
if [[ -z "$acc" ]]; then
  fail "digits_ddp printed no accuracy line"
elif ! awk -v a="$acc" 'BEGIN { exit !(a >= 0.95) }'; then
  fail "digits_ddp test accuracy $acc < 0.95"
fi

if [[ $fails -ne 0 ]]; then echo "$fails failure(s)"; exit 1; fi
echo "all NCCL example checks passed"
