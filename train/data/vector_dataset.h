// VectorDataset: a small in-memory TensorDataset written out in code (the
// tutorials' toy points, tests' rows), in one call instead of three.
//
//   TANDEM_ASSIGN_OR_RETURN(TensorDataset data,
//       VectorDataset({-1.2f, 3.1f, -0.9f, 2.9f}, /*row_size=*/2, {0, 1}));
//   // features [2, 2] f32, labels [2] int64
#ifndef TANDEM_TRAIN_DATA_VECTOR_DATASET_H_
#define TANDEM_TRAIN_DATA_VECTOR_DATASET_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "train/data/dataset.h"

namespace tandem::train {

// Features [labels.size(), row_size] (f32, row-major from `features`) and
// labels [labels.size()] (int64 class indices). Errors: a row_size below 1,
// or features.size() other than labels.size() x row_size (InvalidArgument
// naming both), TensorDataset::Create's.
absl::StatusOr<TensorDataset> VectorDataset(const std::vector<float>& features,
                                            int64_t row_size,
                                            const std::vector<int64_t>& labels);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DATA_VECTOR_DATASET_H_
