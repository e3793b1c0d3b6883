#include "comm/nccl/nccl_store_launcher.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/nccl/store_bootstrap.h"
#include "comm/store/launch_store.h"

namespace tandem::comm {

NcclStoreLauncher::NcclStoreLauncher(NcclOptions options, NcclRankSetup setup)
    : options_(std::move(options)),
      setup_(std::move(setup)),
      env_(DetectLaunchEnv()) {}

absl::Status NcclStoreLauncher::CanRun(int world_size) const {
  if (!env_.ok()) return env_.status();
  if (!env_->has_value() || (*env_)->launcher != "torchrun" ||
      (*env_)->master_addr.empty() || (*env_)->master_port == 0) {
    return absl::FailedPreconditionError(
        "nccl one process per GPU needs a tandemrun/torchrun launch (RANK, "
        "WORLD_SIZE, MASTER_ADDR, MASTER_PORT); start the job with tandemrun "
        "--nproc_per_node=<GPUs> -- <binary> --backend=nccl");
  }
  if ((*env_)->world_size != world_size) {
    return absl::FailedPreconditionError(
        absl::StrCat("nccl: the job has WORLD_SIZE=", (*env_)->world_size,
                     ", not ", world_size));
  }
  return absl::OkStatus();
}

std::vector<RankStatus> NcclStoreLauncher::Run(int world_size,
                                               const RankFn& fn) {
  if (absl::Status s = CanRun(world_size); !s.ok()) {
    return {RankStatus{0, s}};
  }
  const LaunchEnv& env = **env_;
  absl::StatusOr<LaunchStore> store =
      ConnectLaunchStore({.master_addr = env.master_addr,
                          .master_port = env.master_port,
                          .rank = env.rank,
                          .agent_store = AgentHostsStore()},
                         options_.timeout);
  if (!store.ok()) return {RankStatus{env.rank, store.status()}};
  const int local_size =
      env.local_world_size > 0 ? env.local_world_size : env.world_size;
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> comm =
      CreateNcclCommunicatorFromStore(
          *store->client,
          {.rank = env.rank,
           .size = env.world_size,
           .local_rank = env.local_rank,
           .local_size = local_size,
           .prefix = absl::StrCat(store->prefix, "tandem/nccl")},
          options_);
  if (!comm.ok()) return {RankStatus{env.rank, comm.status()}};
  absl::Status s = (*comm)->MakeDeviceCurrent();
  if (s.ok() && setup_.prepare) s = setup_.prepare(**comm);
  if (s.ok()) s = fn(env.rank, **comm);
  if (s.ok()) s = (*comm)->Synchronize();
  return {RankStatus{env.rank, s}};
}

}  // namespace tandem::comm
