#include "train/demos/sim_devices_flag.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/sim_device/sim_device.h"

ABSL_FLAG(int64_t, devices, -1,
          "Simulated devices to install (sim:0 .. sim:N-1), 1..1024; default: "
          "the TANDEM_SIM_DEVICES environment variable, else 2.");

namespace tandem::train {

absl::StatusOr<int64_t> InstallDevicesFromFlag(int64_t fallback) {
  int64_t n = absl::GetFlag(FLAGS_devices);
  if (n == -1) {
    TANDEM_ASSIGN_OR_RETURN(n, SimDeviceCountFromEnv(fallback));
  }
  if (n < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--devices must be >= 1, got ", n));
  }
  TANDEM_RETURN_IF_ERROR(InstallSimDevices(n));
  return n;
}

}  // namespace tandem::train
