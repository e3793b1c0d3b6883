// Hugging Face's pretrained-model folder for tandem's GPT: what
// transformers.GPT2LMHeadModel.save_pretrained(DIR) writes and
// from_pretrained(DIR) reads (docs/huggingface.md).
//
//   TANDEM_RETURN_IF_ERROR(SaveGpt2Pretrained("/out/hf", *model));
//   // python: GPT2LMHeadModel.from_pretrained("/out/hf")
//   TANDEM_RETURN_IF_ERROR(LoadGpt2Pretrained("/out/hf", *model));
//
// DIR/model.safetensors  the parameters under GPT2LMHeadModel's state-dict
//                        names (train/hf/gpt2_tensors.h: Conv1D weights
//                        [in, out], no lm_head.weight), f32, metadata
//                        {"format": "pt"} (from_pretrained refuses a
//                        safetensors file without it)
// DIR/config.json        GPT2Config (train/hf/gpt2_config.h)
//
// Blocking (disk I/O). Not thread-safe with other users of the model.
#ifndef TANDEM_TRAIN_HF_GPT2_PRETRAINED_H_
#define TANDEM_TRAIN_HF_GPT2_PRETRAINED_H_

#include <string>

#include "absl/status/status.h"
#include "tensor/nn/models/gpt.h"
#include "tensor/nn/module.h"

namespace tandem::train::hf {

// The file names inside a pretrained-model folder.
inline constexpr char kWeightsFile[] = "model.safetensors";
inline constexpr char kConfigFile[] = "config.json";

// Writes `dir` (created if absent; its parent must exist) for a GPT of `config`
// whose state dict is `state` (a module's StateDict(), or full parameters
// gathered from shards). Each file is replaced atomically
// (train/checkpoint/atomic_file.h). InvalidArgument for a state dict that
// is not GPT-2's; I/O errors name the path.
absl::Status SaveGpt2Pretrained(const std::string& dir,
                                const nn::StateDict& state,
                                const nn::GptConfig& config);
absl::Status SaveGpt2Pretrained(const std::string& dir, const nn::Gpt& model);

// Loads `dir` into `model` (a GPT of `config`) in place, all or nothing:
// config.json must describe `config` (train/hf/gpt2_config.h: every
// differing field named, with both values), and model.safetensors must
// hold exactly the model's tensors (train/hf/gpt2_tensors.h: missing,
// unexpected and wrong-shaped keys named with both shapes and the file).
// NotFound naming the path when a file is absent (a folder of sharded
// weights, model.safetensors.index.json, or of pytorch_model.bin only, is
// not read: the message says so).
absl::Status LoadGpt2Pretrained(const std::string& dir,
                                const nn::GptConfig& config, nn::Module& model);
absl::Status LoadGpt2Pretrained(const std::string& dir, nn::Gpt& model);

}  // namespace tandem::train::hf

#endif  // TANDEM_TRAIN_HF_GPT2_PRETRAINED_H_
