#include "train/data/data_loader.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>
#include <system_error>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/trace/trace.h"

namespace tandem::train {
namespace {

// What both forms of Create check: batch_size >= 1 and every index within a
// data set of `size` samples.
absl::Status CheckArguments(int64_t size, const std::vector<int64_t>& indices,
                            int64_t batch_size) {
  if (batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("DataLoader: batch_size must be >= 1, got ", batch_size));
  }
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= size) {
      return absl::OutOfRangeError(
          absl::StrCat("DataLoader: index ", indices[i], " at position ", i,
                       " is outside the data set of ", size, " samples"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DataLoader> DataLoader::Create(const TensorDataset& data,
                                              std::vector<int64_t> indices,
                                              int64_t batch_size,
                                              bool drop_last) {
  TANDEM_RETURN_IF_ERROR(CheckArguments(data.size(), indices, batch_size));
  return DataLoader(data, std::move(indices), batch_size, drop_last);
}

absl::StatusOr<DataLoader> DataLoader::Create(
    std::shared_ptr<const MapDataset> data, std::vector<int64_t> indices,
    int64_t batch_size, bool drop_last, Generator& gen,
    const MapLoaderOptions& options) {
  if (data == nullptr) {
    return absl::InvalidArgumentError("DataLoader: the MapDataset is null");
  }
  // Beyond any machine's cores; more is a typo that would start threads
  // by the thousand per batch.
  constexpr int64_t kMaxWorkers = 1024;
  if (options.num_workers < 0 || options.num_workers > kMaxWorkers) {
    return absl::InvalidArgumentError(
        absl::StrCat("DataLoader: num_workers = ", options.num_workers,
                     "; expected 0 to ", kMaxWorkers));
  }
  TANDEM_RETURN_IF_ERROR(CheckArguments(data->size(), indices, batch_size));
  DataLoader loader(TensorDataset{}, std::move(indices), batch_size, drop_last);
  loader.source_ = std::move(data);
  loader.num_workers_ = options.num_workers;
  loader.sample_seeds_.resize(static_cast<size_t>(loader.num_samples()));
  for (uint32_t& seed : loader.sample_seeds_) seed = gen.Random();
  return loader;
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
  if (source_ != nullptr) return GetMapBatch(begin, count);

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

absl::StatusOr<Batch> DataLoader::GetMapBatch(int64_t begin,
                                              int64_t count) const {
  // Each slot is written by exactly one thread (the one that claimed it) and
  // read after every thread is joined.
  std::vector<absl::StatusOr<Sample>> samples(static_cast<size_t>(count));
  std::atomic<int64_t> next{0};
  auto work = [&]() {
    for (int64_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
      const int64_t position = begin + i;
      Generator gen(sample_seeds_[static_cast<size_t>(position)]);
      samples[static_cast<size_t>(i)] =
          source_->Get(indices_[static_cast<size_t>(position)], gen);
    }
  };
  std::vector<std::thread> workers;
  const int64_t extra = std::min<int64_t>(num_workers_, count - 1);
  for (int64_t w = 0; w < extra; ++w) {
    try {
      workers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no thread to be had: the others (and this one) do the work
    }
  }
  work();
  for (std::thread& worker : workers) worker.join();

  for (int64_t i = 0; i < count; ++i) {
    if (!samples[i].ok()) {
      const absl::Status& s = samples[i].status();
      // The data set's message names the sample (an image's path).
      return absl::Status(
          s.code(), absl::StrCat("DataLoader: sample ", i,
                                 " of the batch "
                                 "(data set index ",
                                 indices_[begin + i], "): ", s.message()));
    }
  }
  const Tensor& first = samples[0]->features;
  Shape shape = first.shape();
  shape.insert(shape.begin(), count);
  TANDEM_ASSIGN_OR_RETURN(Tensor features, Tensor::Empty(shape, first.dtype()));
  TANDEM_ASSIGN_OR_RETURN(Tensor labels, Tensor::Empty({count}, DType::kI64));
  const int64_t row_bytes = first.nbytes();
  auto* dst = static_cast<char*>(features.raw_data());
  int64_t* dst_labels = labels.data<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    const Sample& sample = *samples[i];
    if (sample.features.shape() != first.shape() ||
        sample.features.dtype() != first.dtype() ||
        !sample.features.device().is_cpu()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DataLoader: sample ", i, " of the batch (",
          source_->Describe(indices_[begin + i]), ") is ",
          ShapeToString(sample.features.shape()), " ",
          DTypeName(sample.features.dtype()), ", the batch's first (",
          source_->Describe(indices_[begin]), ") ",
          ShapeToString(first.shape()), " ", DTypeName(first.dtype()),
          "; samples of one batch need one shape and dtype on the CPU (for "
          "images: crop them to one size)"));
    }
    std::memcpy(dst + i * row_bytes, sample.features.raw_data(), row_bytes);
    dst_labels[i] = sample.label;
  }
  return Batch{std::move(features), std::move(labels)};
}

std::string MapDataset::Describe(int64_t index) const {
  return absl::StrCat("sample ", index);
}

}  // namespace tandem::train
