// Evaluation helpers of the training loop's examples: a model's output
// through its Strategy without grad, and how many predictions are right.
#ifndef TANDEM_TRAIN_LOOP_EVALUATE_H_
#define TANDEM_TRAIN_LOOP_EVALUATE_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"
#include "train/parallel/strategy.h"

namespace tandem::train {

// The model's output for `features` (copied to `device` unless there
// already) through `strategy` without grad (FSDP gathers and frees each
// unit), under autocast in `autocast` when set. Put the model in eval mode
// first. Collective under fsdp.
absl::StatusOr<Tensor> EvalForward(Strategy& strategy, const Tensor& features,
                                   Device device,
                                   std::optional<DType> autocast = {});

// How many rows of `logits` (any device) have their largest value at
// `labels`' class (int64, any device); compared on the host.
absl::StatusOr<int64_t> CountCorrect(const Tensor& logits,
                                     const Tensor& labels);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LOOP_EVALUATE_H_
