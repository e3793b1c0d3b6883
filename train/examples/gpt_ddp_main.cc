// //train/examples:gpt_ddp (alias //train:gpt_ddp) — a GPT-2 trained
// data-parallel or sharded on a byte-level English corpus, nanoGPT's way.
//
//   ./bazelw run //train:gpt_ddp                             # 2 sim ranks
//   ./bazelw run //train:gpt_ddp -- --parallel=fsdp --sample_tokens=200
//   ./bazelw run //train:gpt_ddp -- --preset=gpt2 --block_size=128
//       --max_steps=2 --batch_size=1                         # 124M
//
// What it prints is described in train/examples/gpt_ddp_lib.h. The default
// corpus, train/data/public_domain_english.txt, is public-domain text
// (train/data/README.md says which and why). The common flags and exit
// codes come from train/examples/example_main.h.
#include <cstdint>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tensor/nn/models/gpt.h"
#include "train/examples/example_main.h"
#include "train/examples/gpt_ddp_lib.h"

ABSL_FLAG(std::string, preset, "",
          "Model preset: gpt2 (124M: 12 layers, 12 heads, 768 wide, 1024 "
          "positions, vocabulary 50257), or empty for the flags below.");
ABSL_FLAG(int64_t, n_layer, 0, "Transformer blocks (0: 4, or the preset's).");
ABSL_FLAG(int64_t, n_head, 0, "Attention heads (0: 4, or the preset's).");
ABSL_FLAG(int64_t, n_embd, 0, "Width (0: 64, or the preset's).");
ABSL_FLAG(int64_t, vocab, 0,
          "Vocabulary size (0: 256, byte-level, or the preset's).");
ABSL_FLAG(int64_t, block_size, 0,
          "Tokens per training block (0: 64, or the preset's positions); "
          "without a preset also the model's positions.");
ABSL_FLAG(double, dropout, 0.0,
          "Dropout probability (embedding, attention, "
          "residual).");
ABSL_FLAG(std::string, data, "train/data/public_domain_english.txt",
          "Text file: its bytes are the tokens.");
ABSL_FLAG(int64_t, batch_size, 4, "Blocks per rank per micro-batch.");
ABSL_FLAG(int64_t, grad_accum, 1,
          "Micro-batches per step (gradient accumulation, DDP's no_sync).");
ABSL_FLAG(int64_t, max_steps, 40, "Optimizer steps.");
ABSL_FLAG(double, lr, 3e-3, "Peak learning rate.");
ABSL_FLAG(double, min_lr, 1e-4, "Learning rate at the end of the cosine.");
ABSL_FLAG(int64_t, warmup_steps, 5, "Linear warm-up steps.");
ABSL_FLAG(std::string, lr_decay, "cosine", "cosine or constant.");
ABSL_FLAG(double, weight_decay, 0.1,
          "AdamW weight decay of matrices and embeddings (nanoGPT's groups).");
ABSL_FLAG(double, beta1, 0.9, "AdamW beta1.");
ABSL_FLAG(double, beta2, 0.95, "AdamW beta2.");
ABSL_FLAG(double, grad_clip, 1.0, "Gradient norm clip (0: off).");
ABSL_FLAG(uint64_t, seed, 1337,
          "Seed of the model, the data order, dropout "
          "and the sample.");
ABSL_FLAG(int64_t, log_every, 1, "Print the training loss every N steps.");
ABSL_FLAG(int64_t, eval_every, 0,
          "Print the validation loss every N steps (0: after the last).");
ABSL_FLAG(int64_t, eval_blocks, 32, "Validation blocks evaluated.");
ABSL_FLAG(int64_t, sample_tokens, 0,
          "Tokens of text to generate at the end (top-k sampling).");
ABSL_FLAG(int64_t, top_k, 40, "Top-k of the sampling.");
ABSL_FLAG(std::string, parallel, "ddp",
          "ddp, zero1 (optimizer state sharded), zero2 (and gradients) or "
          "fsdp (and parameters).");
ABSL_FLAG(std::string, amp, "off", "Autocast dtype: off (f32), bf16 or f16.");
ABSL_FLAG(std::string, init_from, "",
          "A Hugging Face GPT-2 folder (config.json, model.safetensors) to "
          "start from; it must describe the flags' model.");
ABSL_FLAG(std::string, export_hf, "",
          "Write the trained model here as a Hugging Face GPT-2 folder "
          "(GPT2LMHeadModel.from_pretrained reads it).");

namespace {

int64_t Or(int64_t flag, int64_t fallback) {
  return flag != 0 ? flag : fallback;
}

absl::StatusOr<tandem::train::GptDdpConfig> ConfigFromFlags() {
  using tandem::nn::GptConfig;
  tandem::train::GptDdpConfig c;
  const std::string preset = absl::GetFlag(FLAGS_preset);
  GptConfig base;
  if (preset == "gpt2") {
    base = GptConfig::Gpt2();
  } else if (preset.empty()) {
    base.vocab_size = 256;
    base.n_layer = 4;
    base.n_head = 4;
    base.n_embd = 64;
    base.block_size = 0;  // from --block_size
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--preset=", preset, "; expected gpt2 or nothing"));
  }
  for (const auto& [name, v] :
       {std::pair<const char*, int64_t>{"n_layer",
                                        absl::GetFlag(FLAGS_n_layer)},
        {"n_head", absl::GetFlag(FLAGS_n_head)},
        {"n_embd", absl::GetFlag(FLAGS_n_embd)},
        {"vocab", absl::GetFlag(FLAGS_vocab)},
        {"block_size", absl::GetFlag(FLAGS_block_size)}}) {
    if (v < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", name, "=", v, "; expected >= 1 (or 0: the default)"));
    }
  }
  c.model = base;
  c.model.n_layer = Or(absl::GetFlag(FLAGS_n_layer), base.n_layer);
  c.model.n_head = Or(absl::GetFlag(FLAGS_n_head), base.n_head);
  c.model.n_embd = Or(absl::GetFlag(FLAGS_n_embd), base.n_embd);
  c.model.vocab_size = Or(absl::GetFlag(FLAGS_vocab), base.vocab_size);
  c.model.dropout = absl::GetFlag(FLAGS_dropout);
  c.block_size = Or(absl::GetFlag(FLAGS_block_size),
                    base.block_size > 0 ? base.block_size : 64);
  if (base.block_size == 0) c.model.block_size = c.block_size;
  c.batch_size = absl::GetFlag(FLAGS_batch_size);
  c.grad_accum = absl::GetFlag(FLAGS_grad_accum);
  c.max_steps = absl::GetFlag(FLAGS_max_steps);
  c.lr = absl::GetFlag(FLAGS_lr);
  c.min_lr = absl::GetFlag(FLAGS_min_lr);
  c.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  c.lr_decay = absl::GetFlag(FLAGS_lr_decay);
  c.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  c.beta1 = absl::GetFlag(FLAGS_beta1);
  c.beta2 = absl::GetFlag(FLAGS_beta2);
  c.grad_clip = absl::GetFlag(FLAGS_grad_clip);
  c.seed = absl::GetFlag(FLAGS_seed);
  c.log_every = absl::GetFlag(FLAGS_log_every);
  c.eval_every = absl::GetFlag(FLAGS_eval_every);
  c.eval_blocks = absl::GetFlag(FLAGS_eval_blocks);
  c.sample_tokens = absl::GetFlag(FLAGS_sample_tokens);
  c.top_k = absl::GetFlag(FLAGS_top_k);
  c.parallel = absl::GetFlag(FLAGS_parallel);
  auto amp = tandem::train::ParseAmpFlag(absl::GetFlag(FLAGS_amp));
  if (!amp.ok()) return amp.status();
  c.amp = *amp;
  auto checkpoint = tandem::train::ExampleCheckpointOptions();
  if (!checkpoint.ok()) return checkpoint.status();
  c.checkpoint = *checkpoint;
  c.init_from = absl::GetFlag(FLAGS_init_from);
  c.export_hf = absl::GetFlag(FLAGS_export_hf);
  if (absl::Status s = tandem::train::CheckGptDdpConfig(c); !s.ok()) return s;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  using tandem::train::ExampleRank;
  return tandem::train::ExampleMain(
      argc, argv,
      {.name = "gpt_ddp",
       .summary = "A GPT-2 (Hugging Face's GPT2LMHeadModel) trained on a "
                  "byte-level text corpus with AdamW, warm-up and cosine "
                  "decay, under DDP, ZeRO-1/2 or FSDP, printing each step's "
                  "loss, the validation loss and, at the end, a sample.",
       .paths = {{.flag = "data"},
                 {.flag = "init_from"},
                 {.flag = "export_hf",
                  .role = tandem::base::PathRole::kOutput,
                  .folder = true}}},
      []() -> absl::StatusOr<ExampleRank> {
        auto config = ConfigFromFlags();
        if (!config.ok()) return config.status();
        // The corpus is read once per process; the ranks share its tokens.
        auto data =
            tandem::train::LoadGptCorpus(absl::GetFlag(FLAGS_data), *config);
        if (!data.ok()) return data.status();
        auto shared = std::make_shared<const tandem::train::TokenBlocks>(*data);
        return [config = *config, shared](tandem::comm::Communicator& comm,
                                          tandem::Device device) {
          return tandem::train::RunGptDdp(comm, config, *shared, device)
              .status();
        };
      });
}
