// NcclLocalLauncher: runs the Communicator conformance suite
// (comm/conformance) on the local GPUs, one thread per GPU, through
// StagingCommunicator (the suite's host buffers are staged through device
// memory, so every check runs unchanged on NCCL).
//
//   TANDEM_INSTANTIATE_COMM_CONFORMANCE(
//       Nccl, std::make_shared<tandem::comm::NcclLocalLauncher>(),
//       tandem::comm::conformance::SuiteOptions());
//
// World sizes above the number of visible GPUs are skipped (all of them on a
// machine without GPUs). The communicators of one world size are kept
// across tests (NCCL's init is slow); a world that a failing test aborted is
// replaced by a fresh one. Call Release() before exit (see below).
#ifndef TANDEM_COMM_NCCL_NCCL_LAUNCHER_H_
#define TANDEM_COMM_NCCL_NCCL_LAUNCHER_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/launcher.h"
#include "comm/nccl/local_gpus.h"
#include "comm/nccl/nccl_communicator.h"

namespace tandem::comm {

class NcclLocalLauncher : public Launcher {
 public:
  explicit NcclLocalLauncher(NcclOptions options = DefaultOptions());
  ~NcclLocalLauncher() override;

  std::string name() const override { return "nccl"; }
  bool SupportsWorldSize(int world_size) const override;
  std::vector<RankStatus> Run(int world_size, const RankFn& fn) override;

  // Destroys the kept communicators now. Call it before the process exits
  // (a gtest Environment's TearDown): NCCL must not be finalised from static
  // destructors, after the CUDA runtime may have shut down.
  void Release() { world_.reset(); }

  // One minute per operation: far above a 16 MiB collective on any GPU,
  // below the conformance watchdog.
  static NcclOptions DefaultOptions();

 private:
  int DeviceCount() const;

  NcclOptions options_;
  mutable std::once_flag probed_;
  mutable int device_count_ = 0;
  std::unique_ptr<LocalGpuWorld> world_;
};

}  // namespace tandem::comm

#endif  // TANDEM_COMM_NCCL_NCCL_LAUNCHER_H_
