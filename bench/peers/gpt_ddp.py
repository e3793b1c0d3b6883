#!/usr/bin/python3
"""A plain-PyTorch GPT-2 (nanoGPT's model.py, the math of Hugging Face's
GPT2LMHeadModel) under DistributedDataParallel (gloo, one process and one
thread per rank): the speed peer of tandem's //train:gpt_ddp in bench/compare
(topic gpt, claim ddp_gpt_2ranks_vs_torch).

    bench/peers/gpt_ddp.py --world_size=2 --n_layer=6 --n_head=6 --n_embd=384 \
        --block_size=256 --batch_size=8 --max_steps=6
    bench/peers/gpt_ddp.py ... --profile_steps=2   # rank 0's per-op CPU time

Why this and not bench/peers/hf_gpt2_ddp.py: the same model and step
(fused QKV c_attn, scaled q k^T, causal mask, softmax, att v, c_proj;
LayerNorm eps 1e-5; GELU tanh; tied lm_head; AdamW with nanoGPT's groups;
clip 1.0; warm-up + cosine), but it needs only Debian's python3-torch (no
PyPI venv) and carries none of transformers' per-call bookkeeping
(attention-mask and head-mask plumbing, output dataclasses), so PyTorch
runs the model as fast as its own kernels allow: the fairer speed peer.
PyTorch 1.13 has no scaled_dot_product_attention, so attention is nanoGPT's
non-flash path: a full [B, H, T, T] score tensor, masked_fill, softmax.

The batches: the corpus's bytes as tokens, blocks of block_size + 1 at
offsets i * block_size, a DistributedSampler(shuffle=True, seed,
drop_last=True) over them, batch_size blocks per rank per step (as gpt_ddp;
speed does not depend on which blocks). Rank 0 prints after every step

    step N | loss X.XXXXXX | lr Y | tokens/s Z

tokens/s being that step's tokens (every rank's) over rank 0's wall time for
the step, as gpt_ddp prints it; bench/compare takes the best step.
"""
import argparse
import math
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

try:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data.distributed import DistributedSampler

    from fork_ranks import run_ranks
    from rank_exit import exit_rank
except ImportError as e:
    sys.exit(f"gpt_ddp.py: {e}; sudo apt-get install python3-torch")


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x, mask):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(c, dim=2)
        hd = c // self.n_head
        q = q.view(b, t, self.n_head, hd).transpose(1, 2)
        k = k.view(b, t, self.n_head, hd).transpose(1, 2)
        v = v.view(b, t, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(mask[:, :, :t, :t] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, eps=1e-5)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd, eps=1e-5)
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x, mask):
        x = x + self.attn(self.ln_1(x), mask)
        h = F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")
        return x + self.c_proj(h)


class Gpt(nn.Module):
    def __init__(self, args):
        super().__init__()
        c = args.n_embd
        self.wte = nn.Embedding(args.vocab, c)
        self.wpe = nn.Embedding(args.block_size, c)
        self.h = nn.ModuleList(Block(c, args.n_head) for _ in range(args.n_layer))
        self.ln_f = nn.LayerNorm(c, eps=1e-5)
        self.lm_head = nn.Linear(c, args.vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as GPT-2
        # The causal mask, a buffer as in nanoGPT and GPT2Attention.
        n = args.block_size
        self.register_buffer("mask", torch.tril(torch.ones(n, n)).view(1, 1, n, n))
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * args.n_layer))
            elif p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx):
        t = idx.size(1)
        pos = torch.arange(t, dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x, self.mask)
        return self.lm_head(self.ln_f(x))


def lr_at(args, it):
    if it < args.warmup_steps:
        return args.lr * (it + 1) / args.warmup_steps
    if it > args.max_steps:
        return args.min_lr
    ratio = (it - args.warmup_steps) / max(1, args.max_steps - args.warmup_steps)
    return args.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (args.lr - args.min_lr)


def worker(rank, args, port, data):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=args.world_size)
    torch.manual_seed(args.seed)
    model = Gpt(args)
    model.train()
    ddp = DDP(model)
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2],
               "weight_decay": args.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    t = args.block_size
    n_blocks = (len(data) - 1) // t
    sampler = DistributedSampler(range(n_blocks), num_replicas=args.world_size,
                                 rank=rank, shuffle=True, seed=args.seed,
                                 drop_last=True)
    order = list(sampler)
    per_rank = len(order) // args.batch_size
    if per_rank < 1:
        raise SystemExit(f"gpt_ddp.py: {n_blocks} blocks cannot give each of "
                         f"{args.world_size} ranks {args.batch_size} blocks")

    def batch(it):
        first = (it % per_rank) * args.batch_size
        idx = order[first:first + args.batch_size]
        x = torch.stack([data[i * t:i * t + t] for i in idx]).long()
        y = torch.stack([data[i * t + 1:i * t + t + 1] for i in idx]).long()
        return x, y

    def step(it):
        x, y = batch(it)
        opt.zero_grad(set_to_none=True)
        logits = ddp(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        lr = lr_at(args, it)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        mean = torch.tensor([loss.item()], dtype=torch.float64)
        dist.all_reduce(mean)
        return mean.item() / args.world_size, lr

    if args.profile_steps:
        step(0)
        with torch.profiler.profile() as prof:
            for it in range(1, 1 + args.profile_steps):
                step(it)
        if rank == 0:
            sys.stdout.write(prof.key_averages().table(
                sort_by="self_cpu_time_total", row_limit=30) + "\n")
        exit_rank()
    tokens = args.world_size * args.batch_size * t
    for it in range(args.max_steps):
        start = time.perf_counter()
        loss, lr = step(it)
        seconds = time.perf_counter() - start
        if rank == 0:
            print("step %d | loss %.6f | lr %.4e | tokens/s %.0f"
                  % (it + 1, loss, lr, tokens / seconds), flush=True)
    exit_rank()  # rank_exit.py says why not destroy_process_group


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="train/data/public_domain_english.txt")
    p.add_argument("--world_size", type=int, default=2)
    p.add_argument("--n_layer", type=int, default=6)
    p.add_argument("--n_head", type=int, default=6)
    p.add_argument("--n_embd", type=int, default=384)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--block_size", type=int, default=256)
    p.add_argument("--batch_size", type=int, default=8)
    p.add_argument("--max_steps", type=int, default=6)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--min_lr", type=float, default=1e-4)
    p.add_argument("--warmup_steps", type=int, default=5)
    p.add_argument("--weight_decay", type=float, default=0.1)
    p.add_argument("--grad_clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--profile_steps", type=int, default=0,
                   help="print rank 0's per-op CPU time over this many steps "
                        "(after one warm-up step) instead of training")
    args = p.parse_args()
    if args.n_embd % args.n_head != 0:
        p.error(f"--n_embd {args.n_embd} is not divisible by --n_head {args.n_head}")
    try:
        with open(args.data, "rb") as f:
            data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
    except OSError as e:
        sys.exit(f"gpt_ddp.py: cannot read --data {args.data}: {e.strerror}")
    sys.exit(run_ranks(worker, args, data, args.world_size, 1800))


if __name__ == "__main__":
    main()
