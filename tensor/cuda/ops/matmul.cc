// CUDA kernels of MatMul and Linear on cuBLAS (tensor/cuda/internal/gemm.h).
// The MatMul row is also every GEMM of their backward (ops_matmul.cc), which
// writes straight into the gradient buffers (beta = 1 to accumulate, 0 to
// overwrite), as on the CPU.
#include <cuda_runtime.h>

#include <cstdint>

#include "base/status_macros.h"
#include "tensor/cuda/internal/cuda_ops.h"
#include "tensor/cuda/internal/gemm.h"
#include "tensor/cuda/internal/kernels.h"
#include "tensor/cuda/internal/runtime_internal.h"
#include "tensor/cuda/internal/status.h"
#include "tensor/ops/internal.h"

namespace tandem::cuda::internal {
namespace {

// The kernels of tensor/dispatch/op_kernels.h, on arguments their ops checked.
absl::Status CudaMatMul(const Tensor& a, const Tensor& b, bool transpose_a,
                        bool transpose_b, const GradOut& c) {
  const int64_t m = c.tensor.dim(0), n = c.tensor.dim(1);
  const int64_t k = transpose_a ? a.dim(0) : a.dim(1);
  const int d = c.tensor.device().index();
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(d));
  return Gemm(d, stream, c.tensor.dtype(), transpose_a, transpose_b, m, n, k,
              1.0, a.raw_data(), b.raw_data(), c.accumulate ? 1.0 : 0.0,
              c.tensor.raw_data());
}
TANDEM_REGISTER_KERNEL(MatMulKernels(), DeviceType::kCUDA, CudaMatMul);

absl::Status CudaLinear(const Tensor& x, const Tensor& weight,
                        const Tensor& bias, const Tensor& y) {
  const int64_t batch = x.dim(0), in = x.dim(1), out_features = weight.dim(0);
  const int d = x.device().index();
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(d));
  // y = bias rows, then y += x W^T (beta = 1); or y = x W^T (beta = 0).
  if (bias.defined()) {
    TANDEM_CUDA_RETURN_IF_ERROR(
        kernels::BroadcastMiddle(x.dtype(), bias.raw_data(), batch,
                                 out_features, 1, y.raw_data(), stream));
  }
  return Gemm(d, stream, x.dtype(), false, true, batch, out_features, in, 1.0,
              x.raw_data(), weight.raw_data(), bias.defined() ? 1.0 : 0.0,
              y.raw_data());
}
TANDEM_REGISTER_KERNEL(LinearKernels(), DeviceType::kCUDA, CudaLinear);

absl::Status CudaColumnSums(const Tensor& g, const GradOut& out) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(g.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(
      kernels::SumOuterInner(g.dtype(), g.raw_data(), g.dim(0), g.dim(1), 1,
                             out.tensor.raw_data(), out.accumulate, stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(ColumnSumsKernels(), DeviceType::kCUDA, CudaColumnSums);

}  // namespace
}  // namespace tandem::cuda::internal
