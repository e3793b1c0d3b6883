#!/usr/bin/env bash
# ddp_demo's losses are bit-identical to PyTorch 1.13's running
# bench/peers/ddp_demo.py (gloo, CPU) at world sizes 1, 2 and 4, with the
# flag combinations of docs/checkpoints.md. Skips (passes) where
# /usr/bin/python3 has no PyTorch (Debian's python3-torch), as on CI.
#
#   compare_ddp_demo_test.sh DDP_DEMO_BINARY COMPARE_SCRIPT
set -uo pipefail
demo=$1 script=$2
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "SKIP: PyTorch (python3-torch) is not installed for /usr/bin/python3"
  exit 0
fi
status=0
run() {
  /usr/bin/python3 "$script" --tandem="$demo" "$@" || status=1
}
run --world_size 2
run --world_size 1 --epochs 5
run --world_size 4 --batchSize 8 --epochs 3 --num-classes 5
exit $status
