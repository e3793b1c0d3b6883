// A test fixture for bench/peers/hf_gpt2_export_check.py: builds a GPT of
// the flags' configuration from --seed, optionally loads --init_from (a
// Hugging Face folder), optionally writes --export_hf, and saves the logits
// of a fixed input (eval mode) to --logits_out as a safetensors file:
//   "idx"    i64 [2, block_size], idx[b][t] = (7 b + 13 t + 3) mod vocab
//   "logits" f32 [2, block_size, vocab]
// so that PyTorch's GPT2LMHeadModel can be compared on the same input.
// Exit codes: 0 success, 1 runtime error, 2 usage error.
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "base/command_line.h"
#include "base/status_macros.h"
#include "tensor/generator.h"
#include "tensor/nn/models/gpt.h"
#include "tensor/tensor.h"
#include "train/checkpoint/safetensors.h"
#include "train/hf/gpt2_pretrained.h"

ABSL_FLAG(int64_t, vocab, 64, "Vocabulary size.");
ABSL_FLAG(int64_t, block_size, 16, "Positions (n_positions).");
ABSL_FLAG(int64_t, n_layer, 2, "Blocks.");
ABSL_FLAG(int64_t, n_head, 2, "Attention heads.");
ABSL_FLAG(int64_t, n_embd, 16, "Width.");
ABSL_FLAG(int64_t, seed, 0, "Seed of the initial weights.");
ABSL_FLAG(std::string, init_from, "", "A Hugging Face folder to load.");
ABSL_FLAG(std::string, export_hf, "", "A folder to export to.");
ABSL_FLAG(std::string, logits_out, "", "Where the logits go (required).");

namespace tandem::train::hf {
namespace {

absl::Status Run() {
  nn::GptConfig config;
  config.vocab_size = absl::GetFlag(FLAGS_vocab);
  config.block_size = absl::GetFlag(FLAGS_block_size);
  config.n_layer = absl::GetFlag(FLAGS_n_layer);
  config.n_head = absl::GetFlag(FLAGS_n_head);
  config.n_embd = absl::GetFlag(FLAGS_n_embd);
  Generator gen(static_cast<uint64_t>(absl::GetFlag(FLAGS_seed)));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Gpt> model,
                          nn::Gpt::Create(config, gen));
  if (!absl::GetFlag(FLAGS_init_from).empty()) {
    TANDEM_RETURN_IF_ERROR(
        LoadGpt2Pretrained(absl::GetFlag(FLAGS_init_from), *model));
  }
  if (!absl::GetFlag(FLAGS_export_hf).empty()) {
    TANDEM_RETURN_IF_ERROR(
        SaveGpt2Pretrained(absl::GetFlag(FLAGS_export_hf), *model));
  }
  const int64_t t = config.block_size;
  std::vector<int64_t> ids(static_cast<size_t>(2 * t));
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < t; ++i) {
      ids[static_cast<size_t>(b * t + i)] =
          (7 * b + 13 * i + 3) % config.vocab_size;
    }
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor idx, Tensor::FromVector(ids, {2, t}));
  model->Eval();
  TANDEM_ASSIGN_OR_RETURN(Tensor logits, model->Forward(idx));
  return checkpoint::SaveSafetensors(absl::GetFlag(FLAGS_logits_out),
                                     {{"idx", idx}, {"logits", logits}});
}

}  // namespace
}  // namespace tandem::train::hf

int main(int argc, char** argv) {
  const tandem::CommandLine command_line = {
      .program = "gpt2_logits_fixture",
      .summary =
          "Logits of a tandem GPT on a fixed input, for the Hugging "
          "Face peer check.",
      .flag_folders = {"train/hf/"}};
  if (std::optional<int> exit_code =
          tandem::HandleCommandLine(command_line, argc, argv)) {
    return *exit_code;
  }
  if (absl::GetFlag(FLAGS_logits_out).empty()) {
    std::cerr << "gpt2_logits_fixture: --logits_out is required\n";
    return tandem::kExitUsageError;
  }
  absl::Status s = tandem::train::hf::Run();
  if (!s.ok()) {
    std::cerr << "gpt2_logits_fixture: " << s << "\n";
    return tandem::kExitRuntimeError;
  }
  return tandem::kExitOk;
}
