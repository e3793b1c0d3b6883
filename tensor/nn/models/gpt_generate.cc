#include "tensor/nn/models/gpt_generate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "tensor/autograd/autograd.h"
#include "tensor/tensor.h"

namespace tandem::nn {
namespace {

absl::Status CheckArguments(const LogitsSource& model,
                            const std::vector<int64_t>& prompt,
                            const GenerateOptions& options) {
  if (!model.forward || model.block_size < 1 || model.vocab_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Generate: the model needs a forward, block_size >= 1 and "
                     "vocab_size >= 1; got block_size ",
                     model.block_size, ", vocab_size ", model.vocab_size));
  }
  if (prompt.empty()) {
    return absl::InvalidArgumentError(
        "Generate: the prompt is empty; give at least one id to start from "
        "(nanoGPT starts from a newline or its <|endoftext|> id)");
  }
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= model.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Generate: prompt id ", prompt[i], " at position ", i,
          " is outside the vocabulary [0, ", model.vocab_size, ")"));
    }
  }
  if (options.max_new_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Generate: max_new_tokens is ", options.max_new_tokens,
                     "; expected >= 0"));
  }
  if (!(options.temperature > 0) || !std::isfinite(options.temperature)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Generate: temperature is ", options.temperature,
                     "; expected a finite number > 0 (1.0 samples the "
                     "model's own distribution)"));
  }
  if (options.top_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Generate: top_k is ", options.top_k,
                     "; expected >= 0 (0 keeps every id)"));
  }
  return absl::OkStatus();
}

// The last position's logits as floats, checked to be [1, T, V].
absl::StatusOr<std::vector<float>> LastLogits(const Tensor& logits, int64_t t,
                                              int64_t v) {
  if (logits.shape() != Shape{1, t, v}) {
    return absl::InvalidArgumentError(
        absl::StrCat("Generate: the forward returned logits of shape [",
                     absl::StrJoin(logits.shape(), ", "), "] for ids [1, ", t,
                     "]; expected [1, ", t, ", ", v, "]"));
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor cpu, logits.To(Device::CPU()));
  TANDEM_ASSIGN_OR_RETURN(Tensor last, cpu.View((t - 1) * v, {v}));
  TANDEM_ASSIGN_OR_RETURN(Tensor f32, last.To(DType::kF32));
  return f32.ToVector<float>();
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> GenerateTokens(
    const LogitsSource& model, std::vector<int64_t> prompt,
    const GenerateOptions& options, Generator& gen) {
  TANDEM_RETURN_IF_ERROR(CheckArguments(model, prompt, options));
  NoGradGuard no_grad;
  const int64_t v = model.vocab_size;
  const int64_t k =
      options.top_k == 0 ? v : std::min<int64_t>(options.top_k, v);
  std::vector<int64_t> ids(static_cast<size_t>(v));
  std::vector<double> weight(static_cast<size_t>(k));
  std::vector<int64_t> seq = std::move(prompt);
  for (int64_t n = 0; n < options.max_new_tokens; ++n) {
    const int64_t t =
        std::min<int64_t>(static_cast<int64_t>(seq.size()), model.block_size);
    std::vector<int64_t> window(seq.end() - t, seq.end());
    TANDEM_ASSIGN_OR_RETURN(Tensor x, Tensor::FromVector(window, {1, t}));
    TANDEM_ASSIGN_OR_RETURN(x, x.To(model.device));
    TANDEM_ASSIGN_OR_RETURN(Tensor logits, model.forward(x));
    TANDEM_ASSIGN_OR_RETURN(std::vector<float> row, LastLogits(logits, t, v));
    for (int64_t j = 0; j < v; ++j) ids[j] = j;
    std::stable_sort(ids.begin(), ids.end(),
                     [&](int64_t a, int64_t b) { return row[a] > row[b]; });
    double total = 0;
    for (int64_t j = 0; j < k; ++j) {
      weight[j] = std::exp(static_cast<double>(row[ids[j]] - row[ids[0]]) /
                           options.temperature);
      total += weight[j];
    }
    double u = 0;
    gen.Uniform(&u, 1, 0.0, 1.0);
    u *= total;
    int64_t pick = k - 1;
    for (int64_t j = 0; j < k; ++j) {
      if (u < weight[j]) {
        pick = j;
        break;
      }
      u -= weight[j];
    }
    seq.push_back(ids[pick]);
  }
  return seq;
}

}  // namespace tandem::nn
