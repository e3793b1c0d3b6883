// Evaluation helpers of the training loop's examples: a model's output
// through its Strategy without grad, how many predictions are right, and
// the two ways the examples score a data set (a tutorial's f32 accuracy
// over a loader; a held-out set split across the ranks).
#ifndef TANDEM_TRAIN_LOOP_EVALUATE_H_
#define TANDEM_TRAIN_LOOP_EVALUATE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "tensor/tensor.h"
#include "train/data/data_loader.h"
#include "train/data/dataset.h"
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

// Right predictions out of the rows scored.
struct Score {
  int64_t correct = 0;
  int64_t total = 0;
  double accuracy() const {
    return static_cast<double>(correct) / static_cast<double>(total);
  }
};

// The DDP tutorials' compute_accuracy: correct predictions over `loader`'s
// batches through EvalForward, accumulated in f32 and divided by the count
// in f32 (PyTorch's float32 tensor arithmetic, which .item() widens).
// FailedPrecondition(`empty_error`) when the loader has no rows (the
// tutorial divides by zero). Local (collective under fsdp).
absl::StatusOr<float> LoaderAccuracy(Strategy& strategy,
                                     const DataLoader& loader, Device device,
                                     std::string_view empty_error);

// Collective: every rank scores a disjoint strided slice of `data` (rows
// rank, rank + world size, ...; no padding) in one batch through
// EvalForward (nothing when its slice is empty), and the counts are summed
// over every rank.
absl::StatusOr<Score> StridedScore(comm::Communicator& comm, Strategy& strategy,
                                   const TensorDataset& data, Device device,
                                   std::optional<DType> autocast = {});

// Collective: `values` replaced by their sums over every rank (one
// all-reduce of doubles, staged through `device` when it is not the CPU).
absl::Status SumOverRanks(comm::Communicator& comm, Device device,
                          std::vector<double>& values);

// Collective: the mean of `loss_of(item)` over `count` held-out items (>= 1)
// split across the ranks: rank r scores items r, r + world size, ... in
// that order. Every rank calls loss_of the same number of times, ceil(count
// / world size), so forwards that are collective (FSDP's) stay matched: a
// rank out of items scores item 0 again without counting it. Each rank
// sums its losses in double, then the sums and counts are summed over the
// ranks (SumOverRanks). Runs without autograd (its own NoGradGuard); the
// model's eval mode and autocast are the caller's, inside loss_of. loss_of's
// first error comes back as it is (the ranks then disagree: the caller's
// run ends).
// fixed_order (the virtual world): the item losses are gathered instead
// and summed in item order by the canonical tree (virtual_world.h), so the
// mean does not depend on the world size.
absl::StatusOr<double> HeldOutMeanLoss(
    comm::Communicator& comm, Device device, int64_t count,
    const std::function<absl::StatusOr<double>(int64_t item)>& loss_of,
    bool fixed_order = false);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LOOP_EVALUATE_H_
