// The index of a sharded checkpoint: one small JSON file that says, for
// every tensor of the full training state (model and optimizer, PyTorch's
// names), its global shape and dtype and which flat slices of it are in
// which shard file at which byte offset, plus the run's state as strings
// (step, epoch, data position, generators, ...; the keys
// training_checkpoint.h writes today). Every rank writes one shard file
// holding the slices it owns; the index is written last, so its presence
// is the commit (docs/scaling_design.md, "Sharded checkpoints").
//
//   {"format": "tandem-sharded-checkpoint", "version": 1,
//    "metadata": {"tandem.global_step": "120", ...},
//    "files": {"shard-120-0-of-2.safetensors": 4096, ...},
//    "tensors": {"fc.weight": {"dtype": "F32", "shape": [4, 8],
//        "slices": [[0, 16, "shard-120-0-of-2.safetensors", 184], ...]}}}
//
// A slice is [begin, end) in elements of the tensor laid out flat (row
// major), then the file and the byte offset of its first element; its bytes
// are (end - begin) x the dtype's size, contiguous. `files` gives each
// shard file's size in bytes, so a truncated or replaced shard is found
// before anything is read. The slices of a tensor tile [0, numel) exactly,
// in order (ValidateShardIndex).
//
// Pure functions; thread-safe.
#ifndef TANDEM_TRAIN_CHECKPOINT_SHARD_INDEX_H_
#define TANDEM_TRAIN_CHECKPOINT_SHARD_INDEX_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/dtype.h"

namespace tandem::train::checkpoint {

inline constexpr char kShardIndexFormat[] = "tandem-sharded-checkpoint";
inline constexpr int64_t kShardIndexVersion = 1;

struct IndexSlice {
  int64_t begin = 0;   // first element, flat
  int64_t end = 0;     // one past the last
  std::string file;    // a shard file of the same folder (a plain name)
  int64_t offset = 0;  // byte offset of element `begin` in that file
};

struct IndexTensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<IndexSlice> slices;  // by begin, tiling [0, numel)
  int64_t numel() const;
};

struct ShardIndex {
  std::map<std::string, std::string> metadata;  // the run's state
  std::map<std::string, int64_t> files;         // shard file -> bytes
  std::map<std::string, IndexTensor> tensors;   // full-state name -> where
};

// OK when the index is whole: every tensor's slices non-empty, in order,
// tiling [0, numel) without gap or overlap; every slice in a listed file
// with its bytes inside the file's size; file names plain (no '/', not "."
// or ".."); shapes non-negative. Otherwise InvalidArgument naming the tensor
// (and slice) and `source` (the index's path, for messages).
absl::Status ValidateShardIndex(const ShardIndex& index,
                                std::string_view source);

// The index as JSON (keys sorted, one tensor per line). InvalidArgument
// when ValidateShardIndex refuses it.
absl::StatusOr<std::string> EncodeShardIndex(const ShardIndex& index);

// Parses and validates an index. InvalidArgument naming `source` and what
// is wrong: not this format, another version, a missing or mistyped field,
// or what ValidateShardIndex refuses.
absl::StatusOr<ShardIndex> ParseShardIndex(std::string_view json,
                                           std::string_view source);

}  // namespace tandem::train::checkpoint

#endif  // TANDEM_TRAIN_CHECKPOINT_SHARD_INDEX_H_
