// Internal (CUDA builds only): tandem's ops on CUDA tensors — the
// DeviceOps (tensor/device_ops.h) that Register() installs for
// DeviceType::kCUDA — and the helpers its files share.
//
// Each op checks its arguments like its CPU twin in tensor/ops_*.cc (same
// rules and messages, plus "every input on one device"), enters the device
// (current device + the thread's current stream), allocates outputs and
// scratch through the caching allocator, queues kernels (tensor/cuda/
// kernels.h) or cuBLAS calls (tensor/cuda/internal/gemm.h), and records a
// backward that runs on the device too. Nothing synchronises except
// CrossEntropy's label check. The methods are split over ops_*.cc by topic.
#ifndef TANDEM_TENSOR_CUDA_INTERNAL_CUDA_OPS_H_
#define TANDEM_TENSOR_CUDA_INTERNAL_CUDA_OPS_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/device_ops.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem::cuda::internal {

class CudaOps final : public DeviceOps {
 public:
  absl::StatusOr<Tensor> MatMul(const Tensor& a, const Tensor& b,
                                bool transpose_a, bool transpose_b) override;
  absl::StatusOr<Tensor> Linear(const Tensor& x, const Tensor& weight,
                                const Tensor& bias) override;
  absl::StatusOr<Tensor> Binary(BinaryOp op, const Tensor& a,
                                const Tensor& b) override;
  absl::StatusOr<Tensor> Unary(UnaryOp op, const Tensor& x,
                               double scalar) override;
  absl::StatusOr<Tensor> Softmax(const Tensor& x, int64_t dim,
                                 bool log) override;
  absl::StatusOr<Tensor> SumAll(const Tensor& x, bool mean) override;
  absl::StatusOr<Tensor> SumDim(const Tensor& x, int64_t dim, bool keepdim,
                                bool mean) override;
  absl::StatusOr<Tensor> Argmax(const Tensor& x, int64_t dim) override;
  absl::StatusOr<Tensor> Conv2d(const Tensor& x, const Tensor& weight,
                                const Tensor& bias,
                                const Conv2dOptions& options) override;
  absl::StatusOr<Tensor> MaxPool2d(const Tensor& x,
                                   const MaxPool2dOptions& options) override;
  absl::StatusOr<Tensor> CrossEntropy(const Tensor& logits,
                                      const Tensor& labels) override;
  absl::StatusOr<Tensor> Mse(const Tensor& prediction,
                             const Tensor& target) override;
  absl::Status AddInPlace(const Tensor& dst, const Tensor& src,
                          double alpha) override;
  absl::Status ScaleInPlace(const Tensor& dst, double factor) override;
  absl::Status FillInPlace(const Tensor& dst, double value) override;
  absl::Status Convert(const Tensor& src, const Tensor& dst) override;
  absl::Status SgdStep(const Tensor& param, const Tensor& grad,
                       const Tensor& buffer, const SgdStepArgs& args) override;
  absl::Status AdamWStep(const Tensor& param, const Tensor& grad,
                         const Tensor& exp_avg, const Tensor& exp_avg_sq,
                         const Tensor& max_exp_avg_sq,
                         const AdamWStepArgs& args) override;
};

// ---- Helpers for ops_*.cc.

// Defined and on `device`; otherwise an error naming `op` and `arg` (and,
// for a tensor on another device, how to move it).
absl::Status CheckOn(const Tensor& t, Device device, const char* op,
                     const char* arg);
// CheckOn and a floating dtype the CUDA kernels take (f32, f64, f16, bf16).
absl::Status CheckFloatOn(const Tensor& t, Device device, const char* op,
                          const char* arg);
// A gradient handed to a backward closure is on the op's device.
absl::Status CheckGrad(const Tensor& g, Device device, const char* op);

// Element `offset` of t's data, as a byte pointer (for per-image slices).
inline char* ElementPtr(const Tensor& t, int64_t offset) {
  return static_cast<char*>(t.raw_data()) + offset * DTypeSize(t.dtype());
}

// kernels::kReduceScratch doubles on `device`.
absl::StatusOr<Tensor> ReduceScratch(Device device);

}  // namespace tandem::cuda::internal

#endif  // TANDEM_TENSOR_CUDA_INTERNAL_CUDA_OPS_H_
