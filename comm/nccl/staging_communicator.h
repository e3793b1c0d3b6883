// StagingCommunicator: a Communicator over host buffers that runs every
// operation on a device communicator (NCCL) by staging the data through
// device memory. It lets host-buffer code, the conformance suite above all,
// run unchanged on GPUs:
//
//   RunOnLocalGpus(4, [&](int rank, NcclCommunicator& nccl) {
//     StagingCommunicator host(nccl);
//     return conformance_rank_fn(rank, host);   // HostView buffers
//   });
//
// It sits behind the engines' front (comm/front.h), so every operation's
// host arguments are checked as on sim and MPI before it allocates device
// buffers, copies every host buffer in (outputs too, so untouched elements
// keep their host value), issues the operation on the device communicator
// with the same aliasing (an in-place AllGather or ReduceScatter stays in
// place on the device), and, when the Work completes, copies the outputs
// back. It also copies every input back and fails if the device operation
// modified it. Slow (blocking copies, an allocation per buffer): for tests
// and tools, not for training.
//
// The Works it returns own their device buffers; the buffers are freed on
// the device communicator's communication stream, after the operation. The
// host buffers follow the contract: untouched by the caller until the Work
// completes. Not thread-safe, like any Communicator.
#ifndef TANDEM_COMM_NCCL_STAGING_COMMUNICATOR_H_
#define TANDEM_COMM_NCCL_STAGING_COMMUNICATOR_H_

#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "comm/front.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/types.h"
#include "comm/work.h"

namespace tandem::comm {

class StagingCommunicator final : public PerOperationFront {
 public:
  // `device_comm` must outlive this object and every Work it returns.
  explicit StagingCommunicator(NcclCommunicator& device_comm);

  int rank() const override { return device_->rank(); }
  int size() const override { return device_->size(); }
  std::string_view backend() const override { return "nccl"; }
  // The device communicator's GPU: the rank works there, even though this
  // wrapper also accepts host buffers.
  CommDevice device() const override { return device_->device(); }
  LineSink& output() const override { return device_->output(); }

  // Splits the device communicator (NcclCommunicator::SplitNccl) and wraps
  // the child in a StagingCommunicator that owns it; nullptr for kNoColor.
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color,
                                                      int key) override;

 protected:
  // Host buffers (the front's memory-space check), named so in its errors.
  std::string_view engine_name() const override {
    return "nccl (host staging)";
  }
  std::unique_ptr<Work> PostAllReduce(BufferView buf, ReduceOp op) override;
  std::unique_ptr<Work> PostBroadcast(BufferView buf, int root) override;
  std::unique_ptr<Work> PostAllGather(BufferView send,
                                      BufferView recv) override;
  std::unique_ptr<Work> PostReduceScatter(BufferView send, BufferView recv,
                                          ReduceOp op) override;
  std::unique_ptr<Work> PostSend(BufferView buf, int peer) override;
  std::unique_ptr<Work> PostRecv(BufferView buf, int peer) override;
  // The device communicator's barrier, waited here.
  std::unique_ptr<Work> PostBarrier() override;

 private:
  explicit StagingCommunicator(std::unique_ptr<NcclCommunicator> owned);

  std::unique_ptr<NcclCommunicator> owned_;  // a split child; else null
  NcclCommunicator* device_;
};

}  // namespace tandem::comm

#endif  // TANDEM_COMM_NCCL_STAGING_COMMUNICATOR_H_
