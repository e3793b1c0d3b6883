#!/bin/bash
# write_sample_trace writes a trace and a merge; both parse as JSON with every
# event on a named rank track.
set -euo pipefail
writer="$1"
checker="$2"
out="${TEST_TMPDIR:-/tmp}/sample.json"
merged="${TEST_TMPDIR:-/tmp}/merged.json"
"$writer" "$out" "$merged"
/usr/bin/python3 "$checker" "$out" --ranks 2 --names forward,AllReduce
/usr/bin/python3 "$checker" "$merged" --ranks 2 --names forward,AllReduce
# The merge holds every event of both inputs.
n1=$(grep -c '"ph":"X"' "$out")
n2=$(grep -c '"ph":"X"' "$merged")
if [ "$n2" -ne $((2 * n1)) ]; then
  echo "merged trace has $n2 events, expected $((2 * n1))"; exit 1
fi
echo "PASS"
