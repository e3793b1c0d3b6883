#!/usr/bin/env bash
# Under mpirun with more than one process, --backend=sim (each process would
# run the whole job privately) fails on every rank with a message that says
# what was detected and to use --backend=mpi, and exits 2.
#
#   example_mpirun_cli_test.sh MPIRUN_WRAPPER TOY_DDP DIGITS_DDP
set -uo pipefail
mpirun_wrapper=$1
shift
fails=0

for bin in "$@"; do
  got=$("$mpirun_wrapper" 2 "$bin" --backend=sim 2>&1)
  rc=$?
  want="--backend=sim in a job of 2 processes started by OpenMPI (OMPI_COMM_WORLD_SIZE=2"
  if [[ $rc -ne 2 || "$got" != *"$want"* || "$got" != *"--backend=mpi"* ]]; then
    echo "FAIL: mpirun -np 2 $(basename "$bin") --backend=sim exited $rc with '$got', expected 2 and '$want'"
    fails=$((fails + 1))
  fi
done

if [[ $fails -ne 0 ]]; then echo "$fails failure(s)"; exit 1; fi
echo "all mpirun checks passed"
