"""Starts a PyTorch peer's ranks: one forked process per rank on a free
127.0.0.1 port, each running worker(rank, args, port, data); waits for all
of them. fork: the children inherit torch (and transformers) already
imported (a second import per rank costs seconds on a loaded machine).
Shared by bench/peers/gpt_ddp.py and bench/peers/hf_gpt2_ddp.py.

A worker ends with rank_exit.exit_rank(), not destroy_process_group()
(rank_exit.py says why). A rank still running at the deadline prints every
thread's Python stack (faulthandler, SIGUSR1) before it is killed, so a
hang names its line."""
import faulthandler
import os
import signal
import socket
import sys
import time
from multiprocessing.connection import wait

import torch.multiprocessing as mp

# How long each hung rank gets to print its stacks.
_STACK_DUMP_S = 0.5


def _rank_main(worker, rank, args, port, data):
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    worker(rank, args, port, data)


def run_ranks(worker, args, data, world_size, timeout_s):
    """Returns 0 when every rank exited 0, else 1. All ranks together get
    timeout_s seconds. A rank that fails (non-zero exit, killed) or is still
    running at the deadline is named on stderr and every other rank is
    killed at once: its peers would otherwise wait in gloo for a rank that
    is gone (gloo's own timeout is 30 minutes), and the caller would wait
    for them at exit."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_rank_main, args=(worker, r, args, port, data))
             for r in range(world_size)]
    for proc in procs:
        proc.start()
    deadline = time.monotonic() + timeout_s
    running = list(procs)
    why = None
    while running and why is None:
        left = deadline - time.monotonic()
        if left <= 0:
            why = "rank %d of %d still running after %g s" % (
                procs.index(running[0]), world_size, timeout_s)
            break
        for sentinel in wait([p.sentinel for p in running], left):
            proc = next(p for p in running if p.sentinel == sentinel)
            proc.join()
            running.remove(proc)
            if proc.exitcode != 0:
                why = "rank %d of %d exited with %d" % (procs.index(proc), world_size,
                                                         proc.exitcode)
    if why is None:
        return 0
    print("fork_ranks: %s; the Python stacks of every rank still running follow, "
          "then every rank is killed" % why, file=sys.stderr, flush=True)
    for proc in running:
        print("fork_ranks: rank %d (pid %d):" % (procs.index(proc), proc.pid),
              file=sys.stderr, flush=True)
        os.kill(proc.pid, signal.SIGUSR1)
        time.sleep(_STACK_DUMP_S)  # the stacks of one rank, then the next's
    for proc in running:
        proc.kill()
    for proc in running:
        proc.join(10)
    return 1
