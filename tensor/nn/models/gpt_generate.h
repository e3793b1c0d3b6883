// tandem::nn::GenerateTokens — text generation from a GPT's logits, as
// nanoGPT's GPT.generate: the sequence, cropped to the last block_size ids,
// goes through the forward; the last position's logits, divided by the
// temperature and kept to the top_k largest, are sampled; the id is
// appended; max_new_tokens times.
//
//   model->Eval();
//   TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> ids,
//       model->Generate({'\n'}, {.max_new_tokens = 200, .top_k = 40}, gen));
//
// The draw (tandem's own; PyTorch's torch.multinomial is not reproduced):
// the vocabulary sorted by logit, largest first, ties by lower id (a stable
// sort); weights exp((logit - largest) / temperature) in double over the
// first top_k; one uniform in [0, 1) from `gen` per token, scaled by the
// weights' sum, picks the first id whose cumulative weight exceeds it (the
// last kept id if rounding leaves the draw past them all). Same generator
// state, same logits: same ids.
//
// Contract: runs without recording autograd (its own NoGradGuard); train or
// eval mode is the caller's (nanoGPT's generate does not switch either:
// call Eval() first for dropout-free sampling). `forward` must be
// deterministic in the sense the caller needs; under FSDP it is the
// strategy's forward and is collective, so every rank must call this with
// the same prompt, options and generator state. Blocking; not thread-safe
// with other users of `gen`.
#ifndef TANDEM_TENSOR_NN_MODELS_GPT_GENERATE_H_
#define TANDEM_TENSOR_NN_MODELS_GPT_GENERATE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "tensor/device.h"
#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace tandem::nn {

struct GenerateOptions {
  int64_t max_new_tokens = 0;  // >= 0
  double temperature = 1.0;    // > 0 and finite; 1.0 leaves logits as they are
  int64_t top_k = 0;           // >= 0; 0 or above the vocabulary: every id
};

// What generation needs of a model: ids [1, T] (i64, on `device`) ->
// logits [1, T, vocab_size] of any float dtype, on any device.
struct LogitsSource {
  std::function<absl::StatusOr<Tensor>(const Tensor& idx)> forward;
  int64_t block_size = 0;  // the most positions `forward` takes
  int64_t vocab_size = 0;
  Device device = Device::CPU();  // where `forward` wants its input
};

// The prompt followed by max_new_tokens sampled ids (see the top of this
// file). InvalidArgument for an empty prompt, an id outside [0,
// vocab_size), options out of range or logits of another shape; the
// forward's own errors as they are.
absl::StatusOr<std::vector<int64_t>> GenerateTokens(
    const LogitsSource& model, std::vector<int64_t> prompt,
    const GenerateOptions& options, Generator& gen);

}  // namespace tandem::nn

#endif  // TANDEM_TENSOR_NN_MODELS_GPT_GENERATE_H_
