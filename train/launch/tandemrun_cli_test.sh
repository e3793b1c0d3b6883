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

# alive PID: the process exists and is not a zombie (a reparented zombie
# waits for a reaper we do not control).
alive() {
  [[ -e /proc/$1 ]] && [[ "$(awk '{print $3}' /proc/$1/stat 2>/dev/null)" != Z ]]
}

# kill -9 of tandemrun: its workers and what they started go too (the
# watchdog ends their process groups). Bounded wait, not a timing.
rm -f "$tmp"/pids*
"$bin" --nproc_per_node=2 --master_port=0 -- sh -c \
  "sleep 120 & echo \$\$ \$! > $tmp/pids.\$RANK.tmp; mv $tmp/pids.\$RANK.tmp $tmp/pids.\$RANK; wait" &
pid=$!
for _ in $(seq 1 600); do
  [[ -e $tmp/pids.0 && -e $tmp/pids.1 ]] && break
  sleep 0.05
done
kill -9 $pid
wait $pid 2>/dev/null
left=""
for _ in $(seq 1 600); do
  left=""
  for p in $(cat "$tmp"/pids.0 "$tmp"/pids.1); do alive "$p" && left="$left $p"; done
  [[ -z $left ]] && break
  sleep 0.05
done
if [[ -n $left || ! -e $tmp/pids.0 ]]; then
  echo "FAIL: kill -9 of tandemrun left workers running:$left"
  fails=$((fails + 1))
fi

# A worker's background child must not hold the caller's stdout after
# another worker fails: out=$(tandemrun ...) returns once the job is over,
# not when `sleep 100` ends (timeout 60 is only the bound).
out=$(timeout 60 "$bin" --nproc_per_node=2 --master_port=0 -- sh -c \
  "if [ \$RANK = 1 ]; then sleep 0.5; exit 3; fi; sleep 100 & echo \$! > $tmp/bg; wait")
rc=$?
if [[ $rc -ne 1 ]] || { [[ -e $tmp/bg ]] && alive "$(cat $tmp/bg)"; }; then
  echo "FAIL: out=\$(tandemrun ...) with a failing worker exited $rc (expected 1; 124: held by an orphan)"
  fails=$((fails + 1))
fi

# A 40 MB stderr line without a newline comes through byte for byte (the
# forwarder keeps at most 64 KiB of a line and forwards the rest).
"$bin" --master_port=0 -- sh -c \
  'head -c 40000000 /dev/zero | tr "\0" a >&2; echo >&2' 2>"$tmp/long"
bytes=$(wc -c <"$tmp/long")
if [[ $bytes -ne 40000001 || $(tr -d a <"$tmp/long" | wc -c) -ne 1 ]]; then
  echo "FAIL: a 40 MB stderr line came out as $bytes bytes (expected 40000001)"
  fails=$((fails + 1))
fi

if [[ $fails -ne 0 ]]; then echo "$fails failure(s)"; exit 1; fi
echo "all tandemrun checks passed"
