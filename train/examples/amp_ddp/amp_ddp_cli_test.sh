#!/usr/bin/env bash
# The //train/examples:amp_ddp command line: --inject_inf=1:3 makes every
# rank skip step 3 and halve its scale, the ranks' weights stay equal, every
# --amp and --comm_hook runs, and bad flags exit 2 with a message.
set -uo pipefail
bin="$1"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

for n in 2 3; do
  out=$("$bin" --backend=sim --world_size="$n" --inject_inf=1:3 --steps=6) ||
    fail "n=$n exited $?"
  skipped=$(grep -c 'step 003 .*| scale 65536 | skipped' <<<"$out")
  [[ "$skipped" == "$n" ]] || fail "n=$n: $skipped ranks skipped step 3:
$out"
  [[ $(grep -c '| skipped' <<<"$out") == "$n" ]] || fail "n=$n: other skips"
  [[ $(grep -c 'step 004 .*| scale 32768 | stepped' <<<"$out") == "$n" ]] ||
    fail "n=$n: the scale did not halve after the skip:
$out"
  sums=$(grep 'weights checksum' <<<"$out" | sed 's/.*checksum //' | sort -u)
  [[ $(wc -l <<<"$sums") == 1 ]] || fail "n=$n: ranks differ: $sums"
done

for amp in bf16 f16 off; do
  for hook in allreduce fp16_compress bf16_compress; do
    out=$("$bin" --backend=sim --world_size=2 --amp=$amp --comm_hook=$hook \
      --steps=3) || fail "--amp=$amp --comm_hook=$hook exited $?"
    [[ $(grep -c '| stepped' <<<"$out") == 6 ]] ||
      fail "--amp=$amp --comm_hook=$hook:
$out"
  done
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
expect_usage "amp_ddp: --amp=fp8 (expected bf16, f16 or off)" --amp=fp8
expect_usage "expected RANK:STEP" --inject_inf=1
expect_usage "expected RANK:STEP" --inject_inf=-1:2
expect_usage "--comm_hook=topk (expected allreduce, fp16_compress or bf16_compress)" \
  --comm_hook=topk
expect_usage "amp_ddp: --steps=0 (expected 1 <= steps <= 1000000)" --steps=0
expect_usage "--steps=9223372036854775807 (expected 1 <= steps <= 1000000)" \
  --steps=9223372036854775807
expect_usage "--batch_size=9223372036854775807 (expected 1 <= batch_size <= 65536)" \
  --batch_size=9223372036854775807

# A rank outside the world is a runtime error (exit 1) naming it.
err=$("$bin" --backend=sim --world_size=2 --inject_inf=5:0 2>&1 >/dev/null)
rc=$?
[[ $rc == 1 && "$err" == *"names rank 5"* ]] ||
  fail "--inject_inf=5:0 exited $rc: $err"

[[ $fails -eq 0 ]] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
