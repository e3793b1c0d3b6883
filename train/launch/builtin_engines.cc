#include "train/launch/builtin_engines.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "comm/engine.h"
#include "comm/launch_env.h"
#include "comm/nccl/cuda_probe.h"
#include "tensor/cuda/cuda.h"

namespace tandem::train {

absl::StatusOr<LaunchContext> DetectLaunchContext() {
  LaunchContext here;
  absl::StatusOr<std::optional<comm::LaunchEnv>> env = comm::DetectLaunchEnv();
  if (!env.ok()) return env.status();
  here.launch = *env;
  absl::StatusOr<comm::CudaProbe> probe = comm::ProbeCuda();
  if (probe.ok()) {
    here.gpu_count = probe->device_count;
    here.no_gpu_reason = probe->no_device_reason;
  } else {
    here.no_gpu_reason = std::string(probe.status().message());
  }
  return here;
}

Engine WithTensorComputeStream(Engine engine) {
  if (!engine.make_launcher) return engine;  // Add refuses it, naming it
  engine.make_launcher =
      [make = std::move(engine.make_launcher)](RunOptions options) {
        if (!options.compute_stream) {
          options.compute_stream = cuda::CurrentStream;
        }
        return make(options);
      };
  return engine;
}

LaunchRegistry BuiltinEngines() {
  LaunchRegistry registry;
  for (Engine e : comm::RegisteredEngines()) {
    // Each engine registers a distinct name and every function (their
    // home files; builtin_engines_test): Add cannot fail here.
    absl::Status s = registry.Add(WithTensorComputeStream(std::move(e)));
    (void)s;
  }
  return registry;
}

}  // namespace tandem::train
