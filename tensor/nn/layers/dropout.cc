#include "tensor/nn/layers/dropout.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tensor/ops.h"

namespace tandem::nn {

absl::StatusOr<std::unique_ptr<Dropout>> Dropout::Create(double p,
                                                         Generator& gen) {
  if (!(p >= 0 && p <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("nn::Dropout: probability p must be in [0, 1], got ", p));
  }
  return std::unique_ptr<Dropout>(new Dropout(p, gen));
}

absl::StatusOr<Tensor> Dropout::Forward(const Tensor& input) {
  return ::tandem::Dropout(input, p_, is_training(), *gen_);
}

// torch.nn.Dropout's repr: "p=0.1, inplace=False".
std::string Dropout::ExtraRepr() const {
  return absl::StrCat("p=", p_, ", inplace=False");
}

}  // namespace tandem::nn
