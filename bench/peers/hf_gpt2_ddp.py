"""tandem's //train:gpt_ddp in PyTorch: Hugging Face's GPT2LMHeadModel
(transformers 4.36.2) trained under DistributedDataParallel (gloo, one
process per rank), for the fidelity test (bench/peers/hf_gpt2_fidelity_test.sh,
docs/huggingface.md).

    $(bench/peers/hf_venv.sh) bench/peers/hf_gpt2_ddp.py --init_from=DIR \
        --data=FILE --world_size=2 --block_size=32 --batch_size=2 --max_steps=20

The same run as gpt_ddp given the same flags:
  - the model: GPT2LMHeadModel.from_pretrained(--init_from) (tandem's
    --export_hf output), dropout 0 (the peer compares without masks);
  - the batches: the file's bytes as tokens, blocks of block_size + 1 tokens
    at offsets i * block_size (train/data/token_blocks.h), the last tenth
    (at least one) held out for validation, a
    DistributedSampler(shuffle=True, seed, drop_last=True) over the others;
    step s is in epoch s // steps_per_epoch (steps_per_epoch = a rank's
    blocks // (batch_size x grad_accum)) and its micro-batch m takes
    batch_size blocks of the rank's order from (s mod steps_per_epoch) x
    grad_accum + m batches in (train/examples/gpt_ddp/gpt_ddp_lib.h);
  - the step: --grad_accum micro-batches (no_sync on all but the last), each
    loss / grad_accum backpropagated, the gradients' global norm clipped to
    --grad_clip (0 = off), torch.optim.AdamW with nanoGPT's groups (weight
    decay on tensors of 2+ dimensions), the learning rate of step it
    (0-based) set before optimizer.step(): linear warm-up lr (it + 1) /
    warmup_steps, then cosine to --min_lr at --max_steps
    (tensor/optim/lr_scheduler.h's WarmupCosineLR), or constant;
  - with --compare_final=DIR, rank 0 loads DIR (gpt_ddp's --export_hf of
    the same run) strictly at the end and prints
      final model: max |logit difference| / max |logit| R
    on its first batch (see compare_final);
  - the line rank 0 prints every --log_every steps, the step's loss averaged
    over micro-batches and ranks:
      step N | loss X.XXXXXX | lr Y | tokens/s Z
Runs on Debian's PyTorch 1.13 (CPU) with transformers from the venv that
bench/peers/hf_venv.sh makes.
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler
from transformers import GPT2LMHeadModel

from fork_ranks import run_ranks
from rank_exit import exit_rank


def lr_at(args, it):
    if args.lr_decay == "constant":
        return args.lr
    if it < args.warmup_steps:
        return args.lr * (it + 1) / args.warmup_steps
    if it > args.max_steps:
        return args.min_lr
    ratio = (it - args.warmup_steps) / (args.max_steps - args.warmup_steps)
    return args.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (args.lr - args.min_lr)


class Batches:
    """gpt_ddp's batches: the last tenth of the blocks (at least one) held
    out, a DistributedSampler over the rest; step s of epoch s // steps_per_epoch
    takes micro-batch m from position (s_in_epoch * grad_accum + m) * batch_size
    of the rank's order."""

    def __init__(self, data, args, rank):
        self.data = data
        self.args = args
        self.t = args.block_size
        n_blocks = (len(data) - 1) // self.t
        train_blocks = n_blocks - max(1, n_blocks // 10)
        self.sampler = DistributedSampler(range(train_blocks), num_replicas=args.world_size,
                                          rank=rank, shuffle=True, seed=args.seed,
                                          drop_last=True)
        per_step = args.batch_size * args.grad_accum
        self.steps_per_epoch = (train_blocks // args.world_size) // per_step
        if self.steps_per_epoch < 1:
            raise SystemExit("hf_gpt2_ddp.py: %d training blocks cannot give each of %d "
                             "ranks %d blocks a step" % (train_blocks, args.world_size, per_step))
        self.epoch = -1
        self.order = []

    def get(self, step, micro):
        epoch, in_epoch = divmod(step, self.steps_per_epoch)
        if epoch != self.epoch:
            self.sampler.set_epoch(epoch)
            self.order = list(self.sampler)
            self.epoch = epoch
        b = self.args.batch_size
        first = (in_epoch * self.args.grad_accum + micro) * b
        idx = self.order[first:first + b]
        t = self.t
        x = torch.stack([self.data[i * t:i * t + t] for i in idx]).long()
        y = torch.stack([self.data[i * t + 1:i * t + t + 1] for i in idx]).long()
        return x, y


def worker(rank, args, port, data):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=args.world_size)
    model = GPT2LMHeadModel.from_pretrained(args.init_from, resid_pdrop=0.0,
                                            embd_pdrop=0.0, attn_pdrop=0.0)
    model.train()
    # GPT2Attention's constant buffers (the bool causal mask, masked_bias):
    # gloo cannot broadcast bool tensors, and they never change.
    DDP._set_params_and_buffers_to_ignore_for_model(
        model, [n for n, _ in model.named_buffers()])
    ddp = DDP(model)
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2],
               "weight_decay": args.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=(args.beta1, args.beta2), eps=1e-8)
    batches = Batches(data, args, rank)
    vocab = model.config.vocab_size
    start = time.time()
    for it in range(args.max_steps):
        opt.zero_grad(set_to_none=False)
        total = 0.0
        for micro in range(args.grad_accum):
            x, y = batches.get(it, micro)
            last = micro == args.grad_accum - 1
            ctx = ddp.no_sync() if not last else _Nothing()
            with ctx:
                logits = ddp(x).logits
                loss = F.cross_entropy(logits.view(-1, vocab), y.view(-1))
                (loss / args.grad_accum).backward()
            total += loss.item() / args.grad_accum
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        lr = lr_at(args, it)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        mean = torch.tensor([total], dtype=torch.float64)
        dist.all_reduce(mean)
        mean = mean.item() / args.world_size
        step = it + 1
        if rank == 0 and (step % args.log_every == 0 or step == args.max_steps):
            tokens = step * args.world_size * args.grad_accum * args.batch_size * args.block_size
            tps = tokens / max(time.time() - start, 1e-9)
            print("step %d | loss %.6f | lr %.4e | tokens/s %.0f" % (step, mean, lr, tps),
                  flush=True)
    if rank == 0 and args.compare_final:
        compare_final(model, args.compare_final, batches.get(0, 0)[0])
    exit_rank()  # rank_exit.py says why not destroy_process_group


def compare_final(model, folder, x):
    """Prints how far the trained model is from the one in `folder` (tandem's
    --export_hf after the same run, loaded strictly): the largest logit
    difference on the batch `x` over the largest logit, both in eval mode.
    Logits, not weights: the key bias of c_attn gets no gradient in exact
    arithmetic (softmax ignores a constant per row), so Adam turns each
    side's rounding noise into lr-sized steps of opposite signs; they move
    no output."""
    other, info = GPT2LMHeadModel.from_pretrained(folder, output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    if problems:
        raise SystemExit("hf_gpt2_ddp.py: from_pretrained(%s) reported %s" % (folder, problems))
    model.eval()
    other.eval()
    with torch.no_grad():
        ours, theirs = model(x).logits, other(x).logits
    rel = ((ours - theirs).abs().max() / theirs.abs().max()).item()
    print("final model: max |logit difference| / max |logit| %.3g" % rel, flush=True)


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--init_from", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--world_size", type=int, default=1)
    p.add_argument("--block_size", type=int, required=True)
    p.add_argument("--batch_size", type=int, default=8)
    p.add_argument("--grad_accum", type=int, default=1)
    p.add_argument("--max_steps", type=int, default=50)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min_lr", type=float, default=1e-4)
    p.add_argument("--warmup_steps", type=int, default=5)
    p.add_argument("--lr_decay", choices=["cosine", "constant"], default="cosine")
    p.add_argument("--weight_decay", type=float, default=0.1)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.95)
    p.add_argument("--grad_clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--log_every", type=int, default=1)
    p.add_argument("--compare_final", default="",
                   help="a folder of the same run's final weights (gpt_ddp --export_hf) "
                        "to compare the trained model with")
    p.add_argument("--timeout_s", type=float, default=600,
                   help="seconds all ranks together may run; then every rank is killed "
                        "and the script exits 1 naming the rank that hung")
    args = p.parse_args()
    with open(args.data, "rb") as f:
        data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
    if len(data) < args.block_size + 1:
        sys.exit("hf_gpt2_ddp.py: %s holds %d bytes, fewer than one block (%d)"
                 % (args.data, len(data), args.block_size + 1))
    sys.exit(run_ranks(worker, args, data, args.world_size, args.timeout_s))


if __name__ == "__main__":
    main()
