// tandem::train::AllGatherInt64 — a small all-gather of host values that
// works on every engine, for the checks trainers run between steps
// (finite_check, config_agreement).
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
#ifndef TANDEM_TRAIN_PARALLEL_STAGED_ALL_GATHER_H_
#define TANDEM_TRAIN_PARALLEL_STAGED_ALL_GATHER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "tensor/device.h"

namespace tandem::train {

// recv.size() must be send.size() * comm.size() (InvalidArgument otherwise,
// before any communication); rank r's values land at recv[r * send.size()].
absl::Status AllGatherInt64(comm::Communicator& comm, Device device,
                            absl::Span<const int64_t> send,
                            absl::Span<int64_t> recv,
                            absl::Duration timeout = absl::InfiniteDuration());

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_STAGED_ALL_GATHER_H_
