// Simulated devices: "sim:0", "sim:1", ... — devices whose memory is host
// memory and whose kernels are the CPU's, but which are devices of their own,
// so that one process without GPUs can run multi-device code (DataParallel,
// Pipe) and test where every byte went:
//
//   TANDEM_RETURN_IF_ERROR(tandem::InstallSimDevices(2));
//   TANDEM_ASSIGN_OR_RETURN(Tensor a, Tensor::Ones({4}, DType::kF32,
//                                                  Device::Sim(0)));
//   TANDEM_ASSIGN_OR_RETURN(Tensor b, a.To(Device::Sim(1)));  // a counted copy
//   tandem::SimCopiedBytes(Device::Sim(0), Device::Sim(1));   // 16
//   Add(a, b);  // InvalidArgument: "Expected all tensors to be on the same
//               // device, but found at least two devices, sim:0 and sim:1"
//
// What plugs in where: InstallSimDevices registers an Allocator and the
// kernels for DeviceType::kSim in the same allocator registry and kernel
// table as CUDA (tensor/allocator.h, tensor/dispatch/op_table.h). Each kernel
// runs the CPU op on host aliases of its inputs (Storage::Alias) and relabels
// the result, with autograd nodes on both sides, so forward and backward values
// are bit for bit those of the CPU; optimizer steps use the CPU's update loops.
//
// Device count: InstallSimDevices(n) makes sim:0 .. sim:n-1 exist (like
// CUDA_VISIBLE_DEVICES, the count is fixed per process by the caller; a
// binary takes it from --devices or the TANDEM_SIM_DEVICES environment
// variable, see SimDeviceCountFromEnv). Allocating on sim:k with k >= n is a
// FailedPrecondition naming the device and the count.
//
// Copies: every copy whose source or destination is a simulated device goes
// through the simulated allocator's CopyBytes (Tensor::To(Device),
// Tensor::CopyFrom) and is counted per (source, destination) pair, including
// same-device copies (autograd's gradient copies). Tests read the counters
// with SimCopiedBytes / SimCopyCounters and clear them with
// ResetSimCopyCounters.
//
// Memory: bytes live on each simulated device (allocations plus the host
// results of kernels run for it, each counted once however many views of it
// exist, while a simulated view of it or a host view made from one lives)
// and the peak since the last ResetSimPeakMemory, like
// torch.cuda.memory_allocated / max_memory_allocated. A result a CPU op
// keeps only for itself (saved by its own backward closure) is not seen, so
// the figures are a lower bound.
//
// Thread-safety: every function here may be called from any thread; the
// counters are guarded by one mutex. The kernels are as thread-safe as the
// CPU ops (tensor/ops.h): different graphs may run on different threads.
#ifndef TANDEM_TENSOR_SIM_DEVICE_SIM_DEVICE_H_
#define TANDEM_TENSOR_SIM_DEVICE_SIM_DEVICE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/device.h"

namespace tandem {

// The environment variable read by SimDeviceCountFromEnv.
inline constexpr char kSimDevicesEnv[] = "TANDEM_SIM_DEVICES";

// Registers the simulated allocator and kernels (once per process) and sets
// the number of simulated devices to `count` (0..1024). Calling it again
// changes the count; tensors already on a device that no longer exists stay
// valid. InvalidArgument for a count out of range.
absl::Status InstallSimDevices(int64_t count);

// The number of simulated devices; 0 before InstallSimDevices.
int64_t SimDeviceCount();

// The count TANDEM_SIM_DEVICES asks for, or `fallback` when it is unset or
// empty. InvalidArgument naming the variable and its value when it is not an
// integer in 0..1024.
absl::StatusOr<int64_t> SimDeviceCountFromEnv(int64_t fallback);

// Bytes and number of copies from `from` to `to` since the last reset.
struct SimCopyCount {
  Device from;
  Device to;
  int64_t bytes = 0;
  int64_t copies = 0;
};
// Every pair with at least one copy, ordered by (from, to) type and index.
std::vector<SimCopyCount> SimCopyCounters();
// Bytes copied from `from` to `to` (0 when none).
int64_t SimCopiedBytes(Device from, Device to);
void ResetSimCopyCounters();

// Bytes live on simulated device `index` now, and the most live at once
// since the last ResetSimPeakMemory (0 for a device that never held any).
int64_t SimMemoryAllocated(int64_t index);
int64_t SimMaxMemoryAllocated(int64_t index);
// Sets every device's peak to its current live bytes.
void ResetSimPeakMemory();

}  // namespace tandem

#endif  // TANDEM_TENSOR_SIM_DEVICE_SIM_DEVICE_H_
