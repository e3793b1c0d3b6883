// CUDA ops: CrossEntropy (from logits) and Mse, mean reduction.
//
// CrossEntropy checks its labels on the device: the forward kernel records
// the first row whose label is outside [0, C) (and never reads out of
// bounds), and the op copies that one index back before returning — the
// only host synchronisation in the CUDA ops, so a bad label is an
// InvalidArgument naming its index and value, exactly as on the CPU.
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "base/status_macros.h"
#include "tensor/cuda/internal/cuda_ops.h"
#include "tensor/cuda/internal/kernels.h"
#include "tensor/cuda/internal/runtime_internal.h"
#include "tensor/cuda/internal/status.h"
#include "tensor/ops/internal.h"

namespace tandem::cuda::internal {
namespace {

// The label at `index`, copied to the host (for the error message).
absl::StatusOr<int64_t> LabelAt(const Tensor& labels, int64_t index) {
  TANDEM_ASSIGN_OR_RETURN(Tensor one, labels.Detach().View(index, {1}));
  TANDEM_ASSIGN_OR_RETURN(Tensor host, one.To(Device::CPU()));
  return host.data<int64_t>()[0];
}

// The kernels of tensor/dispatch/op_kernels.h, on arguments their ops checked.
// CrossEntropy: `saved` holds the probabilities; rows whose label is
// options.ignore_index add nothing and get a zero gradient; the count of
// the others is summed on the device and read back with the label check
// (kMean divides by it; 0 gives NaN, as PyTorch).
absl::Status CudaCrossEntropy(const Tensor& logits, const Tensor& labels,
                              const CrossEntropyOptions& options,
                              const Tensor& loss, const Tensor& probs,
                              int64_t* counted_out) {
  const Device device = logits.device();
  const int64_t n = logits.dim(0), c = logits.dim(1);
  const DType dtype = logits.dtype();
  const int64_t ignore = options.ignore_index;
  const bool mean = options.reduction == LossReduction::kMean;
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(device.index()));
  TANDEM_ASSIGN_OR_RETURN(Tensor row_loss,
                          Tensor::Empty({n}, DType::kF64, device));
  TANDEM_ASSIGN_OR_RETURN(Tensor row_counted,
                          Tensor::Empty({n}, DType::kF64, device));
  TANDEM_ASSIGN_OR_RETURN(Tensor counted_dev,
                          Tensor::Empty({}, DType::kF64, device));
  TANDEM_ASSIGN_OR_RETURN(Tensor first_bad,
                          Tensor::Empty({1}, DType::kI64, device));
  TANDEM_ASSIGN_OR_RETURN(Tensor scratch, ReduceScratch(device));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::Fill(first_bad.raw_data(), 1, 8,
                                            static_cast<uint64_t>(n), stream));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::CrossEntropyForward(
      dtype, logits.raw_data(), labels.data<int64_t>(), n, c, ignore,
      probs.raw_data(), row_loss.data<double>(), row_counted.data<double>(),
      first_bad.data<int64_t>(), stream));
  TANDEM_CUDA_RETURN_IF_ERROR(
      kernels::SumAll(DType::kF64, row_counted.raw_data(), n, 1.0, DType::kF64,
                      counted_dev.raw_data(), /*accumulate=*/false,
                      scratch.data<double>(), stream));
  // The label check: one int64 back to the host (waits for the kernels).
  TANDEM_ASSIGN_OR_RETURN(Tensor bad_host, first_bad.To(Device::CPU()));
  const int64_t bad = bad_host.data<int64_t>()[0];
  if (bad < n) {
    TANDEM_ASSIGN_OR_RETURN(int64_t label, LabelAt(labels, bad));
    return ::tandem::internal::LabelOutOfRange(logits, bad, label);
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor counted_host, counted_dev.To(Device::CPU()));
  const double counted = counted_host.data<double>()[0];
  *counted_out = static_cast<int64_t>(counted);  // exact: counted <= n
  // loss = (sum of row losses in double) / count (mean) or / 1 (sum).
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::SumAll(
      DType::kF64, row_loss.raw_data(), n, mean ? counted : 1.0, dtype,
      loss.raw_data(), /*accumulate=*/false, scratch.data<double>(), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(CrossEntropyKernels(), DeviceType::kCUDA,
                       CudaCrossEntropy);

absl::Status CudaCrossEntropyBackward(const Tensor& g, const Tensor& probs,
                                      const Tensor& labels,
                                      const CrossEntropyOptions& options,
                                      int64_t counted, const GradOut& out) {
  const int64_t n = probs.dim(0), c = probs.dim(1);
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(g.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::CrossEntropyBackward(
      g.dtype(), probs.raw_data(), labels.data<int64_t>(), g.raw_data(), n, c,
      options.ignore_index, options.reduction == LossReduction::kMean,
      static_cast<double>(counted), out.tensor.raw_data(), out.accumulate,
      stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(CrossEntropyBackwardKernels(), DeviceType::kCUDA,
                       CudaCrossEntropyBackward);

absl::Status CudaMse(const Tensor& prediction, const Tensor& target,
                     const Tensor& loss) {
  const Device device = prediction.device();
  const int64_t n = prediction.numel();
  const DType dtype = prediction.dtype();
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(device.index()));
  TANDEM_ASSIGN_OR_RETURN(Tensor sq, Tensor::Empty({n}, DType::kF64, device));
  TANDEM_ASSIGN_OR_RETURN(Tensor scratch, ReduceScratch(device));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::SquaredDiff(dtype, prediction.raw_data(),
                                                   target.raw_data(), n,
                                                   sq.data<double>(), stream));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::SumAll(
      DType::kF64, sq.raw_data(), n, static_cast<double>(n), dtype,
      loss.raw_data(), /*accumulate=*/false, scratch.data<double>(), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(MseKernels(), DeviceType::kCUDA, CudaMse);

absl::Status CudaMseBackward(const Tensor& g, const Tensor& prediction,
                             const Tensor& target, bool negate,
                             const GradOut& out) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(g.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(
      kernels::MseBackward(g.dtype(), prediction.raw_data(), target.raw_data(),
                           g.raw_data(), prediction.numel(), negate,
                           out.tensor.raw_data(), out.accumulate, stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(MseBackwardKernels(), DeviceType::kCUDA,
                       CudaMseBackward);

}  // namespace
}  // namespace tandem::cuda::internal
