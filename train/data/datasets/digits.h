// The digits data set (scikit-learn's load_digits: 1797 hand-written
// digits, UCI's "Optical Recognition of Handwritten Digits"), as the ranks
// of a run load it: the CSV of train/data/digits.csv.gz (8x8 pixels 0..16
// and a label 0..9), split once by `split_seed` into training and test rows
// (the first test_fraction of a permutation is held out), pixels scaled to
// 0..1.
//
//   TANDEM_ASSIGN_OR_RETURN(
//       std::shared_ptr<const DigitsSplit> split,
//       LoadDigitsSplit({.data_path = "train/data/digits.csv.gz"}, comm,
//                       device));
//   // split->train: 1438 rows, split->test: 359 (features [n, 64] float32)
//
// The ranks of one process (the simulated cluster's threads) share one
// read-only copy, loaded once (SharedLoad, keyed by everything the result
// depends on, the file's size and modification time included). With ranks
// in separate processes (mpi, gloo) a pipe given as the path can be read by
// one of them only: rank 0 reads it and broadcasts the rows
// (broadcast_dataset.h).
#ifndef TANDEM_TRAIN_DATA_DATASETS_DIGITS_H_
#define TANDEM_TRAIN_DATA_DATASETS_DIGITS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "train/data/dataset.h"

namespace tandem::train {

struct DigitsSplitOptions {
  std::string data_path;
  uint64_t split_seed = 42;
  double test_fraction = 0.2;  // in (0, 1)
};

struct DigitsSplit {
  TensorDataset train;
  TensorDataset test;
  uint64_t hash = 0;  // of both splits' features and labels, for the check
                      // that every rank trains on the same data
};

// This rank's (shared, read-only) split, once every rank agrees on its
// size and hash (CheckRanksAgree through `device`: a difference fails every
// rank naming each rank's value). Collective. Errors: the loader's (file,
// CSV, labels outside 0..9), 64 pixel columns not found, too few rows for
// one test sample and one training sample per rank (naming the count), the
// agreement's.
absl::StatusOr<std::shared_ptr<const DigitsSplit>> LoadDigitsSplit(
    const DigitsSplitOptions& options, comm::Communicator& comm, Device device);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DATA_DATASETS_DIGITS_H_
