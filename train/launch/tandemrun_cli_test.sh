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
  "trap 'echo stopped > $tmp/term\$RANK; exit 0' TERM; touch $tmp/ready\$RANK; while true; do sleep 0.05; done" \
  2>"$tmp/term.err" &
pid=$!
for _ in $(seq 1 200); do
  [[ -e $tmp/ready0 && -e $tmp/ready1 ]] && break
  sleep 0.05
done
kill -TERM $pid
wait $pid
rc=$?
if [[ $rc -ne 143 || ! -e $tmp/term0 || ! -e $tmp/term1 ]] ||
  ! grep -q "tandemrun: stopped by signal 15 (Terminated)" "$tmp/term.err"; then
  echo "FAIL: SIGTERM: tandemrun exited $rc (expected 143), workers stopped: $(ls $tmp)"
  fails=$((fails + 1))
fi

# Waits speak: node 1 never started; node 0 says whom it waits for, and
# gives up after --rdzv_timeout naming it.
port=$((20000 + RANDOM % 20000))
expect 1 "still joining the job: waiting for node 1 of --nnodes=2 since" \
  --nnodes=2 --master_port=$port --rdzv_timeout=2 -- true
expect 2 "must be in [1, 65535]" --nnodes=2 --master_port=0 -- true
expect 1 "node 1 of --nnodes=2 did not come within 2s (--rdzv_timeout=2)" \
  --nnodes=2 --master_port=$port --rdzv_timeout=2 -- true
expect 1 "node 0's store did not come within 1s (--rdzv_timeout=1)" \
  --nnodes=2 --node_rank=1 --master_port=$port --rdzv_timeout=1 -- true
expect 2 "--rdzv_timeout=0: expected seconds > 0" --rdzv_timeout=0 -- true

# Limits: what cannot run here is refused in one line, before any worker.
expect 2 "--nproc_per_node=2147483647 cannot run here" \
  --nproc_per_node=2147483647 -- true
expect 2 "cannot run here: each worker needs a file descriptor" \
  --nproc_per_node=100000 -- true

# torchrun's habits: dash forms, --standalone, --rdzv_endpoint, auto.
expect 0 "[1 of 2 on port" --nproc-per-node=2 --standalone -- \
  sh -c 'echo "[$RANK of $WORLD_SIZE on port $MASTER_PORT]"'
expect 0 "[127.0.0.1:$port]" --rdzv-endpoint=127.0.0.1:$port --rdzv_id=job7 \
  --rdzv_backend=c10d -- sh -c 'echo "[$MASTER_ADDR:$MASTER_PORT]"'
expect 0 "[$(nproc) workers]" --nproc_per_node=auto --master_port=0 -- \
  sh -c '[ $RANK != 0 ] || echo "[$WORLD_SIZE workers]"'
expect 2 "--nproc_per_node='many': expected a count, auto, gpu or cpu" \
  --nproc_per_node=many -- true
expect 2 "--rdzv_endpoint='host:http': expected HOST[:PORT]" \
  --rdzv_endpoint=host:http -- true
expect 2 "--rdzv_backend=etcd: tandemrun's rendezvous is node 0's TCP store" \
  --rdzv_backend=etcd -- true
expect 2 "--standalone is a single-node job" --standalone --nnodes=2 -- true
for f in --log_dir=/tmp/logs --redirects=3 --tee=1; do
  expect 2 "${f} is not supported: tandemrun leaves the workers' stdout alone" \
    "$f" -- true
done
expect 0 "[ok]" --redirects=0 --tee=0 --master_port=0 -- echo "[ok]"

# A signal while the nodes wait for each other ends the wait at once, with
# the signal's exit code and one line saying what happened.
"$bin" --nnodes=2 --master_port=$((port + 1)) -- true \
  2>"$tmp/sigwait" &
pid=$!
for _ in $(seq 1 200); do
  grep -q "still joining" "$tmp/sigwait" 2>/dev/null && break
  sleep 0.05
done
kill -TERM $pid
wait $pid
rc=$?
if [[ $rc -ne 143 ]] || ! grep -q "tandemrun: stopped by signal 15 (Terminated)" "$tmp/sigwait"; then
  echo "FAIL: SIGTERM while waiting for node 1: exit $rc (expected 143); stderr:"
  cat "$tmp/sigwait"
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
