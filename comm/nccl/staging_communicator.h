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
// For each operation it checks the host arguments with the shared
// validators (so errors read exactly as on sim and MPI), allocates device
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
#include "comm/nccl/nccl_communicator.h"
#include "comm/types.h"
#include "comm/work.h"

namespace tandem::comm {

class StagingCommunicator final : public Communicator {
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

  [[nodiscard]] std::unique_ptr<Work> AllReduce(BufferView buf,
                                                ReduceOp op) override;
  [[nodiscard]] std::unique_ptr<Work> Broadcast(BufferView buf,
                                                int root) override;
  [[nodiscard]] std::unique_ptr<Work> AllGather(BufferView send,
                                                BufferView recv) override;
  [[nodiscard]] std::unique_ptr<Work> ReduceScatter(BufferView send,
                                                    BufferView recv,
                                                    ReduceOp op) override;
  [[nodiscard]] std::unique_ptr<Work> Send(BufferView buf, int peer) override;
  [[nodiscard]] std::unique_ptr<Work> Recv(BufferView buf, int peer) override;
  absl::Status Barrier() override { return device_->Barrier(); }
  // Splits the device communicator (NcclCommunicator::SplitNccl) and wraps
  // the child in a StagingCommunicator that owns it; nullptr for kNoColor.
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color,
                                                      int key) override;

 private:
  explicit StagingCommunicator(std::unique_ptr<NcclCommunicator> owned);

  std::unique_ptr<NcclCommunicator> owned_;  // a split child; else null
  NcclCommunicator* device_;
};

}  // namespace tandem::comm

#endif  // TANDEM_COMM_NCCL_STAGING_COMMUNICATOR_H_
