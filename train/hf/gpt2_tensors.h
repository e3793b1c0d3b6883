// tandem's GPT tensors <-> Hugging Face's GPT2LMHeadModel tensors, by name
// and layout, with every check a load needs. Files are read and written by
// train/checkpoint/safetensors.h; train/hf/gpt2_pretrained.h puts the two
// together with config.json.
//
// tandem's GPT (tensor/nn/models/gpt.h) names its parameters as
// transformers' GPT2LMHeadModel.state_dict() does:
//   transformer.wte.weight [V, C]       transformer.wpe.weight [P, C]
//   transformer.h.{i}.ln_1.{weight,bias} [C]
//   transformer.h.{i}.attn.c_attn.{weight,bias}  weight [3C, C]
//   transformer.h.{i}.attn.c_proj.{weight,bias}  weight [C, C]
//   transformer.h.{i}.ln_2.{weight,bias} [C]
//   transformer.h.{i}.mlp.c_fc.{weight,bias}     weight [4C, C]
//   transformer.h.{i}.mlp.c_proj.{weight,bias}   weight [C, 4C]
//   transformer.ln_f.{weight,bias} [C]
// The differences at the boundary:
//   - GPT-2's projections are Conv1D modules whose weight is [in, out]
//     (y = x @ W + b); tandem's Linear is [out, in] (PyTorch's nn.Linear).
//     The four projection weights are transposed both ways.
//   - lm_head.weight is tied to transformer.wte.weight: tandem lists it once;
//     save_pretrained (4.36.2) drops it from model.safetensors, so export
//     omits it; an imported file may hold it only as a copy of wte.
//   - attn.bias (the causal mask, bool [1, 1, P, P]) and attn.masked_bias
//     are non-persistent buffers in transformers 4.36.2 (save_pretrained
//     omits them), but older files (the hub's gpt2 among them) hold them;
//     from_pretrained ignores them as buffers, and so does import.
//   - Hub files saved from GPT2Model lack the "transformer." prefix
//   ("wte.weight",
//     "h.0.attn.c_attn.weight"); import accepts either form.
//
// Pure functions of their arguments; thread-safe.
#ifndef TANDEM_TRAIN_HF_GPT2_TENSORS_H_
#define TANDEM_TRAIN_HF_GPT2_TENSORS_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "tensor/nn/module.h"

namespace tandem::train::hf {

// Whether `name` (tandem's and HF's "transformer."-prefixed form) is one of
// GPT-2's Conv1D projection weights, stored [in, out] by HF.
bool IsConv1dWeight(std::string_view name);

// The tensors save_pretrained writes for a tandem GPT whose state dict is
// `state`: the same names and order, the Conv1D weights transposed to
// [in, out], every tensor f32 on the host in fresh storage. InvalidArgument
// for a name that is not one of GPT-2's (listed above), naming it: such a
// file would not load into GPT2LMHeadModel strictly.
absl::StatusOr<nn::StateDict> ToHfGpt2(const nn::StateDict& state);

// The tandem state dict for `model_state` (the names, shapes and dtypes of
// the model to load into, e.g. model.StateDict()) from the tensors of a
// GPT-2 file (`file_tensors`, as LoadSafetensors read them from `file`):
// names mapped as above, Conv1D weights transposed to [out, in], floating
// tensors converted to the model's dtype. All problems are collected into
// one InvalidArgument that names `file` and, for each, the key: a key the
// model needs that the file lacks (missing), a key the model does not have
// (unexpected), a shape different from the model's (both shapes, in the
// file's layout), a tensor that is not floating point, a key given twice
// (with and without "transformer."), an lm_head.weight that is not a copy of
// wte (an untied head, which tandem's GPT cannot hold).
absl::StatusOr<nn::StateDict> FromHfGpt2(const nn::StateDict& file_tensors,
                                         const nn::StateDict& model_state,
                                         std::string_view file);

}  // namespace tandem::train::hf

#endif  // TANDEM_TRAIN_HF_GPT2_TENSORS_H_
