#!/usr/bin/env bash
# --progress and --metrics of the examples' runner, and plot_metrics:
# digits_ddp writes one JSON line per step, epoch and test result; off a
# terminal --progress=auto prints a plain line every 10 s, so this short run
# prints exactly what it did before (the line formats and the terminal
# redraw are checked by run_monitor_test on a fake clock);
# plot_metrics draws an SVG that parses as XML with the loss and accuracy
# curves. Bad values are usage errors (exit 2).
#
# toy_ddp, ddp_demo and amp_ddp write step lines too; amp_ddp's carry the
# GradScaler's scale and whether the step was skipped.
#
#   metrics_cli_test.sh DIGITS_DDP PLOT_METRICS TOY_DDP DDP_DEMO AMP_DDP
set -uo pipefail
digits=$1
plot=$2
toy=$3
demo=$4
amp=$5
tmp=${TEST_TMPDIR:-$(mktemp -d)}
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

out=$("$digits" --world_size=2 --epochs=2 --metrics="$tmp/m.jsonl" 2>&1) ||
  fail "digits_ddp --metrics exited $?: $out"
[[ $(wc -l <<<"$out") -eq 4 && "$out" != *"samples/s"* ]] ||
  fail "expected the 4 lines of 2 epochs and no progress line, got: $out"

/usr/bin/python3 - "$tmp/m.jsonl" <<'PY' || fail "metrics file check"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
kinds = [l["kind"] for l in lines]
assert kinds.count("step") == 46, kinds
assert kinds.count("epoch") == 2 and kinds.count("test") == 1, kinds
steps = [l for l in lines if l["kind"] == "step"]
assert [s["global_step"] for s in steps] == list(range(1, 47))
assert all(s["samples"] in (64, 30) for s in steps), [s["samples"] for s in steps]
assert all(s["loss"] > 0 and s["comm_s"] >= 0 and s["wait_s"] >= 0 for s in steps)
epochs = [l for l in lines if l["kind"] == "epoch"]
assert [e["samples"] for e in epochs] == [1438, 1438], epochs
assert 0 < epochs[1]["train_accuracy"] <= 1 and epochs[1]["train_loss"] < epochs[0]["train_loss"]
test = lines[-1]
assert test["kind"] == "test" and test["total"] == 359, test
print("metrics ok")
PY

"$plot" --metrics="$tmp/m.jsonl" --out="$tmp/m.svg" >/dev/null || fail "plot_metrics exited $?"
/usr/bin/python3 - "$tmp/m.svg" <<'PY' || fail "svg check"
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
assert root.tag == ns + "svg", root.tag
lines = root.findall(ns + "polyline")
assert len(lines) == 3, len(lines)  # step loss, epoch loss, epoch accuracy
assert len(lines[0].get("points").split()) == 46
texts = [t.text for t in root.iter(ns + "text")]
assert "loss" in texts and "accuracy" in texts, texts
print("svg ok")
PY

"$toy" --world_size=2 --metrics="$tmp/toy.jsonl" >/dev/null 2>&1 ||
  fail "toy_ddp --metrics exited $?"
"$demo" --world_size=2 --epochs=2 --dataset-size=40 --batchSize=8 \
  --metrics="$tmp/demo.jsonl" >/dev/null 2>&1 || fail "ddp_demo --metrics exited $?"
"$amp" --world_size=3 --amp=f16 --inject_inf=1:2 --steps=5 \
  --metrics="$tmp/amp.jsonl" >/dev/null 2>&1 || fail "amp_ddp --metrics exited $?"
/usr/bin/python3 - "$tmp" <<'PY' || fail "toy/demo/amp metrics check"
import json, sys
read = lambda name: [json.loads(l) for l in open(f"{sys.argv[1]}/{name}.jsonl")]
toy = read("toy")
assert [l["kind"] for l in toy].count("epoch") >= 1, toy
assert all(l["comm_s"] >= 0 for l in toy if l["kind"] == "step"), toy
demo = read("demo")
steps = [l for l in demo if l["kind"] == "step"]
# 40 images, 2 ranks of 20, batches of 8: 8, 8, 4 per rank, two epochs.
assert [s["samples"] for s in steps] == [16, 16, 8] * 2, steps
assert [l["samples"] for l in demo if l["kind"] == "epoch"] == [40, 40], demo
amp = [l for l in read("amp") if l["kind"] == "step"]
assert [s["scale"] for s in amp] == [65536, 65536, 65536, 32768, 32768], amp
assert [s["skipped"] for s in amp] == [False, False, True, False, False], amp
assert all("scale" not in l for l in toy + demo)
print("toy/demo/amp metrics ok")
PY

out=$("$digits" --world_size=2 --epochs=1 --progress=off 2>&1)
[[ $(wc -l <<<"$out") -eq 3 ]] || fail "--progress=off: expected 3 lines, got: $out"

expect2() {  # message fragment, command...
  local want=$1; shift
  local got rc
  got=$("$@" 2>&1); rc=$?
  [[ $rc -eq 2 && "$got" == *"$want"* ]] || fail "$* exited $rc with '$got', expected 2 and '$want'"
}
expect2 "--progress=bogus; expected auto" "$digits" --progress=bogus
expect2 "--metrics=/nonexistent/m.jsonl: cannot create the file" "$digits" --metrics=/nonexistent/m.jsonl
expect2 "--metrics and --out are required" "$plot" --metrics="$tmp/m.jsonl"
echo "garbage" >"$tmp/bad.jsonl"
got=$("$plot" --metrics="$tmp/bad.jsonl" --out="$tmp/bad.svg" 2>&1)
[[ $? -eq 1 && "$got" == *"line 1: expected '{'"* ]] || fail "bad metrics file: '$got'"

if [[ $fails -ne 0 ]]; then echo "$fails failure(s)"; exit 1; fi
echo "all metrics checks passed"
