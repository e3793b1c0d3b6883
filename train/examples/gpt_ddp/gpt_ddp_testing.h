// Test support: the tiny GPT run the gpt_ddp tests train (a 2-layer,
// 32-wide byte-level GPT with dropout, AdamW with warm-up, clipping and
// gradient accumulation; 6 steps, validation every 3).
#ifndef TANDEM_TRAIN_EXAMPLES_GPT_DDP_GPT_DDP_TESTING_H_
#define TANDEM_TRAIN_EXAMPLES_GPT_DDP_GPT_DDP_TESTING_H_

#include "train/examples/gpt_ddp/gpt_ddp_lib.h"

namespace tandem::train {

// The corpus the tests read (a data dependency of theirs).
inline constexpr char kTestCorpus[] = "train/data/public_domain_english.txt";

inline GptDdpConfig TinyGptDdpConfig() {
  GptDdpConfig c;
  c.model.vocab_size = 256;
  c.model.block_size = 16;
  c.model.n_layer = 2;
  c.model.n_head = 4;
  c.model.n_embd = 32;
  c.model.dropout = 0.1;
  c.block_size = 16;
  c.batch_size = 4;
  c.grad_accum = 2;
  c.max_steps = 6;
  c.warmup_steps = 2;
  c.lr = 3e-3;
  c.grad_clip = 0.5;  // small enough to clip
  c.eval_every = 3;
  return c;
}

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_GPT_DDP_GPT_DDP_TESTING_H_
