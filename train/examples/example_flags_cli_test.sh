#!/usr/bin/env bash
# The examples' common command line (train/examples/runner/example_main.h), checked
# on every example binary given: positional arguments, unknown flags and bad
# values exit 2 with a message (never absl's exit 1), --timeout must be > 0 and
# finite, --help exits 0 and lists the exit codes and the engines, and a
# launch environment (torchrun's or mpirun's variables describing a world of
# more than one process) is never ignored.
#
#   example_flags_cli_test.sh TOY_DDP DIGITS_DDP
set -uo pipefail
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

expect() {  # binary, exit code, message fragment, then env assignments and flags
  local bin=$1 want_rc=$2 want=$3; shift 3
  local got rc
  got=$(env "$@" 2>&1)
  rc=$?
  if [[ $rc -ne $want_rc || "$got" != *"$want"* ]]; then
    fail "$(basename "$bin") ${*} exited $rc with '$got', expected $want_rc and '$want'"
  fi
}

torchrun2=(RANK=0 LOCAL_RANK=0 WORLD_SIZE=2)
mpi2=(OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_LOCAL_RANK=0 OMPI_COMM_WORLD_SIZE=2)

for bin in "$@"; do
  name=$(basename "$bin")
  expect "$bin" 2 "$name: unexpected argument 'extra': this program takes no positional arguments" "$bin" extra
  expect "$bin" 2 "unexpected argument 'extra'" "$bin" --backend=sim extra
  expect "$bin" 2 "unexpected argument '--'" "$bin" -- --epochs=1
  expect "$bin" 2 "$name: unknown flag '--epochz=1'; see --help" "$bin" --epochz=1
  expect "$bin" 2 "bad value 'abc' for --epochs" "$bin" --epochs=abc
  expect "$bin" 2 "flag '--world_size' needs a value" "$bin" --world_size
  for t in 0 -1 inf nan; do
    expect "$bin" 2 "expected seconds > 0 and finite" "$bin" --timeout=$t
  done
  expect "$bin" 0 "Exit codes: 0 success, 1 runtime error (a rank failed), 2 usage error" "$bin" --help
  expect "$bin" 0 "--backend  sim (ranks as threads in this process), mpi (one process per rank, under mpirun or srun), nccl (one thread per local GPU; one process per GPU under tandemrun), gloo (one process per rank, under tandemrun or torchrun), or auto" "$bin" --help
  expect "$bin" 0 "--timeout  Seconds every collective may take" "$bin" -h
  expect "$bin" 2 "--sim_ranks must be threads or fibers; found 'cores'" "$bin" --sim_ranks=cores
  for k in 8 -1 1048577; do
    expect "$bin" 2 "--sim_stack_kib must be 0 (the default) or 16 to 1048576 (1 GiB); found $k" "$bin" --sim_stack_kib=$k
  done
  # The stack size reaches the ranks: 2 MiB fibers run; 64 KiB threads cannot
  # even hold the program's thread-local storage, and the run says so.
  expect "$bin" 0 "" "$bin" --backend=sim --world_size=2 --epochs=1 --sim_ranks=fibers --sim_stack_kib=2048 --timeout=60
  expect "$bin" 1 "stack" "$bin" --backend=sim --world_size=2 --epochs=1 --sim_stack_kib=64 --timeout=60

  # torchrun's variables: gloo joins a torchrun world, given the store's
  # address.
  expect "$bin" 2 "$name: --backend=sim in a job of 2 processes started by torchrun (WORLD_SIZE=2, this is rank 0)" "${torchrun2[@]}" "$bin" --backend=sim
  expect "$bin" 2 "Instead use --backend=gloo (each process one rank)" "${torchrun2[@]}" "$bin" --backend=sim
  expect "$bin" 2 "--backend=gloo: gloo needs MASTER_ADDR and MASTER_PORT" "${torchrun2[@]}" "$bin"
  expect "$bin" 2 "mpi joins jobs started by mpirun or srun, and this process was started by torchrun" "${torchrun2[@]}" "$bin" --backend=mpi
  # mpirun's variables (without mpirun: only what the binary reads).
  expect "$bin" 2 "--backend=sim in a job of 2 processes started by OpenMPI (OMPI_COMM_WORLD_SIZE=2" "${mpi2[@]}" "$bin" --backend=sim
  expect "$bin" 2 "the job would run 2 times" "${mpi2[@]}" "$bin" --backend=nccl
  # A world of one process is a plain start.
  expect "$bin" 0 "" RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 "$bin" --backend=sim --world_size=1 --epochs=1 --timeout=60
done

if [[ $fails -ne 0 ]]; then echo "$fails failure(s)"; exit 1; fi
echo "all example flag checks passed"
