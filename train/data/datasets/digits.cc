#include "train/data/datasets/digits.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/input_file.h"
#include "base/status_macros.h"
#include "base/unshared_status.h"
#include "tensor/generator.h"
#include "tensor/tensor.h"
#include "train/data/csv_dataset.h"
#include "train/data/data_loader.h"
#include "train/data/datasets/broadcast_dataset.h"
#include "train/data/shared_load.h"
#include "train/parallel/core/config_agreement.h"

namespace tandem::train {
namespace {

constexpr int64_t kNumClasses = 10;  // the digits 0..9

// Rows `indices` of `data`, features scaled by `scale`.
absl::StatusOr<TensorDataset> Subset(const TensorDataset& data,
                                     const std::vector<int64_t>& indices,
                                     float scale) {
  TANDEM_ASSIGN_OR_RETURN(
      DataLoader all,
      DataLoader::Create(data, indices, std::max<int64_t>(1, indices.size()),
                         /*drop_last=*/false));
  if (all.num_batches() == 0) {
    return absl::InvalidArgumentError(
        "digits: an empty split; lower test_fraction");
  }
  TANDEM_ASSIGN_OR_RETURN(Batch batch, all.GetBatch(0));
  float* x = batch.features.data<float>();
  for (int64_t i = 0; i < batch.features.numel(); ++i) x[i] *= scale;
  return TensorDataset::Create(batch.features, batch.labels);
}

// The fewest rows that leave at least one test sample (llround of
// test_fraction * rows) and one training sample per rank.
int64_t RowsNeeded(double test_fraction, int64_t world_size) {
  const double lower =
      std::max(0.5 / test_fraction, world_size / (1.0 - test_fraction));
  // No file holds 2^53 rows; this also keeps the cast below defined.
  if (lower > 0x1p53) return INT64_MAX;
  for (int64_t rows = std::max<int64_t>(1, static_cast<int64_t>(lower) - 2);;
       ++rows) {
    const int64_t n_test = std::llround(test_fraction * rows);
    if (n_test >= 1 && rows - n_test >= world_size) return rows;
  }
}

// Loads the CSV, labels checked against the 10 digit classes (so a bad
// label fails at load in either split).
absl::StatusOr<TensorDataset> LoadDigits(const DigitsSplitOptions& config) {
  return LoadCsvDataset(config.data_path, {.num_classes = kNumClasses});
}

// Splits the loaded rows; too few rows for one test sample and one training
// sample per rank is an error naming the count.
absl::StatusOr<DigitsSplit> SplitDigits(const DigitsSplitOptions& config,
                                        const TensorDataset& data,
                                        int64_t world_size) {
  if (data.features.ndim() != 2 || data.features.dim(1) != 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        config.data_path, ": expected 64 pixel columns and a label, found ",
        ShapeToString(data.features.shape()), " features"));
  }
  const int64_t needed = RowsNeeded(config.test_fraction, world_size);
  if (data.size() < needed) {
    return absl::InvalidArgumentError(absl::StrCat(
        config.data_path, ": ", data.size(), " data row(s); need at least ",
        needed, " for one test sample (test_fraction ", config.test_fraction,
        ") and one training sample on each of ", world_size,
        " rank(s): add rows or use fewer ranks"));
  }
  Generator split_gen(config.split_seed);
  std::vector<int64_t> order = split_gen.Randperm(data.size());
  const int64_t n_test =
      static_cast<int64_t>(std::llround(config.test_fraction * data.size()));
  std::vector<int64_t> test(order.begin(), order.begin() + n_test);
  std::vector<int64_t> train(order.begin() + n_test, order.end());
  // Pixels are 0..16.
  TANDEM_ASSIGN_OR_RETURN(TensorDataset train_set,
                          Subset(data, train, 1.0f / 16));
  TANDEM_ASSIGN_OR_RETURN(TensorDataset test_set,
                          Subset(data, test, 1.0f / 16));
  return DigitsSplit{std::move(train_set), std::move(test_set)};
}

// A fingerprint of the split the ranks train and test on (features and
// labels, as loaded and scaled), for the ranks-agree check.
uint64_t DatasetHash(const DigitsSplit& split) {
  uint64_t hash = HashBytes(nullptr, 0);
  for (const TensorDataset* d : {&split.train, &split.test}) {
    for (const Tensor* t : {&d->features, &d->labels}) {
      hash = HashBytes(t->raw_data(), static_cast<size_t>(t->nbytes()), hash);
    }
  }
  return hash;
}

// LoadDigits and SplitDigits once per process: the simulated cluster's ranks
// are threads, and 8192 private copies of the data set (and 8192 parses of the
// file) would dominate the run. Keyed by everything the result depends on, the
// file's size and modification time included, so a rewritten file is read
// again. Each rank still draws its own indices (DistributedSampler).
absl::StatusOr<std::shared_ptr<const DigitsSplit>> LoadDigitsSplit(
    const DigitsSplitOptions& config, int64_t world_size) {
  auto load = [&]() -> absl::StatusOr<DigitsSplit> {
    TANDEM_ASSIGN_OR_RETURN(const TensorDataset data, LoadDigits(config));
    TANDEM_ASSIGN_OR_RETURN(DigitsSplit split,
                            SplitDigits(config, data, world_size));
    split.hash = DatasetHash(split);
    return split;
  };
  // Process-wide and never destroyed: ranks of runs still going at exit may
  // hold entries. Small: one record per distinct key.
  static SharedLoad<DigitsSplit>* const cache = new SharedLoad<DigitsSplit>();
  // A pipe (--data=<(zcat ...), /dev/stdin) can be read once: the first rank
  // reads it and every other rank of this process shares what it read.
  // A failed read of a pipe is final (what was read is gone): the other
  // ranks get the first rank's error instead of waiting on the pipe again.
  if (IsStreamInput(config.data_path)) {
    static std::mutex* const failed_mu = new std::mutex;
    static auto* const failed = new std::map<std::string, absl::Status>;
    const std::string key =
        absl::StrFormat("%s|stream|%d|%.17g|%d", config.data_path,
                        config.split_seed, config.test_fraction, world_size);
    return cache->Get(key, [&]() -> absl::StatusOr<DigitsSplit> {
      std::lock_guard<std::mutex> lock(*failed_mu);
      if (auto it = failed->find(key); it != failed->end()) {
        return UnsharedStatus(it->second);
      }
      absl::StatusOr<DigitsSplit> split = load();
      if (!split.ok()) (*failed)[key] = UnsharedStatus(split.status());
      return split;
    });
  }
  std::error_code error;
  const std::uintmax_t size =
      std::filesystem::file_size(config.data_path, error);
  const auto modified =
      error ? std::filesystem::file_time_type()
            : std::filesystem::last_write_time(config.data_path, error);
  if (error) {
    // Not a readable file: let the loader report it, uncached.
    TANDEM_ASSIGN_OR_RETURN(DigitsSplit split, load());
    return std::make_shared<const DigitsSplit>(std::move(split));
  }
  const std::string key =
      absl::StrFormat("%s|%d|%d|%d|%.17g|%d", config.data_path, size,
                      modified.time_since_epoch().count(), config.split_seed,
                      config.test_fraction, world_size);
  return cache->Get(key, load);
}

// This rank's view of the data. With ranks in separate processes (mpi,
// gloo) a pipe can be read by one of them only: rank 0 reads it and
// broadcasts the rows (whether it is a pipe is rank 0's to say: under
// mpirun the other ranks' stdin is /dev/null). Everything else goes through
// the per-process cache.
absl::StatusOr<std::shared_ptr<const DigitsSplit>> LoadThisRanksSplit(
    const DigitsSplitOptions& config, comm::Communicator& comm) {
  const bool process_per_rank =
      comm.backend() == "mpi" || comm.backend() == "gloo";
  if (!process_per_rank || comm.size() == 1) {
    return LoadDigitsSplit(config, comm.size());
  }
  TANDEM_ASSIGN_OR_RETURN(const bool stream,
                          Rank0Says(comm, IsStreamInput(config.data_path)));
  if (!stream) return LoadDigitsSplit(config, comm.size());
  TANDEM_ASSIGN_OR_RETURN(const TensorDataset data,
                          LoadOnRank0AndBroadcast(comm, config.data_path, [&] {
                            return LoadDigits(config);
                          }));
  TANDEM_ASSIGN_OR_RETURN(DigitsSplit split,
                          SplitDigits(config, data, comm.size()));
  split.hash = DatasetHash(split);
  return std::make_shared<const DigitsSplit>(std::move(split));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const DigitsSplit>> LoadDigitsSplit(
    const DigitsSplitOptions& config, comm::Communicator& comm, Device device) {
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<const DigitsSplit> split,
                          LoadThisRanksSplit(config, comm));
  TANDEM_RETURN_IF_ERROR(CheckRanksAgree(
      comm, device,
      {{"dataset size", split->train.size() + split->test.size()},
       {"dataset hash", HashHex(split->hash)}}));
  return split;
}

}  // namespace tandem::train
