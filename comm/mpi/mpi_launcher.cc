#include "comm/mpi/mpi_launcher.h"

#include "absl/strings/str_cat.h"
#include "comm/launch_env.h"

namespace tandem::comm {

MpiLauncher::MpiLauncher(MpiOptions options) : options_(options) {
  absl::StatusOr<std::optional<LaunchEnv>> env = DetectLaunchEnv();
  if (env.ok() && env->has_value()) launch_size_ = (*env)->world_size;
}

absl::Status MpiLauncher::CanRun(int world_size) const {
  if (world_size == launch_size_) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("the MPI job has ", launch_size_, " rank(s), not ",
                   world_size, "; start it with mpirun -np ", world_size));
}

std::vector<RankStatus> MpiLauncher::Run(int world_size, const RankFn& fn) {
  if (comm_ == nullptr) {
    absl::StatusOr<std::unique_ptr<MpiCommunicator>> created =
        MpiCommunicator::Create(options_);
    if (!created.ok()) return {{0, created.status()}};
    comm_ = *std::move(created);
  }
  if (world_size != comm_->size()) {
    return {
        {comm_->rank(), absl::InvalidArgumentError(absl::StrCat(
                            "MpiLauncher: asked for ", world_size,
                            " ranks but mpirun started ", comm_->size(),
                            "; run the binary with mpirun -np ", world_size))}};
  }
  return {{comm_->rank(), fn(comm_->rank(), *comm_)}};
}

}  // namespace tandem::comm
