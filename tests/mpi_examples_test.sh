#!/usr/bin/env bash
# The examples under mpirun print exactly what they print on the simulated
# cluster: toy_ddp (every rank's lines, compared rank by rank, since processes
# interleave differently from threads), digits_ddp and ddp_demo (rank 0's
# lines), for world sizes 2 and 3.
#
#   mpi_examples_test.sh MPIRUN_WRAPPER TOY_DDP DIGITS_DDP DDP_DEMO
set -uo pipefail
mpirun_wrapper=$1 toy=$2 digits=$3 demo=$4
fails=0

# Stable sort by the "[GPUk]" prefix: each rank's lines keep their order.
by_rank() { sort -s -t']' -k1,1; }

compare() {  # name, sim output, mpi output
  if [[ "$2" != "$3" ]]; then
    echo "FAIL: $1: mpirun output differs from the simulated cluster's:"
    diff <(echo "$2") <(echo "$3") | head -20
    fails=$((fails + 1))
  else
    echo "ok: $1 ($(echo "$2" | wc -l) identical lines)"
  fi
}

for n in 2 3; do
  sim=$("$toy" --backend=sim --world_size="$n" | by_rank)
  mpi=$("$mpirun_wrapper" "$n" "$toy" --backend=mpi | by_rank)
  compare "toy_ddp n=$n" "$sim" "$mpi"
  # 60 samples per step: divisible by 2 and 3 ranks.
  sim=$("$digits" --backend=sim --world_size="$n" --epochs=3 --global_batch_size=60 --progress=off)
  mpi=$("$mpirun_wrapper" "$n" "$digits" --backend=mpi --epochs=3 --global_batch_size=60 --progress=off)
  compare "digits_ddp n=$n" "${sim/ on sim,/ on mpi,}" "$mpi"
  sim=$("$demo" --backend=sim --world_size="$n" --epochs=2 --dataset-size=24 --batchSize=4)
  mpi=$("$mpirun_wrapper" "$n" "$demo" --backend=mpi --epochs=2 --dataset-size=24 --batchSize=4)
  compare "ddp_demo n=$n" "$sim" "$mpi"
done
# Auto-detection: under mpirun the default backend is mpi.
auto=$("$mpirun_wrapper" 2 "$toy" | by_rank)
compare "toy_ddp auto under mpirun" "$("$toy" --backend=sim --world_size=2 | by_rank)" "$auto"

[[ $fails -eq 0 ]] || { echo "$fails failure(s)"; exit 1; }
