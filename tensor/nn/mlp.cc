#include "tensor/nn/mlp.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"

namespace tandem::nn {

absl::StatusOr<std::unique_ptr<Sequential>> Mlp(
    const std::vector<int64_t>& sizes, Generator& gen) {
  if (sizes.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("Mlp: expected at least two sizes (inputs, outputs), got ",
                     sizes.size()));
  }
  auto mlp = std::make_unique<Sequential>();
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    if (i > 0) TANDEM_RETURN_IF_ERROR(mlp->Append(std::make_unique<ReLU>()));
    TANDEM_RETURN_IF_ERROR(
        mlp->Append(Linear::Create(sizes[i], sizes[i + 1], gen)));
  }
  return mlp;
}

}  // namespace tandem::nn
