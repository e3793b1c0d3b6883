// NcclCommunicator::Split over ncclCommSplit (CUDA build).
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "comm/fingerprint.h"
#include "comm/nccl/internal/avg_kernel.h"
#include "comm/nccl/internal/nccl_state.h"
#include "comm/nccl/internal/nccl_support.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/split_plan.h"
#include "comm/validate.h"
#include "comm/work.h"

namespace tandem::comm {

namespace {

// Every rank's (color, key), all-gathered over `comm` through a temporary
// device buffer (NCCL moves device memory only): 2 int64 per rank.
absl::StatusOr<std::vector<int64_t>> GatherColorsAndKeys(NcclCommunicator& comm,
                                                         State& s, int color,
                                                         int key) {
  const std::vector<int64_t> mine = {color, key};
  const size_t n = static_cast<size_t>(s.size);
  std::vector<int64_t> all(2 * n);
  void* dev = nullptr;
  const size_t bytes = sizeof(int64_t) * (2 + 2 * n);
  cudaError_t e = cudaMallocAsync(&dev, bytes, s.comm_stream);
  if (e != cudaSuccess) {
    return CudaError("cudaMallocAsync (Split's colors and keys)", e, s.On());
  }
  auto* words = static_cast<int64_t*>(dev);
  absl::Status gathered = [&]() -> absl::Status {
    // Ordered before the all-gather: both run on the communication stream.
    cudaError_t c = cudaMemcpyAsync(words, mine.data(), 2 * sizeof(int64_t),
                                    cudaMemcpyHostToDevice, s.comm_stream);
    if (c != cudaSuccess) return CudaError("cudaMemcpyAsync", c, s.On());
    TANDEM_RETURN_IF_ERROR(
        comm.AllGather(
                BufferView{words, 2, DType::kI64, MemorySpace::kCuda, s.device},
                BufferView{words + 2, static_cast<int64_t>(2 * n), DType::kI64,
                           MemorySpace::kCuda, s.device})
            ->Wait(absl::InfiniteDuration()));  // bounded by the timeout
    // The all-gather completed: its result is in device memory.
    c = cudaMemcpy(all.data(), words + 2, 2 * n * sizeof(int64_t),
                   cudaMemcpyDeviceToHost);
    if (c != cudaSuccess) return CudaError("cudaMemcpy", c, s.On());
    return absl::OkStatus();
  }();
  cudaFreeAsync(dev, s.comm_stream);
  if (!gathered.ok()) return gathered;
  return all;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> NcclCommunicator::Split(int color,
                                                                      int key) {
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> child =
      SplitNccl(color, key);
  if (!child.ok()) return child.status();
  return std::unique_ptr<Communicator>(std::move(*child));
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::SplitNccl(
    int color, int key) {
  State& s = *state_;
  const std::string where = absl::StrCat("NCCL Split on rank ", s.rank, ": ");
  if (s.closed || s.aborted) {
    return absl::Status(
        s.closed ? absl::StatusCode::kFailedPrecondition
                 : absl::StatusCode::kAborted,
        absl::StrCat(where, "the communicator was ",
                     s.closed ? "destroyed"
                              : absl::StrCat("aborted earlier (",
                                             s.abort_cause.message(), ")"),
                     "; split a live communicator"));
  }
  TANDEM_RETURN_IF_ERROR(s.SetDevice());
  // First a bounded, timed all-gather of (color, key): bad colors fail
  // every rank alike, naming the rank, and the membership (ties in key
  // broken by rank, as on every engine) is decided here, not by NCCL.
  absl::StatusOr<std::vector<int64_t>> all =
      GatherColorsAndKeys(*this, s, color, key);
  if (!all.ok()) {
    return absl::Status(
        all.status().code(),
        absl::StrCat(where, "exchanging colors and keys failed: ",
                     all.status().message()));
  }
  TANDEM_ASSIGN_OR_RETURN(SplitPlan plan, PlanFromGathered(s.rank, *all));
  if (s.aborted) return s.abort_cause;
  // The key passed to NCCL is the sub-rank decided above, so NCCL's order
  // is ours. A nullptr config: the child inherits the parent's (non-
  // blocking), so polling below bounds it.
  s.split_child = nullptr;
  const ncclResult_t r = ncclCommSplit(
      s.comm, plan.sub_rank < 0 ? NCCL_SPLIT_NOCOLOR : plan.color,
      plan.sub_rank < 0 ? 0 : plan.sub_rank, &s.split_child, nullptr);
  // The split runs as an asynchronous job of the parent: it is done when
  // the parent's async state leaves ncclInProgress.
  absl::Status split =
      s.AwaitNccl("ncclCommSplit", r, DeadlineAfter(s.options.timeout));
  if (!split.ok()) {
    absl::Status failed(
        split.code(),
        absl::StrCat(where, split.message(),
                     "; every rank of the communicator must call Split (the "
                     "parent is aborted: create a new one)"));
    s.Abort(failed);
    return failed;
  }
  if (plan.sub_rank < 0) return nullptr;
  auto child = std::make_shared<State>();
  child->rank = plan.sub_rank;
  child->size = static_cast<int>(plan.members.size());
  child->device = s.device;
  child->options = s.options;  // the timeout and the abort signal too
  child->compute_stream = s.compute_stream;
  child->comm = s.split_child;
  s.split_child = nullptr;
  absl::Status made = [&]() -> absl::Status {
    if (child->comm == nullptr) {
      return absl::InternalError(
          "ncclCommSplit completed without a communicator for a rank with a "
          "color");
    }
    TANDEM_RETURN_IF_ERROR(child->AwaitNccl("ncclCommSplit (the child)",
                                            ncclSuccess,
                                            DeadlineAfter(s.options.timeout)));
    int nccl_rank = -1, nccl_size = -1;
    ncclResult_t q = ncclCommUserRank(child->comm, &nccl_rank);
    if (q == ncclSuccess) q = ncclCommCount(child->comm, &nccl_size);
    if (q != ncclSuccess) {
      return NcclError("ncclCommUserRank", q, child->comm, child->On());
    }
    if (nccl_rank != child->rank || nccl_size != child->size) {
      return absl::InternalError(absl::StrCat(
          "NCCL made this rank ", nccl_rank, " of ", nccl_size,
          ", expected sub-rank ", child->rank, " of ", child->size));
    }
    return child->InitResources();
  }();
  if (!made.ok()) {
    absl::Status failed(made.code(), absl::StrCat(where, "color ", plan.color,
                                                  ": ", made.message()));
    child->Abort(failed);
    child->Close();
    return failed;
  }
  return std::unique_ptr<NcclCommunicator>(
      new NcclCommunicator(std::move(child)));
}

}  // namespace tandem::comm
