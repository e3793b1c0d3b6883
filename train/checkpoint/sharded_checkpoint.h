// A sharded checkpoint, saved by every rank and read back at any world
// size: each rank writes only the flat slices of the full training state it
// holds (one safetensors file per rank), rank 0 writes the index
// (shard_index.h) last, and a load reads only the byte ranges it asks for
// (reshard_plan.h, shard_reader.h). docs/checkpoints.md ("Sharded
// checkpoints") says what a folder holds.
//
//   // Every rank, collectively:
//   std::vector<OwnedSlice> mine = {{"fc.weight", DType::kF32, {4, 8},
//                                    /*begin=*/0, /*end=*/16, shard_tensor}};
//   TANDEM_RETURN_IF_ERROR(SaveShardedCheckpoint(comm, Device::CPU(), dir,
//       /*step=*/120, mine, {{"tandem.global_step", "120"}}));
//   // Later, at any world size, each rank for its own ranges:
//   TANDEM_ASSIGN_OR_RETURN(ShardIndex index, ReadShardIndex(dir));
//   TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> got,
//       LoadShardedSlices(dir, index, {{"fc.weight", 16, 32}}));
//
// The commit: every rank writes its file (atomically, under a name no
// other save uses: the step and a nonce rank 0 draws), the ranks' slice
// lists are gathered, rank 0 checks that they tile every tensor exactly
// once and writes checkpoint.index.json atomically; only then does the new
// checkpoint exist. A crash or an error at any moment before leaves the
// previous index, which names only the previous save's files, the one that
// loads. After the commit rank 0 removes the shard files the index does
// not name (an earlier save's, or a failed save's). Every rank returns the
// same status: a rank that could not write its file makes the save fail on
// every rank, naming it.
#ifndef TANDEM_TRAIN_CHECKPOINT_SHARDED_CHECKPOINT_H_
#define TANDEM_TRAIN_CHECKPOINT_SHARDED_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/dtype.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "tensor/tensor.h"
#include "train/checkpoint/reshard_plan.h"
#include "train/checkpoint/shard_index.h"

namespace tandem::train::checkpoint {

inline constexpr char kShardIndexFile[] = "checkpoint.index.json";

// Elements [begin, end) of the full-state tensor `tensor` (global `shape`,
// `dtype`), held by this rank in `data`: end - begin elements of `dtype`,
// any shape, on any device.
struct OwnedSlice {
  std::string tensor;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  int64_t begin = 0;
  int64_t end = 0;
  Tensor data;
};

// Collective (see the header comment). `metadata`: the run's state, taken
// from rank 0. `dir` must exist. Errors: a slice that does not match its
// data (InvalidArgument, this rank's), a file that could not be written, a
// set of slices that does not tile every tensor exactly once or disagrees
// on a tensor's shape or dtype (InvalidArgument naming the tensor), the
// index's write; each reported on every rank, naming the rank at fault; a
// failed collective.
absl::Status SaveShardedCheckpoint(
    comm::Communicator& comm, Device device, const std::string& dir,
    int64_t step, absl::Span<const OwnedSlice> slices,
    const std::map<std::string, std::string>& metadata);

// The committed index of `dir`: NotFound when there is none; the index's
// own errors otherwise (ParseShardIndex).
absl::StatusOr<ShardIndex> ReadShardIndex(const std::string& dir);

// The requested ranges, each a new 1-d CPU tensor of its tensor's dtype,
// read from the shard files and nothing else. Errors: PlanReads' and
// ReadPlannedShards'.
absl::StatusOr<std::vector<Tensor>> LoadShardedSlices(
    const std::string& dir, const ShardIndex& index,
    absl::Span<const SliceRequest> requests);

}  // namespace tandem::train::checkpoint

#endif  // TANDEM_TRAIN_CHECKPOINT_SHARDED_CHECKPOINT_H_
