#include "train/loop/evaluate.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "comm/types.h"
#include "tensor/amp/autocast.h"
#include "tensor/autograd/autograd.h"
#include "tensor/ops.h"
#include "train/parallel/core/staged_all_gather.h"
#include "train/parallel/core/tensor_comm.h"
#include "train/parallel/core/virtual_world.h"

namespace tandem::train {

absl::StatusOr<Tensor> EvalForward(Strategy& strategy, const Tensor& features,
                                   Device device,
                                   std::optional<DType> autocast) {
  Tensor input = features;
  if (input.device() != device) {
    TANDEM_ASSIGN_OR_RETURN(input, features.To(device));
  }
  NoGradGuard no_grad;
  std::optional<amp::Autocast> region;
  if (autocast.has_value()) region.emplace(device.type(), *autocast);
  return strategy.Forward(input);
}

absl::StatusOr<int64_t> CountCorrect(const Tensor& logits,
                                     const Tensor& labels) {
  NoGradGuard no_grad;
  TANDEM_ASSIGN_OR_RETURN(Tensor predicted, Argmax(logits, -1));
  if (!predicted.device().is_cpu()) {
    TANDEM_ASSIGN_OR_RETURN(predicted, predicted.To(Device::CPU()));
  }
  Tensor truth = labels;
  if (!truth.device().is_cpu()) {
    TANDEM_ASSIGN_OR_RETURN(truth, labels.To(Device::CPU()));
  }
  const int64_t* p = predicted.data<int64_t>();
  const int64_t* y = truth.data<int64_t>();
  int64_t correct = 0;
  for (int64_t i = 0; i < truth.numel(); ++i) correct += p[i] == y[i];
  return correct;
}

absl::StatusOr<float> LoaderAccuracy(Strategy& strategy,
                                     const DataLoader& loader, Device device,
                                     std::string_view empty_error) {
  float correct = 0.f;
  int64_t total = 0;
  for (int64_t b = 0; b < loader.num_batches(); ++b) {
    TANDEM_ASSIGN_OR_RETURN(Batch batch, loader.GetBatch(b));
    TANDEM_ASSIGN_OR_RETURN(Tensor logits,
                            EvalForward(strategy, batch.features, device));
    TANDEM_ASSIGN_OR_RETURN(int64_t hits, CountCorrect(logits, batch.labels));
    correct += static_cast<float>(hits);
    total += batch.labels.dim(0);
  }
  if (total == 0) {
    return absl::FailedPreconditionError(std::string(empty_error));
  }
  return correct / static_cast<float>(total);
}

absl::StatusOr<Score> StridedScore(comm::Communicator& comm, Strategy& strategy,
                                   const TensorDataset& data, Device device,
                                   std::optional<DType> autocast) {
  // Rank r's slice, r, r + W, ...; in the virtual world each virtual rank
  // k's, k, k + K, ..., one batch each, so that the batches (and the bits
  // of their logits) do not depend on W.
  const VirtualWorld& vw = strategy.virtual_world();
  const int64_t stride = vw.on() ? vw.size : comm.size();
  std::vector<double> counts = {0, 0};
  for (int64_t v = 0; v < vw.local; ++v) {
    std::vector<int64_t> mine;
    for (int64_t i = vw.rank_of(v); i < data.size(); i += stride) {
      mine.push_back(i);
    }
    if (mine.empty()) continue;
    counts[1] += static_cast<double>(mine.size());
    TANDEM_ASSIGN_OR_RETURN(
        DataLoader loader,
        DataLoader::Create(data, mine, static_cast<int64_t>(mine.size()),
                           /*drop_last=*/false));
    TANDEM_ASSIGN_OR_RETURN(Batch batch, loader.GetBatch(0));
    TANDEM_ASSIGN_OR_RETURN(
        Tensor logits, EvalForward(strategy, batch.features, device, autocast));
    TANDEM_ASSIGN_OR_RETURN(const int64_t correct,
                            CountCorrect(logits, batch.labels));
    counts[0] += static_cast<double>(correct);
  }
  TANDEM_RETURN_IF_ERROR(
      AllReduceF64(comm, device, absl::MakeSpan(counts), comm::ReduceOp::kSum));
  return Score{.correct = static_cast<int64_t>(counts[0]),
               .total = static_cast<int64_t>(counts[1])};
}

absl::Status SumOverRanks(comm::Communicator& comm, Device device,
                          std::vector<double>& values) {
  TANDEM_ASSIGN_OR_RETURN(Tensor t, Tensor::FromVector(values));
  if (!device.is_cpu()) {
    TANDEM_ASSIGN_OR_RETURN(t, t.To(device));
  }
  TANDEM_ASSIGN_OR_RETURN(comm::BufferView view, ToBufferView(t));
  TANDEM_RETURN_IF_ERROR(comm.AllReduce(view, comm::ReduceOp::kSum)->Wait());
  if (!device.is_cpu()) {
    TANDEM_ASSIGN_OR_RETURN(t, t.To(Device::CPU()));
  }
  TANDEM_ASSIGN_OR_RETURN(values, t.ToVector<double>());
  return absl::OkStatus();
}

absl::StatusOr<double> HeldOutMeanLoss(
    comm::Communicator& comm, Device device, int64_t count,
    const std::function<absl::StatusOr<double>(int64_t item)>& loss_of,
    bool fixed_order) {
  if (count < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("HeldOutMeanLoss on rank ", comm.rank(), ": ", count,
                     " held-out items; give at least one to score"));
  }
  NoGradGuard no_grad;
  const int64_t world = comm.size();
  const int64_t rounds = (count + world - 1) / world;
  std::vector<double> sums = {0, 0};
  std::vector<double> mine_losses(rounds);  // fixed_order: each round's
  for (int64_t r = 0; r < rounds; ++r) {
    const int64_t item = comm.rank() + r * world;
    const bool mine = item < count;
    TANDEM_ASSIGN_OR_RETURN(double loss, loss_of(mine ? item : 0));
    if (mine) {
      sums[0] += loss;
      sums[1] += 1;
    }
    mine_losses[r] = loss;
  }
  if (fixed_order) {
    // Every rank's losses, then item i = rank + round * world in order.
    std::vector<double> all(mine_losses.size() * world);
    TANDEM_RETURN_IF_ERROR(
        AllGatherF64Bits(comm, device, mine_losses, absl::MakeSpan(all)));
    std::vector<double> losses(count);
    for (int64_t i = 0; i < count; ++i) {
      losses[i] = all[(i % world) * rounds + i / world];
    }
    return CanonicalTreeSumF64(losses) / static_cast<double>(count);
  }
  TANDEM_RETURN_IF_ERROR(SumOverRanks(comm, device, sums));
  return sums[0] / sums[1];
}

}  // namespace tandem::train
