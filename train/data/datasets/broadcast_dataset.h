// A data set that only one process can read, shared with every rank: a pipe
// (--data=<(zcat ...), /dev/stdin) is read once, and when ranks are separate
// processes (mpi, gloo, under tandemrun or mpirun) each would read a
// different part of it. Rank 0 loads it and broadcasts what it loaded, so
// every rank trains on the same rows, as with a regular file.
//
//   TANDEM_ASSIGN_OR_RETURN(
//       TensorDataset data,
//       LoadOnRank0AndBroadcast(comm, path, [&] { return LoadCsv...; }));
//
// Collective: every rank calls it, in the same order as its other
// collectives. Blocking, bounded by the communicator's collective timeout. Rank
// 0's load error is returned on rank 0; the other ranks get an error naming
// `path` and saying that rank 0 reports why.
#ifndef TANDEM_TRAIN_DATA_DATASETS_BROADCAST_DATASET_H_
#define TANDEM_TRAIN_DATA_DATASETS_BROADCAST_DATASET_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "train/data/dataset.h"

namespace tandem::train {

// Features of at most this many dimensions (a sample's shape plus the
// batch dimension) travel; labels are 1-d int64 (TensorDataset's contract).
inline constexpr int kMaxBroadcastFeatureDims = 6;

// Rank 0's `value` on every rank (one collective; every rank calls it).
// For decisions only rank 0 can make: under mpirun only rank 0 gets the
// caller's stdin (the others read /dev/null), so whether --data=/dev/stdin
// is a pipe is rank 0's to say.
absl::StatusOr<bool> Rank0Says(comm::Communicator& comm, bool value);

absl::StatusOr<TensorDataset> LoadOnRank0AndBroadcast(
    comm::Communicator& comm, const std::string& path,
    const std::function<absl::StatusOr<TensorDataset>()>& load);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DATA_DATASETS_BROADCAST_DATASET_H_
