#include "train/data/dataset.h"

#include <cmath>

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

namespace {

// The first non-finite value of `n` values at `x`, or -1.
template <typename T>
int64_t FirstNonFinite(const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return i;
  }
  return -1;
}

}  // namespace

absl::Status TensorDataset::Validate(int64_t num_classes,
                                     absl::string_view source) const {
  if (num_classes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": num_classes must be >= 1, got ", num_classes));
  }
  const int64_t n = features.numel();
  const int64_t per_sample = size() == 0 ? 0 : n / size();
  int64_t bad = -1;
  double value = 0;
  if (features.dtype() == DType::kF32) {
    bad = FirstNonFinite(features.data<float>(), n);
    if (bad >= 0) value = features.data<float>()[bad];
  } else if (features.dtype() == DType::kF64) {
    bad = FirstNonFinite(features.data<double>(), n);
    if (bad >= 0) value = features.data<double>()[bad];
  }
  if (bad >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": sample ", bad / per_sample, ", feature ", bad % per_sample,
        " is ", value, "; every feature must be finite: clean the data"));
  }
  const int64_t* y = labels.data<int64_t>();
  for (int64_t i = 0; i < size(); ++i) {
    if (y[i] < 0 || y[i] >= num_classes) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": sample ", i, " has label ", y[i],
                       "; labels must be class indices in [0, ", num_classes,
                       "): fix the labels or the number of classes"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::train
