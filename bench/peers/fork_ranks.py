"""Starts a PyTorch peer's ranks: one forked process per rank on a free
127.0.0.1 port, each running worker(rank, args, port, data); waits for all
of them. fork: the children inherit torch (and transformers) already
imported (a second import per rank costs seconds on a loaded machine).
Shared by bench/peers/gpt_ddp.py and bench/peers/hf_gpt2_ddp.py."""
import socket
import sys
import time

import torch.multiprocessing as mp


def run_ranks(worker, args, data, world_size, timeout_s):
    """Returns 0 when every rank exited 0, else 1. All ranks together get
    timeout_s seconds; a rank still running then is named on stderr and
    killed with the others, so a hung peer ends (instead of the caller
    waiting for the children at exit) and says which rank hung."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=worker, args=(r, args, port, data))
             for r in range(world_size)]
    for proc in procs:
        proc.start()
    deadline = time.monotonic() + timeout_s
    status = 0
    for rank, proc in enumerate(procs):
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.exitcode is None:
            print("fork_ranks: rank %d of %d still running after %d s; killing every rank"
                  % (rank, world_size, timeout_s), file=sys.stderr, flush=True)
            for other in procs:
                if other.exitcode is None:
                    other.kill()
            for other in procs:
                other.join(10)
            return 1
        if proc.exitcode != 0:
            print("fork_ranks: rank %d exited with %d" % (rank, proc.exitcode),
                  file=sys.stderr, flush=True)
            status = 1
    return status
