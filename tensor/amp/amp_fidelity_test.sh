#!/usr/bin/env bash
# tandem's Linear, Conv2d and MLP forward + backward under bf16 autocast are
# within 1 bf16 ulp of autocast's contract computed exactly by PyTorch 1.13
# (bench/peers/amp_fidelity.py; it also prints the distance to PyTorch's own
# torch.autocast run). Skips (passes) without Debian's python3-torch.
#
#   amp_fidelity_test.sh DUMP_BINARY SCRIPT
set -uo pipefail
dump_bin=$1 script=$2
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "SKIP: PyTorch (python3-torch) is not installed"
  exit 0
fi
dump="${TEST_TMPDIR:-/tmp}/amp_dump.txt"
"$dump_bin" >"$dump" || { echo "FAIL: $dump_bin exited $?"; exit 1; }
/usr/bin/python3 "$script" "$dump"
