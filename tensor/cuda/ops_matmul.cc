// CUDA ops: MatMul and Linear on cuBLAS (tensor/cuda/internal/gemm.h). Backward
// GEMMs write straight into the gradient buffers (beta = 1 to accumulate,
// 0 to overwrite), as on the CPU.
#include <cuda_runtime.h>

#include <cstdint>

#include "base/status_macros.h"
#include "tensor/autograd.h"
#include "tensor/cuda/internal/cuda_ops.h"
#include "tensor/cuda/internal/gemm.h"
#include "tensor/cuda/internal/kernels.h"
#include "tensor/cuda/internal/runtime_internal.h"
#include "tensor/cuda/internal/status.h"
#include "tensor/ops_internal.h"

namespace tandem::cuda::internal {
namespace {

// C (+)= op(A) op(B) into a gradient buffer.
absl::Status GemmInto(int device, cudaStream_t stream,
                      const GradSink::Buffer& c, bool ta, bool tb, int64_t m,
                      int64_t n, int64_t k, const Tensor& a, const Tensor& b) {
  return Gemm(device, stream, c.tensor.dtype(), ta, tb, m, n, k, 1.0,
              a.raw_data(), b.raw_data(), c.accumulate ? 1.0 : 0.0,
              c.tensor.raw_data());
}

// The kernels of tensor/op_kernels.h, on arguments their ops checked.
absl::StatusOr<Tensor> CudaMatMul(const Tensor& a, const Tensor& b,
                                  bool transpose_a, bool transpose_b) {
  const Device device = a.device();
  const int64_t m = transpose_a ? a.dim(1) : a.dim(0);
  const int64_t k = transpose_a ? a.dim(0) : a.dim(1);
  const int64_t n = transpose_b ? b.dim(0) : b.dim(1);
  const int d = device.index();
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(d));
  TANDEM_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty({m, n}, a.dtype(), device));
  TANDEM_RETURN_IF_ERROR(Gemm(d, stream, a.dtype(), transpose_a, transpose_b, m,
                              n, k, 1.0, a.raw_data(), b.raw_data(), 0.0,
                              out.raw_data()));
  if (ShouldRecord({a, b})) {
    const bool ta = transpose_a, tb = transpose_b;
    RecordOp(
        "MatMul", out, {a, b},
        [sa = a.Detach(), sb = b.Detach(), ta, tb, m, n, k, device](
            const Tensor& g, GradSink& sink) -> absl::Status {
          TANDEM_RETURN_IF_ERROR(CheckGrad(g, device, "MatMul"));
          const int d = device.index();
          TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(d));
          // C = op(A) op(B), dC = g [m, n].
          if (sink.needs(0)) {
            TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer da, sink.GetBuffer(0));
            if (!ta) {  // dA [m,k] = g op(B)^T
              TANDEM_RETURN_IF_ERROR(
                  GemmInto(d, stream, da, false, !tb, m, k, n, g, sb));
            } else {  // dA [k,m] = op(B) g^T
              TANDEM_RETURN_IF_ERROR(
                  GemmInto(d, stream, da, tb, true, k, m, n, sb, g));
            }
          }
          if (sink.needs(1)) {
            TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer db, sink.GetBuffer(1));
            if (!tb) {  // dB [k,n] = op(A)^T g
              TANDEM_RETURN_IF_ERROR(
                  GemmInto(d, stream, db, !ta, false, k, n, m, sa, g));
            } else {  // dB [n,k] = g^T op(A)
              TANDEM_RETURN_IF_ERROR(
                  GemmInto(d, stream, db, true, ta, n, k, m, g, sa));
            }
          }
          return absl::OkStatus();
        });
  }
  return out;
}

TANDEM_REGISTER_KERNEL(MatMulKernels(), DeviceType::kCUDA, CudaMatMul);

absl::StatusOr<Tensor> CudaLinear(const Tensor& x, const Tensor& weight,
                                  const Tensor& bias) {
  const Device device = x.device();
  const int64_t batch = x.dim(0), in = x.dim(1), out_features = weight.dim(0);
  const int d = device.index();
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(d));
  TANDEM_ASSIGN_OR_RETURN(
      Tensor y, Tensor::Empty({batch, out_features}, x.dtype(), device));
  // y = bias rows, then y += x W^T (beta = 1); or y = x W^T (beta = 0).
  if (bias.defined()) {
    TANDEM_CUDA_RETURN_IF_ERROR(
        kernels::BroadcastMiddle(x.dtype(), bias.raw_data(), batch,
                                 out_features, 1, y.raw_data(), stream));
  }
  TANDEM_RETURN_IF_ERROR(Gemm(d, stream, x.dtype(), false, true, batch,
                              out_features, in, 1.0, x.raw_data(),
                              weight.raw_data(), bias.defined() ? 1.0 : 0.0,
                              y.raw_data()));
  if (ShouldRecord({x, weight, bias})) {
    // Only what backward reads: x for dW, W for dx.
    Tensor sx = weight.requires_grad() ? x.Detach() : Tensor();
    Tensor sw = x.requires_grad() ? weight.Detach() : Tensor();
    RecordOp(
        "Linear", y, {x, weight, bias},
        [sx, sw, batch, in, out_features, device](
            const Tensor& g, GradSink& sink) -> absl::Status {
          TANDEM_RETURN_IF_ERROR(CheckGrad(g, device, "Linear"));
          const int d = device.index();
          TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(d));
          if (sink.needs(1)) {  // dW [out, in] = g^T x
            TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer dw, sink.GetBuffer(1));
            TANDEM_RETURN_IF_ERROR(GemmInto(d, stream, dw, true, false,
                                            out_features, in, batch, g, sx));
          }
          if (sink.needs(2)) {  // db [out] = column sums of g
            TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer db, sink.GetBuffer(2));
            TANDEM_CUDA_RETURN_IF_ERROR(kernels::SumOuterInner(
                g.dtype(), g.raw_data(), batch, out_features, 1,
                db.tensor.raw_data(), db.accumulate, stream));
          }
          if (sink.needs(0)) {  // dx [batch, in] = g W
            TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer dx, sink.GetBuffer(0));
            TANDEM_RETURN_IF_ERROR(GemmInto(d, stream, dx, false, false, batch,
                                            in, out_features, g, sw));
          }
          return absl::OkStatus();
        });
  }
  return y;
}
TANDEM_REGISTER_KERNEL(LinearKernels(), DeviceType::kCUDA, CudaLinear);

}  // namespace
}  // namespace tandem::cuda::internal
