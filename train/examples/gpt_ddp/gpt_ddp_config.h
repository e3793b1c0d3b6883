// gpt_ddp's options and configuration (train/examples/gpt_ddp/gpt_ddp_lib.h
// runs it), and the checks that need no communicator: the binary's usage errors
// (exit 2), found before any rank starts.
#ifndef TANDEM_TRAIN_EXAMPLES_GPT_DDP_GPT_DDP_CONFIG_H_
#define TANDEM_TRAIN_EXAMPLES_GPT_DDP_GPT_DDP_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/nn/models/gpt.h"
#include "train/checkpoint/run_checkpointer.h"
#include "train/examples/runner/example_options.h"

// The options (example_options.h), in the order the ranks compare them.
// The bounds far above any use of this example catch typos (or INT64_MAX)
// that would overflow a count or run for ever rather than fail.
#define TANDEM_GPT_DDP_OPTIONS(X)                                             \
  X(std::string, preset, "", Any(), kLocal,                                   \
    "Model preset: gpt2 (124M: 12 layers, 12 heads, 768 wide, 1024 "          \
    "positions, vocabulary 50257), or empty for the flags below.")            \
  X(int64_t, n_layer, 0, Between(0, 1024), kLocal,                            \
    "Transformer blocks (0: 4, or the preset's).")                            \
  X(int64_t, n_head, 0, Between(0, 4096), kLocal,                             \
    "Attention heads (0: 4, or the preset's).")                               \
  X(int64_t, n_embd, 0, Between(0, 65536), kLocal,                            \
    "Width (0: 64, or the preset's).")                                        \
  X(int64_t, vocab, 0, Between(0, int64_t{1} << 24), kLocal,                  \
    "Vocabulary size (0: 256, byte-level, or the preset's).")                 \
  X(double, dropout, 0.0, Any(), kLocal, /* GptConfig::Validate */            \
    "Dropout probability (embedding, attention, residual).")                  \
  X(std::string, data, "train/data/public_domain_english.txt", Any(), kLocal, \
    "Text file: its bytes are the tokens.")                                   \
  X(int64_t, block_size, 0, Between(0, int64_t{1} << 20), kAgreed,            \
    "Tokens per training block (0: 64, or the preset's positions); "          \
    "without a preset also the model's positions.")                           \
  X(int64_t, batch_size, 4, Between(1, 65536), kAgreed,                       \
    "Blocks per rank per micro-batch.")                                       \
  X(int64_t, grad_accum, 1, Between(1, 65536), kAgreed,                       \
    "Micro-batches per step (gradient accumulation, DDP's no_sync).")         \
  X(int64_t, max_steps, 40, Between(1, 1000000000), kAgreed,                  \
    "Optimizer steps.")                                                       \
  X(double, lr, 3e-3, FiniteAtLeast(0), kAgreed, "Peak learning rate.")       \
  X(double, min_lr, 1e-4, FiniteAtLeast(0), kAgreed,                          \
    "Learning rate at the end of the cosine.")                                \
  X(int64_t, warmup_steps, 5, AtLeast(0), kAgreed, "Linear warm-up steps.")   \
  X(std::string, lr_decay, "cosine", OneOf("cosine", "constant"), kAgreed,    \
    "cosine or constant.")                                                    \
  X(double, weight_decay, 0.1, FiniteAtLeast(0), kAgreed,                     \
    "AdamW weight decay of matrices and embeddings (nanoGPT's groups).")      \
  X(double, beta1, 0.9, InHalfOpenRange(0, 1), kAgreed, "AdamW beta1.")       \
  X(double, beta2, 0.95, InHalfOpenRange(0, 1), kAgreed, "AdamW beta2.")      \
  X(double, grad_clip, 1.0, FiniteAtLeast(0), kAgreed,                        \
    "Gradient norm clip (0: off).")                                           \
  X(uint64_t, seed, 1337, Any(), kAgreed,                                     \
    "Seed of the model, the data order, dropout and the sample.")             \
  X(int64_t, log_every, 1, AtLeast(1), kLocal,                                \
    "Print the training loss every N steps.")                                 \
  X(int64_t, eval_every, 0, AtLeast(0), kLocal,                               \
    "Print the validation loss every N steps (0: after the last).")           \
  X(int64_t, eval_blocks, 32, AtLeast(1), kLocal,                             \
    "Validation blocks evaluated.")                                           \
  X(int64_t, sample_tokens, 0, Between(0, 1000000), kLocal,                   \
    "Tokens of text to generate at the end (top-k sampling).")                \
  X(int64_t, top_k, 40, AtLeast(1), kLocal, "Top-k of the sampling.")         \
  X(std::string, parallel, "ddp", OneOf("ddp", "zero1", "zero2", "fsdp"),     \
    kAgreed,                                                                  \
    "ddp, zero1 (optimizer state sharded), zero2 (and gradients) or "         \
    "fsdp (and parameters).")                                                 \
  X(std::string, amp, "off", OneOf("off", "bf16", "f16"), kAgreed,            \
    "Autocast dtype: off (f32), bf16 or f16.")                                \
  X(std::string, init_from, "", Any(), kLocal,                                \
    "A Hugging Face GPT-2 folder (config.json, model.safetensors) to "        \
    "start from; it must describe the flags' model.")                         \
  X(std::string, export_hf, "", Any(), kLocal,                                \
    "Write the trained model here as a Hugging Face GPT-2 folder "            \
    "(GPT2LMHeadModel.from_pretrained reads it).")                            \
  TANDEM_VIRTUAL_WORLD_OPTION(X)

namespace tandem::train {

TANDEM_EXAMPLE_OPTIONS(GptDdpOptions, TANDEM_GPT_DDP_OPTIONS);

// The options with what they resolve to. block_size is the tokens per
// training block (<= model.block_size), never 0 here.
struct GptDdpConfig : GptDdpOptions {
  nn::GptConfig model;  // from --preset and the model options
  checkpoint::CheckpointOptions checkpoint;
  // Tests of resume: return after this many steps of the schedule (as if
  // the run were stopped there; max_steps still sets the schedule); 0 runs
  // to max_steps. No validation or sample when stopped early.
  int64_t stop_after = 0;
};

// The run the options describe: the preset's model (or 4 layers, 4 heads,
// 64 wide, 256 tokens, positions = block_size) with the model options that
// are not 0 laid over it, block_size 64 or the preset's positions when 0;
// then CheckGptDdpConfig. InvalidArgument for an unknown --preset or a
// broken rule.
absl::StatusOr<GptDdpConfig> ResolveGptDdpConfig(
    const GptDdpOptions& options, checkpoint::CheckpointOptions checkpoint);

// Checks that need no communicator (the binary's usage errors, exit 2):
// every option's rule (example_options.h's shared message), the model
// configuration (GptConfig::Validate), block_size in [1,
// model.block_size], warmup_steps < max_steps under cosine, amp allowed
// with the mode (f16 needs ddp: its GradScaler steps the whole model's
// optimizer). InvalidArgument naming the flag, its value and what is
// expected.
absl::Status CheckGptDdpConfig(const GptDdpConfig& config);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_GPT_DDP_GPT_DDP_CONFIG_H_
