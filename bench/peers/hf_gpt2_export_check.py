"""tandem's Hugging Face export and import against transformers 4.36.2
(docs/huggingface.md), run by bench/peers/hf_gpt2_export_test.sh in the venv
of bench/peers/hf_venv.sh:

  1. export: //train/hf:gpt2_logits_fixture writes a GPT's pretrained
     folder and its logits on a fixed input; GPT2LMHeadModel.from_pretrained
     loads the folder with no missing, unexpected or mismatched key, ties
     lm_head to wte, and its logits equal tandem's;
  2. import: a GPT2LMHeadModel made in PyTorch and saved with save_pretrained
     is loaded by the fixture (--init_from), whose logits equal PyTorch's;
  3. the hub's form: the same model's GPT2Model saved alone (names without
     "transformer.", config architectures GPT2Model) loads too;
  4. initialisation: tandem's GPT from seed s equals
     torch.manual_seed(s); GPT2LMHeadModel(config) bit for bit, every tensor
     (tensor/nn/models/gpt.h draws in Hugging Face's order).

    python hf_gpt2_export_check.py --fixture=BIN --workdir=DIR
Logits are compared within 1e-5 relative to their largest magnitude (f32,
different summation orders). Exit 0 when all match, 1 otherwise.
"""
import argparse
import os
import subprocess
import sys

import torch
from safetensors.torch import load_file
from transformers import GPT2Config, GPT2LMHeadModel

SIZES = dict(vocab=64, block_size=16, n_layer=2, n_head=2, n_embd=16)
TOLERANCE = 1e-5


def fixture(args, *flags):
    cmd = [args.fixture] + ["--%s=%d" % kv for kv in SIZES.items()] + list(flags)
    subprocess.run(cmd, check=True)


def close(name, ours, theirs):
    scale = max(theirs.abs().max().item(), 1e-30)
    err = (ours - theirs).abs().max().item() / scale
    ok = err <= TOLERANCE
    print("%s: logits %s, max |difference| / max |logit| = %.3g (limit %g)"
          % (name, "match" if ok else "DIFFER", err, TOLERANCE))
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fixture", required=True)
    p.add_argument("--workdir", required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    ok = True
    config = GPT2Config(vocab_size=SIZES["vocab"], n_positions=SIZES["block_size"],
                        n_layer=SIZES["n_layer"], n_head=SIZES["n_head"],
                        n_embd=SIZES["n_embd"], resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0)

    # 1. tandem -> transformers.
    out = os.path.join(args.workdir, "tandem_export")
    fixture(args, "--seed=5", "--export_hf=" + out,
            "--logits_out=" + os.path.join(args.workdir, "tandem_logits.safetensors"))
    saved = load_file(os.path.join(args.workdir, "tandem_logits.safetensors"))
    model, info = GPT2LMHeadModel.from_pretrained(out, output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    if problems:
        print("export: from_pretrained reported %s" % problems)
        ok = False
    else:
        print("export: from_pretrained loaded every key (no missing, unexpected "
              "or mismatched key)")
    if model.lm_head.weight.data_ptr() != model.transformer.wte.weight.data_ptr():
        print("export: lm_head is not tied to wte")
        ok = False
    model.eval()
    with torch.no_grad():
        ok &= close("export", saved["logits"], model(saved["idx"]).logits)

    # 4. The export above is tandem's initial model from --seed=5.
    torch.manual_seed(5)
    fresh = GPT2LMHeadModel(config).state_dict()
    differing = [k for k, v in model.state_dict().items()
                 if not k.endswith((".attn.bias", ".attn.masked_bias"))
                 and not torch.equal(v, fresh[k])]
    if differing:
        print("init: tandem's seed-5 weights differ from GPT2LMHeadModel's "
              "after torch.manual_seed(5) in %s" % ", ".join(differing))
        ok = False
    else:
        print("init: tandem's seed-5 weights equal GPT2LMHeadModel's after "
              "torch.manual_seed(5), bit for bit (%d tensors)" % len(fresh))

    # 2. transformers -> tandem, and 3. the hub's unprefixed form.
    torch.manual_seed(3)
    theirs = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        want = theirs(saved["idx"]).logits
    for name, module in (("import", theirs), ("import GPT2Model", theirs.transformer)):
        folder = os.path.join(args.workdir, name.replace(" ", "_"))
        module.save_pretrained(folder)
        logits = os.path.join(folder, "logits.safetensors")
        fixture(args, "--seed=9", "--init_from=" + folder, "--logits_out=" + logits)
        ok &= close(name, load_file(logits)["logits"], want)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
