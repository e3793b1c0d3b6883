// gpt_ddp: a GPT-2 (tensor/nn/models/gpt.h) trained data-parallel the way
// nanoGPT and llm.c train it, on a byte-level corpus.
//
//   sim::Run(2, [&](int, comm::Communicator& comm) {
//     return train::RunGptDdp(comm, config, data);
//   });
//
// Batches any PyTorch script can reproduce (train/data/token_blocks.h): the
// corpus' bytes cut into blocks of block_size + 1 tokens at offsets
// i * block_size; the last tenth of the blocks (at least one) is the
// validation set, the rest the training set, over which a
// DistributedSampler(shuffle=True, seed, drop_last=True) picks each rank's
// blocks every epoch (SetEpoch); a step takes batch_size blocks per rank
// per micro-batch, grad_accum micro-batches (the first grad_accum - 1
// inside DDP's NoSync), each micro-batch's loss divided by grad_accum.
//
// Optimisation: AdamW (eps 1e-8) with nanoGPT's groups: weight decay on
// every parameter of two or more dimensions, none on biases and LayerNorm.
// Under zero1, zero2 and fsdp the optimizer steps flat shards that mix
// parameters; each shard element takes its parameter's group's weight
// decay (train/parallel/sharded/shard_weight_decay.h), so every mode takes the
// same steps. Under fsdp each block is a unit (FsdpOptions::unit_layers =
// "transformer.h"), the embeddings, final LayerNorm and tied head the root
// unit. The learning rate of step
// s (0-based) is nanoGPT's get_lr(s) (optim::WarmupCosineLR::Rate: linear
// warm-up over warmup_steps, cosine to min_lr at max_steps) or, with
// lr_decay = "constant", lr. grad_clip > 0 clips the averaged gradients'
// global norm (Strategy::ClipGradNorm) before the step.
//
// Output (rank 0):
//   gpt_ddp: <corpus> (<tokens> tokens, <train> train / <val> val blocks of
//     <block_size>), <world> rank(s) on <backend>, GPT <config>, <params>
//     parameters, --parallel=<mode>
//   step N | loss X.XXXXXX | lr Y | tokens/s Z     every log_every steps
//                                                  (N from 1; the loss is
//                                                  the step's mean over
//                                                  ranks and micro-batches)
//   step N | val loss X.XXXXXX                     every eval_every steps
//                                                  and after the last
//   sample: <text>                                 sample_tokens > 0
// The sample: top-k sampling (k = top_k, temperature 1) from a newline,
// drawn from Generator(seed) on every rank alike (FSDP's forward is
// collective), printed by rank 0 with bytes outside printable ASCII
// escaped.
//
// The steps run on train/loop's TrainingLoop (training_loop.h): one
// schedule of max_steps steps over the sampler's epochs
// (LoopOptions::position_by_global_step), grad_accum micro-batches per step,
// clipping, autocast in --amp's dtype, the finite check, checkpoints and the
// monitor; --amp=f16 (ddp only) adds the loop's GradScaler (PyTorch's
// defaults: scale 65536, grown every 2000 clean steps), its state in every
// checkpoint.
//
// Checkpoints (--checkpoint_dir, --checkpoint_every): rank 0 saves the
// model (Hugging Face's names), AdamW's state, the progress, every rank's
// dropout generator and the model's configuration; a resumed run prints the
// lines an uninterrupted run prints from there on (tokens/s aside) and ends
// with the same weights, bit for bit, in every --parallel mode. A
// checkpoint of another model configuration is refused before training,
// naming both.
//
// Collective: every rank calls it. Errors: ranks whose configurations
// differ (CheckRanksAgree), a corpus too small for the batch, a non-finite
// loss (every rank stops naming the step: CheckStepFinite), failures of the
// communicator or the checkpoint files.
#ifndef TANDEM_TRAIN_EXAMPLES_GPT_DDP_LIB_H_
#define TANDEM_TRAIN_EXAMPLES_GPT_DDP_LIB_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/nn/models/gpt.h"
#include "train/checkpoint/run_checkpointer.h"
#include "train/data/token_blocks.h"

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

struct GptDdpResult {
  double final_loss = 0;  // the last step's loss, mean over ranks
  double val_loss = 0;    // after the last step
  std::string sample;     // the generated bytes, unescaped
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

// The corpus as blocks of config.block_size: the bytes of `path`, each a
// token that must be below config.model.vocab_size (the first that is not
// is an error naming its offset and value, and the --vocab to use); a
// corpus shorter than one block is an error naming both lengths.
absl::StatusOr<TokenBlocks> LoadGptCorpus(const std::string& path,
                                          const GptDdpConfig& config);

absl::StatusOr<GptDdpResult> RunGptDdp(comm::Communicator& comm,
                                       const GptDdpConfig& config,
                                       const TokenBlocks& data,
                                       Device device = Device::CPU());

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_GPT_DDP_LIB_H_
