#!/usr/bin/env bash
# The //train:gpt_ddp command line on a tiny GPT at 2 simulated ranks: the
# header and nanoGPT's log lines (exact format), the validation and sample
# lines, the same losses under ddp, zero1, zero2 and fsdp (within 1e-6,
# gradient accumulation on), --amp=bf16, --trace and --metrics files, and a
# run resumed from its checkpoint printing the uninterrupted run's lines.
set -uo pipefail
bin="$(realpath "$1")"
data="$(realpath train/data/public_domain_english.txt)"  # in the runfiles
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
cd "${TEST_TMPDIR:-$(mktemp -d)}" || exit 1
tiny=(--backend=sim --world_size=2 --n_layer=2 --n_head=4 --n_embd=32
  --block_size=16 --batch_size=4 --warmup_steps=1 --progress=off
  "--data=$data")

got=$("$bin" "${tiny[@]}" --max_steps=4 --grad_accum=2 --sample_tokens=20)
rc=$?
[[ $rc -eq 0 ]] || fail "the tiny run exited $rc: $got"
[[ $(head -1 <<<"$got") == "gpt_ddp: "*"(4222 tokens, 237 train / 26 val blocks of 16), 2 rank(s) on sim, GPT vocab_size=256, block_size=16, n_layer=2, n_head=4, n_embd=32"*"--parallel=ddp" ]] ||
  fail "unexpected header in: $got"
[[ $(grep -cE '^step [1-4] \| loss [0-9]+\.[0-9]{6} \| lr [0-9]\.[0-9]{4}e[-+][0-9]{2} \| tokens/s [0-9]+$' <<<"$got") -eq 4 ]] ||
  fail "expected 4 step lines in: $got"
grep -qE '^step 4 \| val loss [0-9]+\.[0-9]{6}$' <<<"$got" || fail "no val line in: $got"
grep -qE '^sample: .{20,}$' <<<"$got" || fail "no sample line in: $got"
[[ $(wc -l <<<"$got") -eq 7 ]] || fail "expected 7 lines (rank 0 only), got: $got"

# The four modes: the same losses within 1e-6.
losses() { grep -oE '(loss|val loss) [0-9.]+' <<<"$1" | awk '{print $NF}'; }
want=$(losses "$got")
for mode in zero1 zero2 fsdp; do
  out=$("$bin" "${tiny[@]}" --max_steps=4 --grad_accum=2 --parallel=$mode) ||
    fail "--parallel=$mode failed: $out"
  paste <(echo "$want") <(losses "$out") |
    awk -v m=$mode '{d = $1 - $2; if (d < 0) d = -d; if (d > 1e-6 || NF != 2) {print "FAIL: " m ": " $0; bad = 1}} END {exit bad}' ||
    fail "--parallel=$mode losses differ from ddp's"
done

out=$("$bin" "${tiny[@]}" --max_steps=2 --amp=bf16) || fail "--amp=bf16 failed: $out"
grep -qE '^step 2 \| val loss [0-9]' <<<"$out" || fail "--amp=bf16: $out"

"$bin" "${tiny[@]}" --max_steps=2 --trace=t.json --metrics=m.jsonl >/dev/null ||
  fail "--trace/--metrics run failed"
grep -q '"traceEvents"' t.json || fail "no trace in t.json"
[[ $(grep -c '"kind":"step"' m.jsonl) -eq 2 ]] || fail "expected 2 step records in m.jsonl"

# Resume: 3 steps into ck, then 5 (a constant rate, so the first run's
# schedule is the second's): steps 4 and 5 as an uninterrupted 5-step run.
whole=$("$bin" "${tiny[@]}" --lr_decay=constant --max_steps=5)
"$bin" "${tiny[@]}" --lr_decay=constant --max_steps=3 --checkpoint_dir=ck >/dev/null ||
  fail "the first half failed"
rest=$("$bin" "${tiny[@]}" --lr_decay=constant --max_steps=5 --checkpoint_dir=ck)
grep -q "resuming from ck" <<<"$rest" || fail "no resume line in: $rest"
cut_rate() { grep '^step ' <<<"$1" | sed 's/ | tokens\/s .*//'; }
[[ "$(cut_rate "$rest")" == "$(cut_rate "$whole" | tail -3)" ]] ||
  fail "resumed lines differ:
$(cut_rate "$rest")
vs
$(cut_rate "$whole" | tail -3)"

# Captured first: `--help | grep -q` would close the pipe at the first match,
# and a binary whose stdout write fails exits 1 (base/std_streams.h).
help=$("$bin" --help) || fail "--help failed"
grep -q -- "--sample_tokens" <<<"$help" || fail "--help lacks --sample_tokens"

if [[ $fails -ne 0 ]]; then echo "$fails failure(s)"; exit 1; fi
echo "all gpt_ddp CLI checks passed"
