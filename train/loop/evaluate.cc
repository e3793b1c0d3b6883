#include "train/loop/evaluate.h"

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "base/status_macros.h"
#include "tensor/amp/autocast.h"
#include "tensor/autograd.h"
#include "tensor/ops.h"

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

}  // namespace tandem::train
