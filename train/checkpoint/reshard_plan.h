// The reshard plan: which bytes of which shard files a rank reads to fill
// the flat ranges of the full training state it needs, whatever world size
// and mode wrote the checkpoint (docs/scaling_design.md, "Sharded
// checkpoints"). A pure function of the index and the requests: the same
// on every rank, testable without files.
//
//   std::vector<SliceRequest> need = {{"fc.weight", 0, 4096}, ...};
//   TANDEM_ASSIGN_OR_RETURN(std::vector<PlannedRead> reads,
//                           PlanReads(index, need, path));
//   // reads[i]: bytes [file_offset, file_offset + bytes) of `file` go to
//   // element dest_element of request `request` (ReadPlannedShards does it).
//
// Reads never cross a slice of the index; consecutive pieces of one file
// that land consecutively are merged into one read. Thread-safe.
#ifndef TANDEM_TRAIN_CHECKPOINT_RESHARD_PLAN_H_
#define TANDEM_TRAIN_CHECKPOINT_RESHARD_PLAN_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "train/checkpoint/shard_index.h"

namespace tandem::train::checkpoint {

// Elements [begin, end) of the full-state tensor `tensor`, laid out flat.
struct SliceRequest {
  std::string tensor;
  int64_t begin = 0;
  int64_t end = 0;
};

struct PlannedRead {
  std::string file;         // a shard file of the index
  int64_t file_offset = 0;  // its first byte
  int64_t bytes = 0;
  size_t request = 0;        // which SliceRequest it fills
  int64_t dest_element = 0;  // where, counted from that request's begin
};

// The reads that fill every request, in request order, then by element.
// InvalidArgument naming `source` for a tensor the index does not hold or a
// range outside it (begin < 0, end < begin, end > numel).
absl::StatusOr<std::vector<PlannedRead>> PlanReads(
    const ShardIndex& index, absl::Span<const SliceRequest> requests,
    std::string_view source);

}  // namespace tandem::train::checkpoint

#endif  // TANDEM_TRAIN_CHECKPOINT_RESHARD_PLAN_H_
