// In-place updates outside autograd: AddInPlace, ScaleInPlace, FillInPlace
// (their one argument check each, and their CPU kernels). The backward
// engine accumulates gradients with AddInPlace.
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/convert.h"
#include "tensor/dispatch/op_kernels.h"
#include "tensor/ops.h"
#include "tensor/ops/internal.h"

namespace tandem {

using internal::Describe;

namespace {

template <typename T>
void AddLowPrecisionTyped(T* d, const T* s, int64_t n, float alpha) {
  for (int64_t i = 0; i < n; ++i) {
    d[i] = T(static_cast<float>(d[i]) + alpha * static_cast<float>(s[i]));
  }
}

absl::Status AddLowPrecision(const Tensor& dst, const Tensor& src,
                             double alpha) {
  const float a = static_cast<float>(alpha);
  if (dst.dtype() == DType::kBF16) {
    AddLowPrecisionTyped(dst.data<BFloat16>(), src.data<BFloat16>(),
                         dst.numel(), a);
  } else {
    AddLowPrecisionTyped(dst.data<Half>(), src.data<Half>(), dst.numel(), a);
  }
  return absl::OkStatus();
}

absl::Status CpuAddInPlace(const Tensor& dst, const Tensor& src, double alpha) {
  if (dst.dtype() == DType::kBF16 || dst.dtype() == DType::kF16) {
    // f16/bf16 (autograd accumulating low-precision gradients): each sum in
    // float, rounded once, as PyTorch's CPU kernels do.
    return AddLowPrecision(dst, src, alpha);
  }
  internal::DispatchFloat(dst.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* d = dst.data<T>();
    const T* s = src.data<T>();
    const int64_t n = dst.numel();
    if (alpha == 1.0) {
      for (int64_t i = 0; i < n; ++i) d[i] += s[i];
    } else {
      const T a = static_cast<T>(alpha);
      for (int64_t i = 0; i < n; ++i) d[i] += a * s[i];
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(AddInPlaceKernels(), DeviceType::kCPU, CpuAddInPlace);

absl::Status CpuScaleInPlace(const Tensor& dst, double factor) {
  // The CPU kernel has no 16-bit loop (CUDA's has).
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(dst, "ScaleInPlace", "dst"));
  internal::DispatchFloat(dst.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* d = dst.data<T>();
    const T f = static_cast<T>(factor);
    // numel() is out of line: read it once so the loop vectorises (DDP runs
    // this over every gradient, every step).
    const int64_t n = dst.numel();
    for (int64_t i = 0; i < n; ++i) d[i] *= f;
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(ScaleInPlaceKernels(), DeviceType::kCPU,
                       CpuScaleInPlace);

absl::Status CpuFillInPlace(const Tensor& dst, double value) {
  internal::FillElements(dst.raw_data(), dst.dtype(), dst.numel(), value);
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(FillInPlaceKernels(), DeviceType::kCPU, CpuFillInPlace);

}  // namespace

absl::Status AddInPlace(const Tensor& dst, const Tensor& src, double alpha) {
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice("AddInPlace", dst, src));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloating(dst, "AddInPlace", "dst"));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloating(src, "AddInPlace", "src"));
  TANDEM_RETURN_IF_ERROR(internal::CheckSameDType(dst, src, "AddInPlace"));
  if (dst.numel() != src.numel()) {
    return absl::InvalidArgumentError(
        absl::StrCat("AddInPlace: dst ", Describe(dst), " and src ",
                     Describe(src), " have different element counts"));
  }
  TANDEM_ASSIGN_OR_RETURN(AddInPlaceKernel * kernel,
                          AddInPlaceKernels().For(device));
  return kernel(dst, src, alpha);
}

absl::Status ScaleInPlace(const Tensor& dst, double factor) {
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice("ScaleInPlace", dst));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloating(dst, "ScaleInPlace", "dst"));
  TANDEM_ASSIGN_OR_RETURN(ScaleInPlaceKernel * kernel,
                          ScaleInPlaceKernels().For(device));
  return kernel(dst, factor);
}

absl::Status FillInPlace(const Tensor& dst, double value) {
  if (!dst.defined()) {
    return absl::InvalidArgumentError(
        "FillInPlace: `dst` is an undefined tensor");
  }
  TANDEM_ASSIGN_OR_RETURN(FillInPlaceKernel * kernel,
                          FillInPlaceKernels().For(dst.device()));
  return kernel(dst, value);
}

}  // namespace tandem
