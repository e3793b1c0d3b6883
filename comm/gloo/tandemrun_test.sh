#!/usr/bin/env bash
# Runs a test binary under tandemrun: tandemrun_test.sh NP TANDEMRUN BINARY
# [ARGS...]. Every rank is one process; the test passes when all exit 0. The
# store takes a free port (--master_port=0) so concurrent tests never
# collide, and a hard `timeout` turns a hang into a failure.
set -uo pipefail
np=$1
tandemrun=$2
binary=$3
shift 3
# Bazel's per-test output files are one per test, not per rank.
unset TEST_PREMATURE_EXIT_FILE XML_OUTPUT_FILE GTEST_OUTPUT
exec timeout --signal=TERM --kill-after=10 "${TANDEMRUN_TIMEOUT:-600}" \
  "$tandemrun" --nproc_per_node="$np" --master_port=0 -- "$binary" "$@"
