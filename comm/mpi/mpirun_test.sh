#!/usr/bin/env bash
# Runs a test binary under mpirun: mpirun_test.sh NP BINARY [ARGS...]
#
# Every rank is one process; the test passes when all of them exit 0. Adds
# --allow-run-as-root only when running as root, and --oversubscribe so that
# NP may exceed the cores. A hard `timeout` makes a hung rank fail the test
# instead of stalling CI.
set -uo pipefail
np=$1
shift
binary=$1
shift
flags=(--oversubscribe -np "$np")
[[ $(id -u) -eq 0 ]] && flags=(--allow-run-as-root "${flags[@]}")
# Single-copy shared memory (CMA) needs ptrace rights that containers often
# lack; plain copy-in/copy-out works everywhere.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# No high-speed network here: keep OpenMPI from probing for one.
export OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_pml=ob1
export OMPI_MCA_btl_tcp_if_include=lo
export OMPI_MCA_oob_tcp_if_include=lo
# OpenMPI names its session directory after mpirun's pid. Bazel's sandbox
# gives every test its own pid namespace, so concurrent tests would share one
# directory under /tmp and corrupt each other's shared memory: give each test
# its own.
if [[ -n "${TEST_TMPDIR:-}" ]]; then
  export TMPDIR="$TEST_TMPDIR"
  export OMPI_MCA_orte_tmpdir_base="$TEST_TMPDIR"
  # Shared-memory segments are named after the job id too.
  export OMPI_MCA_btl_vader_backing_directory="$TEST_TMPDIR"
fi
# Bazel's per-test files are one per test, not per rank: N gtest processes
# would race to create and delete them.
unset TEST_PREMATURE_EXIT_FILE XML_OUTPUT_FILE GTEST_OUTPUT
exec timeout --signal=TERM --kill-after=10 "${MPIRUN_TIMEOUT:-240}" \
  mpirun "${flags[@]}" "$binary" "$@"
