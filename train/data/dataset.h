// TensorDataset: a data set held in memory as two tensors, the way
// torch.utils.data.TensorDataset(features, labels) holds it.
//
//   TANDEM_ASSIGN_OR_RETURN(Tensor x, Tensor::FromVector<float>(
//       {-1.2f, 3.1f, -0.9f, 2.9f}, {2, 2}));
//   TANDEM_ASSIGN_OR_RETURN(Tensor y, Tensor::FromVector<int64_t>({0, 0}));
//   TANDEM_ASSIGN_OR_RETURN(TensorDataset data, TensorDataset::Create(x, y));
//
// Sample i is row i of `features` (any shape [N, ...], any dtype) and
// element i of `labels` ([N], int64 class indices, as cross_entropy wants).
// Loaders for files live beside it: train/data/csv_dataset.h, train/data/npy.h.
// A value type; the tensors are shared handles (see tensor/tensor.h).
#ifndef TANDEM_TRAIN_DATA_DATASET_H_
#define TANDEM_TRAIN_DATA_DATASET_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tensor/tensor.h"

namespace tandem::train {

struct TensorDataset {
  // Checks that both are CPU tensors, features has at least one dim, labels
  // is 1-d int64 and both have the same first dimension; the error names
  // the shapes and dtypes found.
  static absl::StatusOr<TensorDataset> Create(Tensor features, Tensor labels);

  int64_t size() const { return labels.numel(); }

  // Checks the values, for data that did not come through a checking loader
  // (LoadNpy, tensors built in memory): every floating-point feature is
  // finite, and every label lies in [0, num_classes) (num_classes >= 1). The
  // error names `source`, the sample index, the value and the valid range,
  // so that no bad sample is trained on or scored. O(numel), no copies.
  absl::Status Validate(int64_t num_classes, absl::string_view source) const;

  Tensor features;  // [N, ...]
  Tensor labels;    // [N], int64
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DATA_DATASET_H_
