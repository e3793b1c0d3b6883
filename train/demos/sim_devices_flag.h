// The demos' --devices flag: how many simulated devices to install.
#ifndef TANDEM_TRAIN_DEMOS_SIM_DEVICES_FLAG_H_
#define TANDEM_TRAIN_DEMOS_SIM_DEVICES_FLAG_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace tandem::train {

// Installs --devices simulated devices (when --devices is not given:
// TANDEM_SIM_DEVICES, else `fallback`) and returns the count. An error
// (bad count or environment value) is a usage error.
absl::StatusOr<int64_t> InstallDevicesFromFlag(int64_t fallback);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DEMOS_SIM_DEVICES_FLAG_H_
