// In-place updates outside autograd: AddInPlace, ScaleInPlace, FillInPlace.
// The backward engine accumulates gradients with AddInPlace.
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/convert.h"
#include "tensor/device_ops.h"
#include "tensor/ops.h"
#include "tensor/ops_internal.h"

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
  TANDEM_RETURN_IF_ERROR(internal::CheckCpu(dst, "AddInPlace", "dst"));
  TANDEM_RETURN_IF_ERROR(internal::CheckCpu(src, "AddInPlace", "src"));
  const float a = static_cast<float>(alpha);
  if (dst.dtype() == DType::kBF16) {
    AddLowPrecisionTyped(dst.data<BFloat16>(), src.data<BFloat16>(),
                         dst.numel(), a);
  } else {
    AddLowPrecisionTyped(dst.data<Half>(), src.data<Half>(), dst.numel(), a);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AddInPlace(const Tensor& dst, const Tensor& src, double alpha) {
  TANDEM_ASSIGN_OR_RETURN(DeviceOps * dev, internal::DeviceOpsFor({dst, src}));
  if (dev != nullptr) return dev->AddInPlace(dst, src, alpha);
  if ((dst.dtype() == DType::kBF16 || dst.dtype() == DType::kF16) &&
      dst.dtype() == src.dtype() && dst.numel() == src.numel()) {
    // f16/bf16 (autograd accumulating low-precision gradients): each sum in
    // float, rounded once, as PyTorch's CPU kernels do.
    return AddLowPrecision(dst, src, alpha);
  }
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(dst, "AddInPlace", "dst"));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(src, "AddInPlace", "src"));
  TANDEM_RETURN_IF_ERROR(internal::CheckSameDType(dst, src, "AddInPlace"));
  if (dst.numel() != src.numel()) {
    return absl::InvalidArgumentError(
        absl::StrCat("AddInPlace: dst ", Describe(dst), " and src ",
                     Describe(src), " have different element counts"));
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

absl::Status ScaleInPlace(const Tensor& dst, double factor) {
  TANDEM_ASSIGN_OR_RETURN(DeviceOps * dev, internal::DeviceOpsFor({dst}));
  if (dev != nullptr) return dev->ScaleInPlace(dst, factor);
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

absl::Status FillInPlace(const Tensor& dst, double value) {
  TANDEM_ASSIGN_OR_RETURN(DeviceOps * dev, internal::DeviceOpsFor({dst}));
  if (dev != nullptr) return dev->FillInPlace(dst, value);
  TANDEM_RETURN_IF_ERROR(internal::CheckCpu(dst, "FillInPlace", "dst"));
  internal::FillElements(dst.raw_data(), dst.dtype(), dst.numel(), value);
  return absl::OkStatus();
}

}  // namespace tandem
