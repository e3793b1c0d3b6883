#!/usr/bin/env bash
# tandem's Hugging Face export and import against transformers 4.36.2
# (bench/peers/hf_gpt2_export_check.py). Skips (passes, saying why) where the
# peer's venv cannot be made (bench/peers/hf_venv.sh: no python3-torch, no
# PyPI).
#
#   hf_gpt2_export_test.sh FIXTURE_BINARY CHECK_SCRIPT HF_VENV_SCRIPT
set -uo pipefail
fixture=$1 check=$2 venv=$3
if ! python=$("$venv"); then
  echo "SKIP: the Hugging Face peer's venv could not be made (see above)"
  exit 0
fi
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/hf_export.XXXXXX")
"$python" "$check" --fixture="$fixture" --workdir="$work"
