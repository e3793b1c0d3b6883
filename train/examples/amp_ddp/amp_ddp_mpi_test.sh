#!/usr/bin/env bash
# amp_ddp under mpirun prints exactly what it prints on the simulated
# cluster (losses, scales, skips and the weights' checksum of every rank,
# compared rank by rank), for each gradient hook (plain, fp16 and bf16
# compression) at world sizes 2 and 3: the compressed all-reduce gives the
# same bits on both engines.
#
#   amp_ddp_mpi_test.sh MPIRUN_WRAPPER AMP_DDP
set -uo pipefail
mpirun_wrapper=$1 bin=$2
fails=0
by_rank() { sort -s -t']' -k1,1; }

for n in 2 3; do
  for hook in allreduce fp16_compress bf16_compress; do
    flags=(--comm_hook="$hook" --steps=5 --inject_inf=1:2)
    sim=$("$bin" --backend=sim --world_size="$n" "${flags[@]}" | by_rank)
    mpi=$("$mpirun_wrapper" "$n" "$bin" --backend=mpi "${flags[@]}" | by_rank)
    if [[ -z "$sim" || "$sim" != "$mpi" ]]; then
      echo "FAIL: n=$n --comm_hook=$hook: mpirun differs from sim:"
      diff <(echo "$sim") <(echo "$mpi") | head -20
      fails=$((fails + 1))
    else
      echo "ok: n=$n --comm_hook=$hook ($(wc -l <<<"$sim") identical lines)"
    fi
  done
done
[[ $fails -eq 0 ]] || { echo "$fails failure(s)"; exit 1; }
