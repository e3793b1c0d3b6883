#!/usr/bin/env bash
# The tandemrun command line: exit codes (0 all workers succeeded, 1 a worker
# failed, 2 usage error, 128+N after signal N), the failure report, the
# worker's own lines passed through untouched.
#
#   tandemrun_cli_test.sh TANDEMRUN
set -uo pipefail
bin=$1
fails=0
tmp=${TEST_TMPDIR:-$(mktemp -d)}

# expect CODE PHRASE ARGS...: runs tandemrun ARGS, checks exit code and that
# the output (stdout + stderr) contains PHRASE.
expect() {
  local want=$1 phrase=$2
  shift 2
  local got rc
  got=$(timeout 60 "$bin" "$@" 2>&1)
  rc=$?
  if [[ $rc -ne $want || "$got" != *"$phrase"* ]]; then
    echo "FAIL: tandemrun $* exited $rc, expected $want and '$phrase'; output:"
    echo "$got"
    fails=$((fails + 1))
  fi
}

expect 2 "no worker program given" --nproc_per_node=2
expect 2 "unknown flag '--nproc=2'" --nproc=2 -- true
expect 2 "--nproc_per_node=0" --nproc_per_node=0 -- true
expect 2 "--node_rank=3 is outside [0, --nnodes=2)" --nnodes=2 --node_rank=3 -- true
expect 0 "Exit codes: 0 every worker succeeded" --help
expect 1 "cannot start '/no/such/program' for rank 0" --master_port=0 -- /no/such/program
expect 0 "[GPU1] world 2" --nproc_per_node=2 --master_port=0 -- \
  sh -c 'echo "[GPU$RANK] world $WORLD_SIZE"'
# Without "--": the first word that is not a flag starts the command.
expect 0 "[GPU0] hi" --master_port=0 sh -c 'echo "[GPU$RANK] hi"'
expect 1 "rank      : 1 (local_rank: 1)" --nproc_per_node=2 --master_port=0 -- \
  sh -c 'if [ $RANK = 1 ]; then echo "it broke" >&2; exit 3; fi; exec sleep 60'
expect 1 "    it broke" --nproc_per_node=2 --master_port=0 -- \
  sh -c 'if [ $RANK = 1 ]; then echo "it broke" >&2; exit 3; fi; exec sleep 60'
expect 0 "restarting all 2 workers (restart 1 of 1)" --nproc_per_node=2 \
  --master_port=0 --max_restarts=1 -- \
  sh -c '[ $TORCHELASTIC_RESTART_COUNT = 1 ] || [ $RANK = 0 ]'

# SIGTERM to tandemrun reaches the workers; tandemrun exits 128 + 15.
"$bin" --nproc_per_node=2 --master_port=0 -- sh -c \
  "trap 'echo stopped > $tmp/term\$RANK; exit 0' TERM; touch $tmp/ready\$RANK; while true; do sleep 0.05; done" &
pid=$!
for _ in $(seq 1 200); do
  [[ -e $tmp/ready0 && -e $tmp/ready1 ]] && break
  sleep 0.05
done
kill -TERM $pid
wait $pid
rc=$?
if [[ $rc -ne 143 || ! -e $tmp/term0 || ! -e $tmp/term1 ]]; then
  echo "FAIL: SIGTERM: tandemrun exited $rc (expected 143), workers stopped: $(ls $tmp)"
  fails=$((fails + 1))
fi

if [[ $fails -ne 0 ]]; then echo "$fails failure(s)"; exit 1; fi
echo "all tandemrun checks passed"
