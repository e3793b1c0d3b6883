#!/usr/bin/env bash
# resnet_ddp's per-step losses against torchvision's resnet18 under PyTorch
# DDP (bench/peers/resnet_ddp.py: gloo, CPU, one process per rank) for 10
# SGD steps at world sizes 1, 2 and 4, float64, from tandem's initial
# weights; the tolerance and why it is not bit for bit are in
# bench/peers/compare_resnet_ddp.py. Skips (passes) where /usr/bin/python3
# has no PyTorch or torchvision (Debian's python3-torch and
# python3-torchvision), as on CI.
#
#   compare_resnet_ddp_test.sh RESNET_DDP_BINARY COMPARE_SCRIPT
set -uo pipefail
bin=$1 script=$2
if ! /usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null; then
  echo "SKIP: PyTorch or torchvision (python3-torch, python3-torchvision)" \
    "is not installed for /usr/bin/python3"
  exit 0
fi
exec /usr/bin/python3 "$script" --tandem="$bin" --world_sizes 1 2 4
