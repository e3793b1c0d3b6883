// Helpers for the launch registry's tests: a fake launch environment and run
// options with a timeout.
#ifndef TANDEM_TRAIN_LAUNCH_TEST_UTIL_H_
#define TANDEM_TRAIN_LAUNCH_TEST_UTIL_H_

#include <string>

#include "absl/time/time.h"
#include "comm/launch_env.h"
#include "train/launch/registry.h"

namespace tandem::train {

// A process that `launcher` ("torchrun", "OpenMPI", "Slurm") started as
// `rank` of `world_size`, on a machine without GPUs.
inline LaunchContext LaunchedBy(const std::string& launcher, int world_size,
                                int rank) {
  LaunchContext here;
  here.no_gpu_reason = "no CUDA driver";
  comm::LaunchEnv env;
  env.rank = rank;
  env.local_rank = rank;
  env.world_size = world_size;
  env.launcher = launcher;
  if (launcher == "torchrun") {  // as tandemrun and torchrun set them
    env.master_addr = "127.0.0.1";
    env.master_port = 29500;
  }
  here.launch = env;
  return here;
}

inline RunOptions WithTimeout(absl::Duration timeout) {
  RunOptions options;
  options.timeout = timeout;
  return options;
}

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LAUNCH_TEST_UTIL_H_
