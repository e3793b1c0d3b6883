// gpt_ddp's configuration (train/examples/gpt_ddp_lib.h runs it) and the
// checks that need no communicator: the binary's usage errors (exit 2),
// found before any rank starts.
#ifndef TANDEM_TRAIN_EXAMPLES_GPT_DDP_CONFIG_H_
#define TANDEM_TRAIN_EXAMPLES_GPT_DDP_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "tensor/nn/models/gpt.h"
#include "train/checkpoint/run_checkpointer.h"
#include "train/parallel/strategy.h"

namespace tandem::train {

struct GptDdpConfig {
  nn::GptConfig model;      // model.block_size: the model's positions
  int64_t block_size = 64;  // tokens per training block, <= model.block_size
  int64_t batch_size = 8;   // blocks per rank per micro-batch
  int64_t grad_accum = 1;   // micro-batches per step
  int64_t max_steps = 50;
  double lr = 1e-3;
  double min_lr = 1e-4;
  int64_t warmup_steps = 5;
  std::string lr_decay = "cosine";  // or "constant"
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double grad_clip = 1.0;  // 0: off
  uint64_t seed = 1337;
  int64_t log_every = 1;
  int64_t eval_every = 0;    // 0: only after the last step
  int64_t eval_blocks = 32;  // validation blocks evaluated (all if fewer)
  int64_t sample_tokens = 0;
  int64_t top_k = 40;
  std::string parallel = "ddp";  // ddp, zero1, zero2, fsdp
  std::optional<DType> amp;      // autocast dtype; nullopt: f32
  checkpoint::CheckpointOptions checkpoint;
  // Tests of resume: return after this many steps of the schedule (as if
  // the run were stopped there; max_steps still sets the schedule); 0 runs
  // to max_steps. No validation or sample when stopped early.
  int64_t stop_after = 0;
  // Hugging Face folders (train/hf/gpt2_pretrained.h, docs/huggingface.md):
  // every rank loads init_from (its config.json must describe `model`)
  // before the parallel wrapper is built; after the last step rank 0 writes
  // export_hf (the full parameters, gathered under fsdp). Empty: neither.
  std::string init_from;
  std::string export_hf;
};

// Checks that need no communicator (the binary's usage errors, exit 2):
// the model configuration (GptConfig::Validate), block_size in [1,
// model.block_size], the counts >= 1 (eval_every, sample_tokens >= 0),
// lr, min_lr, weight_decay, grad_clip finite and >= 0, betas in [0, 1),
// warmup_steps < max_steps under cosine, lr_decay and parallel known, amp
// allowed with the mode (f16 needs ddp: its GradScaler steps the whole
// model's optimizer). InvalidArgument naming the flag, its value and what
// is expected.
absl::Status CheckGptDdpConfig(const GptDdpConfig& config);

// --parallel's strategy: ddp is ShardMode::kNone; zero1, zero2 and fsdp
// their own. Anything else: InvalidArgument naming the choices.
absl::StatusOr<ShardMode> GptParallelMode(const std::string& parallel);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_GPT_DDP_CONFIG_H_
