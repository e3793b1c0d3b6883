// Internal (CUDA builds only): the helpers shared by the CUDA kernels of
// tandem's ops (tensor/cuda/ops/), which register themselves in the kernel
// table (tensor/dispatch/op_table.h, tensor/dispatch/op_kernels.h) for
// DeviceType::kCUDA.
//
// Each op's definition (tensor/ops/) checked the arguments once for
// every device (one device, dtypes, shapes), allocated the outputs and
// records the autograd node, whose backward calls the backward rows. A CUDA
// kernel enters the device (current device + the thread's current stream),
// allocates scratch through the caching allocator and queues kernels
// (tensor/cuda/kernels.h) or cuBLAS calls (tensor/cuda/internal/gemm.h).
// Nothing synchronises except CrossEntropy's label check. The kernels are
// split over tensor/cuda/ops/ by topic.
#ifndef TANDEM_TENSOR_CUDA_INTERNAL_CUDA_OPS_H_
#define TANDEM_TENSOR_CUDA_INTERNAL_CUDA_OPS_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/dispatch/op_kernels.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem::cuda::internal {

// ---- Helpers for tensor/cuda/ops/.

// Element `offset` of t's data, as a byte pointer (for per-image slices).
inline char* ElementPtr(const Tensor& t, int64_t offset) {
  return static_cast<char*>(t.raw_data()) + offset * DTypeSize(t.dtype());
}

// kernels::kReduceScratch doubles on `device`.
absl::StatusOr<Tensor> ReduceScratch(Device device);

}  // namespace tandem::cuda::internal

#endif  // TANDEM_TENSOR_CUDA_INTERNAL_CUDA_OPS_H_
