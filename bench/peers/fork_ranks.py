"""Starts a PyTorch peer's ranks: one forked process per rank on a free
127.0.0.1 port, each running worker(rank, args, port, data); waits for all
of them. fork: the children inherit torch (and transformers) already
imported (a second import per rank costs seconds on a loaded machine).
Shared by bench/peers/gpt_ddp.py and bench/peers/hf_gpt2_ddp.py."""
import socket

import torch.multiprocessing as mp


def run_ranks(worker, args, data, world_size, timeout_s):
    """Returns 0 when every rank exited 0, else 1. Each join waits at most
    timeout_s."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=worker, args=(r, args, port, data))
             for r in range(world_size)]
    for proc in procs:
        proc.start()
    status = 0
    for proc in procs:
        proc.join(timeout_s)
        if proc.exitcode != 0:
            status = 1
    return status
