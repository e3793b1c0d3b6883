// Reads what a reshard plan (reshard_plan.h) names from the shard files of a
// sharded checkpoint: only those byte ranges, each file opened once.
//
//   TANDEM_ASSIGN_OR_RETURN(auto reads, PlanReads(index, need, dir));
//   std::vector<void*> dest = {...};  // per request, its elements' memory
//   TANDEM_RETURN_IF_ERROR(ReadPlannedShards(dir, index, need, reads, dest));
//
// Every file must be a regular file of exactly the size the index records
// (a FIFO, a directory or a device is refused without blocking; a short or
// longer file is another save's or a truncated one): DataLoss naming the
// file and both sizes, before any byte of it is read. Blocking (file I/O);
// thread-safe for distinct destinations.
#ifndef TANDEM_TRAIN_CHECKPOINT_SHARD_READER_H_
#define TANDEM_TRAIN_CHECKPOINT_SHARD_READER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "train/checkpoint/reshard_plan.h"
#include "train/checkpoint/shard_index.h"

namespace tandem::train::checkpoint {

// dest[i]: memory for requests[i]'s (end - begin) elements of its tensor's
// dtype. InvalidArgument when dest and requests differ in length.
absl::Status ReadPlannedShards(const std::string& dir, const ShardIndex& index,
                               absl::Span<const SliceRequest> requests,
                               absl::Span<const PlannedRead> reads,
                               absl::Span<void* const> dest);

}  // namespace tandem::train::checkpoint

#endif  // TANDEM_TRAIN_CHECKPOINT_SHARD_READER_H_
