// Internal to tensor/sim_device: how the simulated kernels (sim_ops.cc) reach
// the accounting in sim_device.cc.
#ifndef TANDEM_TENSOR_SIM_DEVICE_SIM_INTERNAL_H_
#define TANDEM_TENSOR_SIM_DEVICE_SIM_INTERNAL_H_

#include "absl/status/status.h"
#include "tensor/device.h"
#include "tensor/tensor.h"

namespace tandem::sim_internal {

// The same elements as `t` (same offset, shape, dtype), labelled `device`:
// a host (CPU) view of a simulated tensor, or a simulated view of a host
// kernel's result. Shares memory, drops autograd. A view of a root storage
// already on `device` is plain; otherwise it is a Storage::Alias, and a
// simulated alias is charged to its device's live bytes once per root.
// `t` must be defined.
Tensor Relabel(const Tensor& t, Device device);

// Registers the kernels of DeviceType::kSim in the kernel table
// (sim_ops.cc); InstallSimDevices calls it once.
absl::Status RegisterSimKernels();

}  // namespace tandem::sim_internal

#endif  // TANDEM_TENSOR_SIM_DEVICE_SIM_INTERNAL_H_
