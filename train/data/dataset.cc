#include "train/data/dataset.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem::train {

absl::StatusOr<TensorDataset> TensorDataset::Create(Tensor features,
                                                    Tensor labels) {
  if (!features.defined() || !labels.defined()) {
    return absl::InvalidArgumentError(
        "TensorDataset: features and labels must both be defined tensors");
  }
  if (!features.device().is_cpu() || !labels.device().is_cpu()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TensorDataset: features and labels must be on the CPU, got ",
        features.device().ToString(), " and ", labels.device().ToString(),
        "; move batches to the device after loading"));
  }
  if (features.ndim() < 1) {
    return absl::InvalidArgumentError(
        "TensorDataset: features must have a sample dimension ([N, ...]), "
        "got a 0-d tensor");
  }
  if (labels.ndim() != 1 || labels.dtype() != DType::kI64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TensorDataset: labels must be a 1-d int64 tensor of class indices, "
        "got shape ",
        ShapeToString(labels.shape()), " dtype ", DTypeName(labels.dtype())));
  }
  if (features.dim(0) != labels.dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TensorDataset: features has ", features.dim(0), " samples (shape ",
        ShapeToString(features.shape()), ") but labels has ", labels.dim(0)));
  }
  return TensorDataset{std::move(features), std::move(labels)};
}

}  // namespace tandem::train
