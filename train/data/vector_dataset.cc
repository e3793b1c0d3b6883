#include "train/data/vector_dataset.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/tensor.h"

namespace tandem::train {

absl::StatusOr<TensorDataset> VectorDataset(
    const std::vector<float>& features, int64_t row_size,
    const std::vector<int64_t>& labels) {
  const int64_t n = static_cast<int64_t>(labels.size());
  if (row_size < 1 || static_cast<int64_t>(features.size()) != n * row_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("VectorDataset: expected ", n, " labels x row_size ",
                     row_size, " feature values (row_size >= 1), got ",
                     features.size(), " feature values"));
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor x,
                          Tensor::FromVector(features, {n, row_size}));
  TANDEM_ASSIGN_OR_RETURN(Tensor y, Tensor::FromVector(labels));
  return TensorDataset::Create(x, y);
}

}  // namespace tandem::train
