// NcclStoreLauncher: the NCCL engine one process per GPU, for jobs started by
// tandemrun or torchrun (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT). Each process is one rank on cuda:LOCAL_RANK
// (modulo the visible GPUs); NCCL's unique id goes through the TCP store
// (store_bootstrap.h), so no MPI is needed.
//
//   auto launcher = std::make_unique<comm::NcclStoreLauncher>(options, setup);
//   launcher->Run(world_size, fn);  // fn(rank, NcclCommunicator&)
//
// Run() hands fn the NcclCommunicator itself (device buffers; the registry's
// direct mode), after making its device current on the calling thread and
// running setup.prepare. One world per Run(); not thread-safe.
#ifndef TANDEM_COMM_NCCL_NCCL_STORE_LAUNCHER_H_
#define TANDEM_COMM_NCCL_NCCL_STORE_LAUNCHER_H_

#include <string>
#include <vector>

#include "comm/launch_env.h"
#include "comm/launcher.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/nccl/nccl_launcher.h"

namespace tandem::comm {

class NcclStoreLauncher : public Launcher {
 public:
  NcclStoreLauncher(NcclOptions options, NcclRankSetup setup);

  std::string name() const override { return "nccl"; }
  // OK for WORLD_SIZE under a torchrun-style launch with the store's
  // address; FailedPrecondition otherwise, saying how to start the job.
  // GPUs are checked by Run (on every rank alike).
  absl::Status CanRun(int world_size) const override;
  std::vector<RankStatus> Run(int world_size, const RankFn& fn) override;

 private:
  NcclOptions options_;
  NcclRankSetup setup_;
  absl::StatusOr<std::optional<LaunchEnv>> env_;
};

}  // namespace tandem::comm

#endif  // TANDEM_COMM_NCCL_NCCL_STORE_LAUNCHER_H_
