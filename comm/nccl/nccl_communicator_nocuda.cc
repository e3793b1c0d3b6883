// NcclCommunicator when tandem was built without CUDA (no toolkit with NCCL
// found, or TANDEM_NO_CUDA=1): the API exists so callers compile everywhere;
// every factory fails with a message saying how to get the real thing.
// No NcclCommunicator object can exist in this build.
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "comm/nccl/nccl_communicator.h"

namespace tandem::comm {
namespace {

absl::Status NoCuda(absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(
      what,
      ": tandem was built without CUDA (no CUDA toolkit with NCCL was found "
      "at build time, or TANDEM_NO_CUDA=1 was set), so the NCCL backend is "
      "unavailable; install a CUDA toolkit with NCCL and rebuild, or use the "
      "sim or mpi backend"));
}

}  // namespace

// The state of a communicator that cannot be created in this build.
struct NcclCommunicator::State {
  int rank = 0;
  int size = 1;
  int device = -1;
};

absl::StatusOr<NcclUniqueId> NcclCommunicator::NewUniqueId() {
  return NoCuda("NcclCommunicator::NewUniqueId");
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    const NcclUniqueId&, int rank, int size, int device, const NcclOptions&) {
  return NoCuda(absl::StrCat("NcclCommunicator::Create(rank ", rank, " of ",
                             size, ", device ", device, ")"));
}

// Unreachable (Create never succeeds), but defined so the class links.
NcclCommunicator::NcclCommunicator(std::shared_ptr<State> state)
    : state_(std::move(state)) {}
NcclCommunicator::~NcclCommunicator() = default;
int NcclCommunicator::rank() const { return state_->rank; }
int NcclCommunicator::size() const { return state_->size; }
CommDevice NcclCommunicator::device() const {
  return CommDevice::Cuda(state_->device);
}
void NcclCommunicator::set_compute_stream(CudaStreamHandle) {}
CudaStreamHandle NcclCommunicator::compute_stream() const { return {}; }
CudaStreamHandle NcclCommunicator::communication_stream() const { return {}; }
void NcclCommunicator::set_abort_signal(std::shared_ptr<AbortSignal>) {}
absl::Status NcclCommunicator::MakeDeviceCurrent() const {
  return NoCuda("NcclCommunicator::MakeDeviceCurrent");
}
absl::Status NcclCommunicator::Synchronize() {
  return NoCuda("NcclCommunicator::Synchronize");
}
void NcclCommunicator::Abort(const absl::Status&) {}
bool NcclCommunicator::aborted() const { return false; }
absl::Status NcclCommunicator::abort_cause() const { return absl::OkStatus(); }

// No instance exists without CUDA (Create fails); these only link.
absl::Status NcclCommunicator::CheckOperation(const Operation&) {
  return NoCuda("NCCL");
}
std::unique_ptr<Work> NcclCommunicator::PostAllReduce(BufferView, ReduceOp) {
  return MakeCompletedWork(NoCuda("NCCL"));
}
std::unique_ptr<Work> NcclCommunicator::PostBroadcast(BufferView, int) {
  return MakeCompletedWork(NoCuda("NCCL"));
}
std::unique_ptr<Work> NcclCommunicator::PostAllGather(BufferView, BufferView) {
  return MakeCompletedWork(NoCuda("NCCL"));
}
std::unique_ptr<Work> NcclCommunicator::PostReduceScatter(BufferView,
                                                          BufferView,
                                                          ReduceOp) {
  return MakeCompletedWork(NoCuda("NCCL"));
}
std::unique_ptr<Work> NcclCommunicator::PostSend(BufferView, int) {
  return MakeCompletedWork(NoCuda("NCCL"));
}
std::unique_ptr<Work> NcclCommunicator::PostRecv(BufferView, int) {
  return MakeCompletedWork(NoCuda("NCCL"));
}
std::unique_ptr<Work> NcclCommunicator::PostBarrier() {
  return MakeCompletedWork(NoCuda("NCCL"));
}
absl::StatusOr<std::unique_ptr<Communicator>> NcclCommunicator::Split(int,
                                                                      int) {
  return NoCuda("NCCL Split");
}
absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::SplitNccl(
    int, int) {
  return NoCuda("NCCL Split");
}

absl::Status StreamWaitForWork(Work& work, CudaStreamHandle) {
  if (work.IsCompleted()) return work.Wait(absl::ZeroDuration());
  return NoCuda("StreamWaitForWork");
}

}  // namespace tandem::comm
