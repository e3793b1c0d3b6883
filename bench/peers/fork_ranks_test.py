"""Tests bench/peers/fork_ranks.py and rank_exit.py with real gloo process
groups of 2 ranks: DDP ranks that end with exit_rank() exit 0 run after run
(destroy_process_group deadlocked in ~5 % of such runs; rank_exit.py says
why); ranks that end with exit_rank() make run_ranks return 0; a rank
that hangs is named, its Python stack printed, every rank killed and 1
returned within the deadline; a rank that fails gets its peer (waiting at the barrier)
killed at once. Run by //bench:fork_ranks_test; skips without torch."""
import os
import sys
import tempfile
import time

try:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
except ImportError:
    print("SKIP: PyTorch (python3-torch) is not installed")
    sys.exit(0)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fork_ranks import run_ranks  # noqa: E402
from rank_exit import exit_rank  # noqa: E402


def join_group(rank, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=2)


def all_finish(rank, args, port, data):
    join_group(rank, port)
    print("rank %d done" % rank, flush=True)
    exit_rank()


def ddp_steps(rank, args, port, data):
    """A few DDP steps and all-reduces: the collectives whose finished work
    the gloo worker threads release while the rank ends."""
    torch.set_num_threads(1)
    join_group(rank, port)
    model = DDP(torch.nn.Linear(64, 64))
    for _ in range(5):
        model(torch.randn(4, 64)).sum().backward()
        dist.all_reduce(torch.ones(1, dtype=torch.float64))
    exit_rank()


def rank1_hangs(rank, args, port, data):
    join_group(rank, port)
    if rank == 1:
        time.sleep(1000)  # the line the stack dump must name
    exit_rank()


def rank1_fails(rank, args, port, data):
    join_group(rank, port)
    if rank == 1:
        raise SystemExit(3)
    exit_rank()


def run(worker, timeout_s):
    """run_ranks' result, its seconds and what it and the ranks wrote to
    stderr (fd 2: the forked ranks inherit it)."""
    with tempfile.TemporaryFile(mode="w+") as err:
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            start = time.monotonic()
            rc = run_ranks(worker, None, None, 2, timeout_s)
            seconds = time.monotonic() - start
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        return rc, seconds, err.read()


def expect(cond, what, stderr=""):
    if not cond:
        sys.exit("FAIL: %s\n--- stderr ---\n%s" % (what, stderr))
    print("ok: %s" % what)


# With destroy_process_group instead of exit_rank, 50 runs pass together
# with probability ~0.95^50 = 8 %.
RUNS = 50
failed = [i for i in range(RUNS) if run(ddp_steps, 30)[0] != 0]
expect(not failed, "%d runs of DDP ranks ending with exit_rank() all exit 0 (failed: %s)"
       % (RUNS, failed))

rc, _, err = run(all_finish, 60)
expect(rc == 0, "ranks ending with exit_rank() give 0", err)

rc, seconds, err = run(rank1_hangs, 5)
expect(rc == 1, "a hung rank gives 1", err)
expect(seconds < 15, "the hung run ends near its 5 s deadline (took %.1f s)" % seconds, err)
expect("rank 1 (pid" in err, "the hung rank is named", err)
expect("in rank1_hangs" in err,
       "its Python stack is printed", err)
expect("in barrier" in err, "the rank waiting for it shows it waits at exit_rank()'s barrier", err)

rc, seconds, err = run(rank1_fails, 60)
expect(rc == 1, "a failed rank gives 1", err)
expect("rank 1 of 2 exited with 3" in err, "the failed rank and its code are named", err)
expect(seconds < 30, "its peer is killed at once, not at the deadline (took %.1f s)" % seconds,
       err)
print("PASS")
