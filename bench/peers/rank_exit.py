"""exit_rank(): how a PyTorch peer's rank ends, in place of
dist.destroy_process_group().

PyTorch 1.13's teardown of a gloo process group can deadlock inside one
process. Seen with gdb on a hung rank: the main thread, holding the GIL,
drops the DDP Reducer, whose ProcessGroupGloo destructor joins the group's
worker threads; one worker is just releasing the last reference to a tensor
of a finished collective, and that tensor's Python object needs the GIL to
be freed (c10::TensorImpl::destroy_pyobj_if_needed). Neither moves. On this
machine a 2-rank DDP script ending with destroy_process_group hung in 10 of
200 runs; rank 1 of //bench:hf_gpt2_fidelity_test hung this way in CI.

exit_rank() waits at a barrier until every rank is done with its
collectives, flushes stdout and stderr, and leaves with os._exit(0): no
destructor runs (the kernel closes the sockets), so the race cannot happen.
The same script then hung in 0 of 150 runs. It suits both ways the peers
start their ranks (bench/peers/fork_ranks.py's fork, and mp.spawn, which
takes exit code 0 as success).
"""
import os
import sys

import torch.distributed as dist


def exit_rank():
    """Ends the calling rank with exit code 0 after a barrier of the default
    process group (blocks until every rank calls it; gloo's timeout bounds
    it, and fork_ranks' deadline bounds the ranks it starts). Does not
    return."""
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
