#include "train/data/data_loader.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/trace/trace.h"

namespace tandem::train {

absl::StatusOr<DataLoader> DataLoader::Create(const TensorDataset& data,
                                              std::vector<int64_t> indices,
                                              int64_t batch_size,
                                              bool drop_last) {
  if (batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("DataLoader: batch_size must be >= 1, got ", batch_size));
  }
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= data.size()) {
      return absl::OutOfRangeError(absl::StrCat(
          "DataLoader: index ", indices[i], " at position ", i,
          " is outside the data set of ", data.size(), " samples"));
    }
  }
  return DataLoader(data, std::move(indices), batch_size, drop_last);
}

absl::StatusOr<DataLoader> DataLoader::Sequential(const TensorDataset& data,
                                                  int64_t batch_size,
                                                  bool drop_last) {
  std::vector<int64_t> indices(data.size());
  std::iota(indices.begin(), indices.end(), int64_t{0});
  return Create(data, std::move(indices), batch_size, drop_last);
}

int64_t DataLoader::num_batches() const {
  const int64_t n = static_cast<int64_t>(indices_.size());
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

int64_t DataLoader::num_samples() const {
  return std::min<int64_t>(static_cast<int64_t>(indices_.size()),
                           num_batches() * batch_size_);
}

absl::StatusOr<Batch> DataLoader::GetBatch(int64_t b) const {
  trace::Scope event("load batch", "data");
  if (event.recording()) event.set_args(trace::Args().Add("batch", b).str());
  if (b < 0 || b >= num_batches()) {
    return absl::OutOfRangeError(absl::StrCat(
        "DataLoader: batch ", b, " requested, there are ", num_batches()));
  }
  const int64_t begin = b * batch_size_;
  const int64_t count = std::min<int64_t>(
      batch_size_, static_cast<int64_t>(indices_.size()) - begin);

  Shape feature_shape = data_.features.shape();
  feature_shape[0] = count;
  TANDEM_ASSIGN_OR_RETURN(Tensor features,
                          Tensor::Empty(feature_shape, data_.features.dtype()));
  TANDEM_ASSIGN_OR_RETURN(Tensor labels, Tensor::Empty({count}, DType::kI64));

  // Rows are contiguous: copy each sample's bytes.
  const int64_t n = data_.size();
  const int64_t row_bytes = n == 0 ? 0 : data_.features.nbytes() / n;
  const auto* src = static_cast<const char*>(data_.features.raw_data());
  auto* dst = static_cast<char*>(features.raw_data());
  const int64_t* src_labels = data_.labels.data<int64_t>();
  int64_t* dst_labels = labels.data<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t index = indices_[begin + i];
    std::memcpy(dst + i * row_bytes, src + index * row_bytes, row_bytes);
    dst_labels[i] = src_labels[index];
  }
  return Batch{std::move(features), std::move(labels)};
}

}  // namespace tandem::train
