// Pooling's CUDA kernels in the kernel table: the ops' definitions
// (tensor/ops/pool.cc) checked the arguments, resolved the geometry and
// allocated the outputs on the device, and record autograd themselves;
// these queue pool.cu's kernels on the thread's current stream.
#include <cuda_runtime.h>

#include <cstdint>

#include "base/status_macros.h"
#include "tensor/cuda/internal/kernels.h"
#include "tensor/cuda/internal/runtime_internal.h"
#include "tensor/cuda/internal/status.h"
#include "tensor/dispatch/op_kernels.h"

namespace tandem::cuda::internal {
namespace {

// x is [N, C, H, W] (the forward's input, or the gradient's shape).
kernels::PoolGeometry Geometry(const Pool2dArgs& a, const Tensor& x,
                               const Tensor& y) {
  kernels::PoolGeometry g;
  g.mode = a.mode == PoolMode::kMax ? 0 : a.mode == PoolMode::kAvg ? 1 : 2;
  g.planes = x.dim(0) * x.dim(1);
  g.height = x.dim(2);
  g.width = x.dim(3);
  g.out_h = y.dim(2);
  g.out_w = y.dim(3);
  g.kernel_h = a.kernel_h;
  g.kernel_w = a.kernel_w;
  g.stride_h = a.stride_h;
  g.stride_w = a.stride_w;
  g.pad_h = a.pad_h;
  g.pad_w = a.pad_w;
  g.count_include_pad = a.count_include_pad;
  return g;
}

absl::Status CudaPool2d(const Tensor& x, const Tensor& y, const Tensor& argmax,
                        const Pool2dArgs& args) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(y.device().index()));
  int64_t* indices =
      args.mode == PoolMode::kMax ? argmax.data<int64_t>() : nullptr;
  TANDEM_CUDA_RETURN_IF_ERROR(
      kernels::PoolForward(x.dtype(), Geometry(args, x, y), x.raw_data(),
                           y.raw_data(), indices, stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(Pool2dKernels(), DeviceType::kCUDA, CudaPool2d);

absl::Status CudaPool2dBackward(const Tensor& g, const Tensor& argmax,
                                const Tensor& gx, const Pool2dArgs& args) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(gx.device().index()));
  const int64_t* indices =
      args.mode == PoolMode::kMax ? argmax.data<int64_t>() : nullptr;
  TANDEM_CUDA_RETURN_IF_ERROR(
      kernels::PoolBackward(g.dtype(), Geometry(args, gx, g), g.raw_data(),
                            indices, gx.raw_data(), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(Pool2dBackwardKernels(), DeviceType::kCUDA,
                       CudaPool2dBackward);

}  // namespace
}  // namespace tandem::cuda::internal
