#!/usr/bin/python3
"""Writes gpt_fixtures.inc, the GPT-2 facts gpt_test.cc checks.

Run from the repository root with PyTorch 1.13 (Debian's python3-torch):

  /usr/bin/python3 tensor/nn/models/testdata/make_gpt_fixtures.py \
      > tensor/nn/models/testdata/gpt_fixtures.inc

transformers is not installed in the system Python, so the reference is
Hugging Face's GPT2LMHeadModel (transformers 4.36.2, modeling_gpt2.py)
restated in plain PyTorch, line for line where it computes: Conv1D
(x @ W + b, W [in, out]), GPT2Attention's _split_heads / _attn (q k^T
divided by sqrt(head_dim), the causal mask as torch.where with the dtype's
minimum, softmax, attn_dropout, @ v, _merge_heads), gelu_new (the tanh
form), pre-norm blocks, ln_f and the tied lm_head, and the shifted-free
cross-entropy with ignore_index -100 on the given targets.

The tiny configuration: vocab 64, block 16, 2 layers, 4 heads, 32 wide.
Weights are set by formula (the same in gpt_test.cc), per parameter k in
tandem's order and element i in tandem's [out, in] layout:
  weights (.weight of Linear and Embedding): 0.1 * sin(0.37 i + 0.91 k)
  biases:                                    0.02 * sin(0.37 i + 0.91 k)
  LayerNorm weight: 1 + 0.1 * sin(...), LayerNorm bias: 0.05 * sin(...)
computed in double and rounded to float32. Tokens idx[b, t] =
(7 (b T + t) + 3) % 64, targets (5 (b T + t) + 1) % 64 with targets[0, 2] =
-100, B = 2, T = 8.

It prints, for float64 (the weights widened) in eval mode: the logits, the
loss and, per parameter, the gradient's sum, its sum weighted by
sin(0.13 i), and its first 4 and last 4 values; for float32 in train mode
with dropout 0.1 after torch.manual_seed(5): the logits and the loss.
"""
import math

import torch
import torch.nn.functional as F

V, P, L, H, C = 64, 16, 2, 4, 32
B, T = 2, 8


def names():
    out = [('transformer.wte.weight', (V, C)), ('transformer.wpe.weight',
                                                  (P, C))]
    for i in range(L):
        p = 'transformer.h.%d.' % i
        out += [(p + 'ln_1.weight', (C,)), (p + 'ln_1.bias', (C,)),
                (p + 'attn.c_attn.weight', (3 * C, C)),
                (p + 'attn.c_attn.bias', (3 * C,)),
                (p + 'attn.c_proj.weight', (C, C)),
                (p + 'attn.c_proj.bias', (C,)), (p + 'ln_2.weight', (C,)),
                (p + 'ln_2.bias', (C,)), (p + 'mlp.c_fc.weight', (4 * C, C)),
                (p + 'mlp.c_fc.bias', (4 * C,)),
                (p + 'mlp.c_proj.weight', (C, 4 * C)),
                (p + 'mlp.c_proj.bias', (C,))]
    out += [('transformer.ln_f.weight', (C,)), ('transformer.ln_f.bias', (C,))]
    return out


def value(name, k, i):
    s = math.sin(0.37 * i + 0.91 * k)
    if '.ln_' in name:
        return 1 + 0.1 * s if name.endswith('weight') else 0.05 * s
    return 0.1 * s if name.endswith('weight') else 0.02 * s


def params(dtype):
    ps = {}
    for k, (name, shape) in enumerate(names()):
        n = 1
        for d in shape:
            n *= d
        v = torch.tensor([value(name, k, i) for i in range(n)],
                         dtype=torch.float32).reshape(shape)
        ps[name] = v.to(dtype).requires_grad_(True)
    return ps


def conv1d(x, w, b):  # HF's Conv1D with W [in, out] = tandem's w.T
    size_out = x.size()[:-1] + (w.shape[0],)
    x = torch.addmm(b, x.view(-1, x.size(-1)), w.t())
    return x.view(size_out)


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(
        math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def forward(ps, idx, p, training):
    pre = 'transformer.'
    pos = torch.arange(0, T, dtype=torch.long)
    x = F.embedding(idx, ps[pre + 'wte.weight']) + F.embedding(
        pos, ps[pre + 'wpe.weight'])
    x = F.dropout(x, p, training)
    hd = C // H
    for i in range(L):
        q_ = pre + 'h.%d.' % i
        h = F.layer_norm(x, (C,), ps[q_ + 'ln_1.weight'], ps[q_ + 'ln_1.bias'],
                         1e-5)
        qkv = conv1d(h, ps[q_ + 'attn.c_attn.weight'],
                     ps[q_ + 'attn.c_attn.bias'])
        q, k, v = qkv.split(C, dim=2)
        split = lambda t: t.view(B, T, H, hd).permute(0, 2, 1, 3)
        q, k, v = split(q), split(k), split(v)
        w = torch.matmul(q, k.transpose(-1, -2))
        w = w / torch.full([], v.size(-1)**0.5, dtype=w.dtype)
        causal = torch.tril(torch.ones((P, P), dtype=torch.bool)).view(
            1, 1, P, P)[:, :, :T, :T]
        w = torch.where(causal, w.to(w.dtype),
                        torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype))
        w = F.softmax(w, dim=-1)
        w = F.dropout(w, p, training)
        a = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous().view(B, T, C)
        a = conv1d(a, ps[q_ + 'attn.c_proj.weight'], ps[q_ + 'attn.c_proj.bias'])
        x = x + F.dropout(a, p, training)
        h = F.layer_norm(x, (C,), ps[q_ + 'ln_2.weight'], ps[q_ + 'ln_2.bias'],
                         1e-5)
        h = gelu_new(conv1d(h, ps[q_ + 'mlp.c_fc.weight'],
                            ps[q_ + 'mlp.c_fc.bias']))
        h = conv1d(h, ps[q_ + 'mlp.c_proj.weight'], ps[q_ + 'mlp.c_proj.bias'])
        x = x + F.dropout(h, p, training)
    x = F.layer_norm(x, (C,), ps[pre + 'ln_f.weight'], ps[pre + 'ln_f.bias'],
                     1e-5)
    return x @ ps[pre + 'wte.weight'].t()


def floats(name, values):
    print('const std::vector<double> %s = {' % name)
    for j in range(0, len(values), 4):
        print('    ' + ', '.join(repr(float(v)) for v in values[j:j + 4]) + ',')
    print('};')


def main():
    idx = torch.tensor([(7 * i + 3) % V for i in range(B * T)]).view(B, T)
    targets = torch.tensor([(5 * i + 1) % V for i in range(B * T)]).view(B, T)
    targets[0, 2] = -100

    ps = params(torch.float64)
    logits = forward(ps, idx, 0.0, False)
    loss = F.cross_entropy(logits.view(-1, V), targets.view(-1),
                           ignore_index=-100)
    loss.backward()
    floats('kEvalLogits', logits.detach().flatten().tolist())
    print('constexpr double kEvalLoss = %r;' % loss.item())
    print('const GradFacts kGrads[] = {')
    for name, _ in names():
        g = ps[name].grad.flatten()
        wsum = sum(g[i].item() * math.sin(0.13 * i) for i in range(g.numel()))
        print('    {"%s", %r, %r, {%s}, {%s}},' %
              (name, g.sum().item(), wsum,
               ', '.join(repr(v) for v in g[:4].tolist()),
               ', '.join(repr(v) for v in g[-4:].tolist())))
    print('};')

    ps = params(torch.float32)
    torch.manual_seed(5)
    logits = forward(ps, idx, 0.1, True)
    loss = F.cross_entropy(logits.view(-1, V), targets.view(-1),
                           ignore_index=-100)
    floats('kTrainLogits', logits.detach().flatten().tolist())
    print('constexpr double kTrainLoss = %r;' % loss.item())


if __name__ == '__main__':
    main()
