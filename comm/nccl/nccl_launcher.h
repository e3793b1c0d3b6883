// NcclLocalLauncher: the NCCL engine on the local GPUs, one thread per GPU,
// behind the comm::Launcher interface. Two ways to hand each rank its
// communicator (NcclRankSetup):
//   * staged (the default): a StagingCommunicator, so host buffers work (they
//     are staged through device memory) and the conformance suite runs
//     unchanged on NCCL;
//   * direct: the NcclCommunicator itself (device buffers), after an
//     optional per-rank `prepare` on the rank's thread, as the launch
//     registry (train/launch/registry.h) runs training.
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

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/launcher.h"
#include "comm/nccl/local_gpus.h"
#include "comm/nccl/nccl_communicator.h"

namespace tandem::comm {

// How NcclLocalLauncher hands each rank its communicator.
struct NcclRankSetup {
  // true: each rank's function gets a StagingCommunicator over its
  // NcclCommunicator; false: the NcclCommunicator.
  bool stage_host_buffers = true;
  // Runs on each rank's thread (its device current) before the rank's
  // function; an error fails that rank instead. Optional.
  std::function<absl::Status(NcclCommunicator&)> prepare;
};

class NcclLocalLauncher : public Launcher {
 public:
  explicit NcclLocalLauncher(NcclOptions options = DefaultOptions(),
                             NcclRankSetup setup = {});
  ~NcclLocalLauncher() override;

  std::string name() const override { return "nccl"; }
  // FailedPrecondition without a GPU (with the probe's reason),
  // InvalidArgument for more ranks than visible GPUs.
  absl::Status CanRun(int world_size) const override;
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
  NcclRankSetup setup_;
  mutable std::once_flag probed_;
  mutable int device_count_ = 0;
  std::unique_ptr<LocalGpuWorld> world_;
};

}  // namespace tandem::comm

#endif  // TANDEM_COMM_NCCL_NCCL_LAUNCHER_H_
