#!/usr/bin/env bash
# A tandemrun worker for restart tests: on the first attempt
# (TORCHELASTIC_RESTART_COUNT=0) rank 1 starts PROGRAM, waits for the first
# committed training state in CKPT, then SIGKILLs PROGRAM and itself; every
# other worker (and every later attempt) is PROGRAM itself.
#
#   tandemrun ... -- kill_after_first_checkpoint.sh CKPT PROGRAM ARGS...
ckpt=$1
shift
if [[ "$RANK" == 1 && "$TORCHELASTIC_RESTART_COUNT" == 0 ]]; then
  "$@" &
  pid=$!
  for ((i = 0; i < 60000; i++)); do
    [[ -e "$ckpt/training_state.safetensors" ]] && break
    sleep 0.005
  done
  kill -9 "$pid"
  kill -9 $$
fi
exec "$@"
