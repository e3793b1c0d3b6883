#!/usr/bin/env bash
# Two nodes, one tandemrun each (here both on this machine, as on two hosts
# with --master_addr pointing at node 0), act as one job:
#   1. digits_ddp on gloo, one worker per node, prints exactly the lines of
#      the simulated cluster at world size 2;
#   2. node 1's worker is SIGKILLed after the first checkpoint: node 0's
#      tandemrun stops its own worker too, both restart together (restart 1
#      of 1), resume from the checkpoint, and end with checkpoint files
#      byte-identical to those of an uninterrupted run.
#
#   tandemrun_two_nodes_test.sh TANDEMRUN DIGITS_DDP DIGITS_CSV KILLER
#
# KILLER is kill_after_first_checkpoint.sh (the worker that dies).
set -uo pipefail
tandemrun=$1
digits=$2
csv=$3
killer=$4
tmp=${TEST_TMPDIR:-$(mktemp -d)}
fail() {
  echo "FAIL: $*"
  exit 1
}
free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
args=(--data="$csv" --epochs=20 --checkpoint_every=3 --progress=off)

# two_nodes OUT WORKER...: node 1 in the background, node 0 here; both must
# exit 0.
two_nodes() {
  local out=$1
  shift
  local port
  port=$(free_port)
  timeout 300 "$tandemrun" --nnodes=2 --node_rank=1 --nproc_per_node=1 \
    --master_port="$port" --max_restarts=1 -- "$@" >"$out.node1" 2>&1 &
  local node1=$!
  timeout 300 "$tandemrun" --nnodes=2 --node_rank=0 --nproc_per_node=1 \
    --master_port="$port" --max_restarts=1 -- "$@" >"$out.node0" 2>&1
  local rc0=$?
  wait $node1
  local rc1=$?
  [[ $rc0 -eq 0 && $rc1 -eq 0 ]] ||
    fail "two nodes exited $rc0 (node 0) and $rc1 (node 1): $(tail -5 "$out.node0") / $(tail -5 "$out.node1")"
}

# 1. The same lines as the simulated cluster.
"$digits" "${args[@]}" --backend=sim --world_size=2 --checkpoint_dir="$tmp/sim" \
  >"$tmp/sim.txt" 2>&1 ||
  fail "digits_ddp on sim failed: $(tail -5 "$tmp/sim.txt")"
two_nodes "$tmp/straight" "$digits" "${args[@]}" --backend=gloo \
  --checkpoint_dir="$tmp/straight"
sed 's/ on gloo,/ on sim,/' "$tmp/straight.node0" >"$tmp/gloo.txt"
diff "$tmp/sim.txt" "$tmp/gloo.txt" >"$tmp/diff.txt" ||
  fail "rank 0's lines differ between sim and two nodes on gloo: $(cat "$tmp/diff.txt")"

# 2. Node 1's worker killed after the first checkpoint.
two_nodes "$tmp/killed" "$killer" "$tmp/killed" "$digits" "${args[@]}" \
  --backend=gloo --checkpoint_dir="$tmp/killed"
grep -q "tandemrun: rank 1 failed (signal 9); restarting all 1 workers (restart 1 of 1)" "$tmp/killed.node1" ||
  fail "node 1 did not report its worker's SIGKILL and the restart: $(cat "$tmp/killed.node1")"
# Node 0's worker is either stopped by its tandemrun or dies of the closed
# connection first; either way node 0 names node 1's failure as the cause
# when it was posted first, and restarts with it.
grep -q "restarting all 1 workers (restart 1 of 1)" "$tmp/killed.node0" ||
  fail "node 0 did not restart with node 1: $(cat "$tmp/killed.node0")"
grep -q "digits_ddp: resuming from $tmp/killed at epoch " "$tmp/killed.node0" ||
  fail "the restarted job did not resume from the checkpoint: $(cat "$tmp/killed.node0")"
for f in model.safetensors training_state.safetensors; do
  cmp -s "$tmp/straight/$f" "$tmp/killed/$f" ||
    fail "$f differs between the uninterrupted two-node run and the killed one"
done
echo "two tandemruns acted as one job: sim's lines, and a SIGKILL on node 1 restarted both nodes to bit-identical weights"
