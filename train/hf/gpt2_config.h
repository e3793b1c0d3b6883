// A GptConfig as Hugging Face's GPT-2 config.json, written and read.
//
// What transformers 4.36.2's GPT2Config.save_pretrained writes (every field
// of GPT2Config.to_dict(), keys sorted), plus "n_ctx" (= n_positions, as the
// hub's gpt2 config.json has it; GPT2Config keeps unknown keys as
// attributes). The model's shape comes from the GptConfig:
//   vocab_size, n_positions (= block_size), n_embd, n_layer, n_head,
//   layer_norm_epsilon; embd_pdrop = attn_pdrop = resid_pdrop = dropout;
// what tandem's GPT computes is fixed: activation_function "gelu_new"
// (GELU, tanh form), n_inner null (4 n_embd), scale_attn_weights true,
// scale_attn_by_inverse_layer_idx false, reorder_and_upcast_attn false,
// tied embeddings; the rest are GPT2Config's defaults (bos/eos 50256,
// initializer_range 0.02, the summary_* fields of the unused heads).
//
// Pure functions; thread-safe.
#ifndef TANDEM_TRAIN_HF_GPT2_CONFIG_H_
#define TANDEM_TRAIN_HF_GPT2_CONFIG_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/nn/models/gpt.h"

namespace tandem::train::hf {

// The config.json text for `config` (JSON, 2-space indent, sorted keys,
// ending in a newline).
std::string Gpt2ConfigJson(const nn::GptConfig& config);

// The GptConfig a config.json describes. InvalidArgument naming `source` and
// the field for: text that is not a JSON object, a model_type other than
// "gpt2", a missing or mistyped size field (vocab_size, n_positions, n_embd,
// n_layer, n_head: integers), and every setting tandem's GPT does not
// compute (activation_function other than "gelu_new" or
// "gelu_pytorch_tanh", n_inner other than null or 4 n_embd,
// scale_attn_weights false, scale_attn_by_inverse_layer_idx true,
// add_cross_attention true, tie_word_embeddings false). Absent optional
// fields take GPT2Config's defaults (layer_norm_epsilon 1e-5, dropouts
// 0.1); dropout is resid_pdrop.
absl::StatusOr<nn::GptConfig> ParseGpt2ConfigJson(std::string_view text,
                                                  std::string_view source);

// Whether the model `found` (read from `source`) is the one `want` asks
// for: vocab_size, block_size (n_positions), n_layer, n_head, n_embd and
// layer_norm_epsilon equal. Dropout is a training setting, not compared.
// InvalidArgument naming `source` and every field that differs, with both
// values.
absl::Status CheckGpt2Config(const nn::GptConfig& found,
                             const nn::GptConfig& want,
                             std::string_view source);

}  // namespace tandem::train::hf

#endif  // TANDEM_TRAIN_HF_GPT2_CONFIG_H_
