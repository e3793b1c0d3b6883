// Internal to comm/nccl (the CUDA build): error texts, type mappings and the
// small structures NcclCommunicator and its Works share. Not for use outside
// the nccl_*_cuda.cc files.
#ifndef TANDEM_COMM_NCCL_INTERNAL_NCCL_SUPPORT_H_
#define TANDEM_COMM_NCCL_INTERNAL_NCCL_SUPPORT_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/types.h"

namespace tandem::comm::nccl_internal {

// "cudaErrorInvalidValue: invalid argument".
std::string CudaText(cudaError_t err);
// Internal: "<call> <where> failed: <CudaText>".
absl::Status CudaError(absl::string_view call, cudaError_t err,
                       absl::string_view where);
// NCCL's result as a Status (InvalidArgument for misuse, Unavailable for a
// peer or network failure, Internal otherwise) with NCCL's last error text.
absl::Status NcclError(absl::string_view call, ncclResult_t r, ncclComm_t comm,
                       absl::string_view where);
// "CUDA_VISIBLE_DEVICES=\"0,1\"" or "CUDA_VISIBLE_DEVICES unset".
std::string VisibleDevicesText();
ncclDataType_t ToNcclType(DType dtype);
ncclRedOp_t ToNcclOp(ReduceOp op);
// The Avg division kernel's format for `dtype` (internal/avg_kernel.h).
int AvgFormatOf(DType dtype);
// "AllReduce on rank 3: ".
std::string Where(OpKind op, int rank);

// Polling cadence of every bounded wait here: yield for the first 200 µs
// (collectives on small buffers finish in tens of µs), then nap, doubling
// from 20 µs to 1 ms, so a long wait costs the core almost nothing.
class Backoff {
 public:
  void Pause() {
    if (absl::Now() - start_ < absl::Microseconds(200)) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(nap_us_));
    nap_us_ = std::min(nap_us_ * 2, 1000);
  }

 private:
  absl::Time start_ = absl::Now();
  int nap_us_ = 20;
};

inline absl::Time DeadlineAfter(absl::Duration timeout) {
  return timeout == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                             : absl::Now() + timeout;
}

// The completion event of one launch; shared by every Work it covers (a
// batch of Send/Recv shares one). When the timeline was recording at issue,
// both events are timing events and `start` marks when the communication
// stream reached the launch (State::DeviceSpan reads them).
struct Completion {
  cudaEvent_t event = nullptr;
  cudaEvent_t start = nullptr;
  ~Completion() {
    if (event != nullptr) cudaEventDestroy(event);
    if (start != nullptr) cudaEventDestroy(start);
  }
};

// Where a Work stands before it has a completion: Send/Recv are queued and
// launched later, together (FlushP2p).
struct Ticket {
  bool launched = false;
  absl::Status launch_status;  // the launch failed: the Work fails with it
  std::shared_ptr<Completion> completion;
};

struct PendingP2p {
  bool send = true;
  BufferView buf;
  int peer = 0;
  std::shared_ptr<Ticket> ticket;
};

}  // namespace tandem::comm::nccl_internal

#endif  // TANDEM_COMM_NCCL_INTERNAL_NCCL_SUPPORT_H_
