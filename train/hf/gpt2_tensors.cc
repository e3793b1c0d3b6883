#include "train/hf/gpt2_tensors.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "tensor/tensor.h"

namespace tandem::train::hf {
namespace {

constexpr std::string_view kPrefix = "transformer.";
constexpr std::string_view kLmHead = "lm_head.weight";

constexpr std::string_view kTopLevel[] = {
    "transformer.wte.weight", "transformer.wpe.weight",
    "transformer.ln_f.weight", "transformer.ln_f.bias"};

constexpr std::string_view kBlockParams[] = {
    "ln_1.weight",      "ln_1.bias",          "attn.c_attn.weight",
    "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
    "ln_2.weight",      "ln_2.bias",          "mlp.c_fc.weight",
    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};

// HF's non-persistent attention buffers, present in older files.
constexpr std::string_view kBlockBuffers[] = {"attn.bias", "attn.masked_bias"};

// For "transformer.h.<i>.<rest>": <rest>; otherwise empty.
std::string_view BlockSuffix(std::string_view name) {
  constexpr std::string_view kH = "transformer.h.";
  if (!name.starts_with(kH)) return {};
  name.remove_prefix(kH.size());
  size_t digits = 0;
  while (digits < name.size() && absl::ascii_isdigit(name[digits])) ++digits;
  if (digits == 0 || digits >= name.size() || name[digits] != '.') return {};
  if (digits > 1 && name[0] == '0') return {};  // "h.01" is not a block
  return name.substr(digits + 1);
}

bool IsGpt2Parameter(std::string_view name) {
  for (std::string_view top : kTopLevel) {
    if (name == top) return true;
  }
  const std::string_view suffix = BlockSuffix(name);
  for (std::string_view p : kBlockParams) {
    if (suffix == p) return true;
  }
  return false;
}

bool IsHfBuffer(std::string_view name) {
  const std::string_view suffix = BlockSuffix(name);
  for (std::string_view b : kBlockBuffers) {
    if (suffix == b) return true;
  }
  return false;
}

Shape Transposed(const Shape& shape) { return Shape{shape[1], shape[0]}; }

// A host copy of the 2-D tensor `t` with its two dimensions swapped.
absl::StatusOr<Tensor> Transpose2d(const Tensor& t) {
  TANDEM_ASSIGN_OR_RETURN(Tensor host, t.To(Device::CPU()));
  const int64_t rows = host.dim(0);
  const int64_t cols = host.dim(1);
  const int64_t size = DTypeSize(host.dtype());
  std::vector<char> out(static_cast<size_t>(host.nbytes()));
  const char* src = static_cast<const char*>(host.raw_data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      std::memcpy(&out[static_cast<size_t>((c * rows + r) * size)],
                  src + (r * cols + c) * size, static_cast<size_t>(size));
    }
  }
  return Tensor::FromBuffer(out.data(), host.numel(), host.dtype(),
                            Shape{cols, rows});
}

}  // namespace

bool IsConv1dWeight(std::string_view name) {
  const std::string_view suffix = BlockSuffix(name);
  return suffix == "attn.c_attn.weight" || suffix == "attn.c_proj.weight" ||
         suffix == "mlp.c_fc.weight" || suffix == "mlp.c_proj.weight";
}

absl::StatusOr<nn::StateDict> ToHfGpt2(const nn::StateDict& state) {
  nn::StateDict out;
  out.reserve(state.size());
  for (const nn::NamedTensor& entry : state) {
    if (!IsGpt2Parameter(entry.name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Hugging Face GPT-2 export: \"", entry.name,
          "\" is not a parameter of GPT2LMHeadModel (expected "
          "transformer.wte/wpe/ln_f and transformer.h.<i>.{ln_1, attn.c_attn, "
          "attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}.{weight,bias}); only a "
          "GPT-2-shaped model can be exported"));
    }
    if (!entry.tensor.defined()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Hugging Face GPT-2 export: \"", entry.name, "\" is undefined"));
    }
    TANDEM_ASSIGN_OR_RETURN(Tensor host, entry.tensor.To(Device::CPU()));
    TANDEM_ASSIGN_OR_RETURN(Tensor f32, host.To(DType::kF32));
    if (IsConv1dWeight(entry.name)) {
      if (f32.ndim() != 2) {
        return absl::InvalidArgumentError(
            absl::StrCat("Hugging Face GPT-2 export: \"", entry.name,
                         "\" should be a 2-D [out, in] matrix, is ",
                         ShapeToString(f32.shape())));
      }
      TANDEM_ASSIGN_OR_RETURN(f32, Transpose2d(f32));
    }
    out.push_back({entry.name, std::move(f32)});
  }
  return out;
}

absl::StatusOr<nn::StateDict> FromHfGpt2(const nn::StateDict& file_tensors,
                                         const nn::StateDict& model_state,
                                         std::string_view file) {
  std::vector<std::string> problems;
  // Canonical (tandem) name -> the file's entry.
  std::map<std::string, const nn::NamedTensor*> given;
  const nn::NamedTensor* lm_head = nullptr;
  for (const nn::NamedTensor& entry : file_tensors) {
    if (entry.name == kLmHead) {
      lm_head = &entry;
      continue;
    }
    std::string canonical = std::string_view(entry.name).starts_with(kPrefix)
                                ? entry.name
                                : std::string(kPrefix) + entry.name;
    if (IsHfBuffer(canonical)) continue;
    auto [it, inserted] = given.emplace(canonical, &entry);
    if (!inserted) {
      problems.push_back(absl::StrCat("\"", it->second->name, "\" and \"",
                                      entry.name,
                                      "\" are the same tensor, given twice"));
    }
  }
  std::map<std::string, bool> known;
  nn::StateDict out;
  out.reserve(model_state.size());
  for (const nn::NamedTensor& want : model_state) {
    known[want.name] = true;
    auto it = given.find(want.name);
    if (it == given.end()) {
      problems.push_back(absl::StrCat("missing key \"", want.name,
                                      "\" (the model's ",
                                      ShapeToString(want.tensor.shape()), ")"));
      continue;
    }
    const Tensor& src = it->second->tensor;
    const bool conv1d = IsConv1dWeight(want.name) && want.tensor.ndim() == 2;
    const Shape file_shape =
        conv1d ? Transposed(want.tensor.shape()) : want.tensor.shape();
    if (src.shape() != file_shape) {
      problems.push_back(
          absl::StrCat("key \"", it->second->name, "\" has shape ",
                       ShapeToString(src.shape()), ", the model expects ",
                       ShapeToString(file_shape),
                       conv1d ? " (GPT-2's Conv1D layout [in, out])" : ""));
      continue;
    }
    if (!IsFloatingPoint(src.dtype())) {
      problems.push_back(absl::StrCat("key \"", it->second->name, "\" is ",
                                      DTypeName(src.dtype()),
                                      ", expected a floating-point tensor"));
      continue;
    }
    absl::StatusOr<Tensor> converted = src.To(want.tensor.dtype());
    if (converted.ok() && conv1d) converted = Transpose2d(*converted);
    if (!converted.ok()) {
      problems.push_back(absl::StrCat("key \"", it->second->name,
                                      "\": ", converted.status().message()));
      continue;
    }
    out.push_back({want.name, *std::move(converted)});
  }
  for (const auto& [canonical, entry] : given) {
    if (!known.contains(canonical)) {
      problems.push_back(absl::StrCat("unexpected key \"", entry->name, "\" (",
                                      ShapeToString(entry->tensor.shape()),
                                      "): the model has no such tensor"));
    }
  }
  if (lm_head != nullptr) {
    // Tied: only a copy of wte is accepted (from_pretrained would overwrite
    // it with wte silently; a different head would be lost).
    auto wte = given.find("transformer.wte.weight");
    bool tied = false;
    if (wte != given.end() &&
        lm_head->tensor.shape() == wte->second->tensor.shape() &&
        lm_head->tensor.dtype() == wte->second->tensor.dtype()) {
      absl::StatusOr<Tensor> a = lm_head->tensor.To(Device::CPU());
      absl::StatusOr<Tensor> b = wte->second->tensor.To(Device::CPU());
      tied = a.ok() && b.ok() &&
             std::memcmp(a->raw_data(), b->raw_data(),
                         static_cast<size_t>(a->nbytes())) == 0;
    }
    if (!tied) {
      problems.push_back(absl::StrCat(
          "\"lm_head.weight\" (", ShapeToString(lm_head->tensor.shape()),
          ") differs from the token embedding \"",
          wte != given.end() ? wte->second->name : "transformer.wte.weight",
          "\": an untied output head, which tandem's GPT (lm_head tied to "
          "wte) cannot hold"));
    }
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Hugging Face GPT-2 file ", std::string(file),
        " does not fit the model: ", absl::StrJoin(problems, "; "),
        ". Nothing was loaded; the file must come from a GPT-2 of the same "
        "configuration (config.json's n_layer, n_embd, vocab_size, "
        "n_positions)"));
  }
  return out;
}

}  // namespace tandem::train::hf
