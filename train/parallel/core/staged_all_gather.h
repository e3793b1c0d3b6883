// tandem::train::AllGatherInt64, AllReduceInt64 and AllReduceF64 — small
// collectives of host values that work on every engine, for the checks
// trainers run between steps (finite_check, config_agreement, DDP's model
// check) and the sharded gradient norm (grad_clip).
//
//   std::vector<int64_t> mine = {...};            // k values
//   std::vector<int64_t> all(k * comm.size());
//   TANDEM_RETURN_IF_ERROR(AllGatherInt64(comm, device, mine, all));
//
// `device` is where this rank trains. On the CPU the host buffers go to the
// communicator as they are; on any other device they travel through a
// staging tensor there (NCCL moves device memory only), at the cost of two
// copies each way. Collective; bounded by the communicator's own timeout and
// by `timeout` (DDP's model check passes what is left of its deadline).
#ifndef TANDEM_TRAIN_PARALLEL_CORE_STAGED_ALL_GATHER_H_
#define TANDEM_TRAIN_PARALLEL_CORE_STAGED_ALL_GATHER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "comm/types.h"
#include "tensor/device.h"

namespace tandem::train {

// recv.size() must be send.size() * comm.size() (InvalidArgument otherwise,
// before any communication); rank r's values land at recv[r * send.size()].
absl::Status AllGatherInt64(comm::Communicator& comm, Device device,
                            absl::Span<const int64_t> send,
                            absl::Span<int64_t> recv,
                            absl::Duration timeout = absl::InfiniteDuration());

// The same for doubles, gathered bit for bit (as their 64 bits: nothing is
// converted or rounded on the way), e.g. per-rank losses that a fixed-order
// sum then adds.
absl::Status AllGatherF64Bits(comm::Communicator& comm, Device device,
                              absl::Span<const double> send,
                              absl::Span<double> recv);

// Every rank's `mine` (any bytes, any length), in rank order: the lengths
// gathered first, then the bytes padded to the longest. Staged like
// AllGatherInt64.
absl::StatusOr<std::vector<std::string>> AllGatherStrings(
    comm::Communicator& comm, Device device, const std::string& mine);

// In place: values[i] becomes op over every rank's values[i] (int64
// arithmetic, as comm/reduce.h defines it). Staged like AllGatherInt64.
// O(values) per rank whatever the world size, unlike an all-gather (O(values
// x ranks) per rank, O(ranks^2) over a simulated cluster's ranks): the
// checks use it for the common "everyone agrees" case and gather only to
// describe a disagreement.
absl::Status AllReduceInt64(comm::Communicator& comm, Device device,
                            absl::Span<int64_t> values, comm::ReduceOp op,
                            absl::Duration timeout = absl::InfiniteDuration());

// The same for doubles (the sharded gradient norm's parts: grad_clip.h).
// Sum and Max reduce in rank order on the sim engine, so every rank gets
// the same bits.
absl::Status AllReduceF64(comm::Communicator& comm, Device device,
                          absl::Span<double> values, comm::ReduceOp op,
                          absl::Duration timeout = absl::InfiniteDuration());

// Whether every rank passed the same `value` (one all-reduce of {v, ~v}
// with Max: ~max(~v) is the minimum, so max == min means all equal).
// Collective.
absl::StatusOr<bool> SameOnEveryRank(
    comm::Communicator& comm, Device device, int64_t value,
    absl::Duration timeout = absl::InfiniteDuration());

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_CORE_STAGED_ALL_GATHER_H_
