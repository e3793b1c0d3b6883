#include "train/loop/evaluate.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "comm/types.h"
#include "tensor/amp/autocast.h"
#include "tensor/autograd/autograd.h"
#include "tensor/ops.h"
#include "train/parallel/core/staged_all_gather.h"

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
  std::vector<int64_t> mine;
  for (int64_t i = comm.rank(); i < data.size(); i += comm.size()) {
    mine.push_back(i);
  }
  std::vector<double> counts = {0, static_cast<double>(mine.size())};
  if (!mine.empty()) {
    TANDEM_ASSIGN_OR_RETURN(
        DataLoader loader,
        DataLoader::Create(data, mine, static_cast<int64_t>(mine.size()),
                           /*drop_last=*/false));
    TANDEM_ASSIGN_OR_RETURN(Batch batch, loader.GetBatch(0));
    TANDEM_ASSIGN_OR_RETURN(
        Tensor logits, EvalForward(strategy, batch.features, device, autocast));
    TANDEM_ASSIGN_OR_RETURN(const int64_t correct,
                            CountCorrect(logits, batch.labels));
    counts[0] = static_cast<double>(correct);
  }
  TANDEM_RETURN_IF_ERROR(
      AllReduceF64(comm, device, absl::MakeSpan(counts), comm::ReduceOp::kSum));
  return Score{.correct = static_cast<int64_t>(counts[0]),
               .total = static_cast<int64_t>(counts[1])};
}

}  // namespace tandem::train
