// Dropout, defined once for every device: the mask is drawn on the host
// from the caller's Generator exactly as PyTorch 1.13's CPU dropout draws
// it, moved to the input's device, and applied with the Mul op, whose
// kernels exist per device and whose backward (g * mask) is the one
// backward formula. This is PyTorch's own composition on the CPU
// (aten/src/ATen/native/Dropout.cpp, _dropout_impl:
// noise = empty_like(x).bernoulli_(1 - p); noise.div_(1 - p); x * noise).
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/generator.h"
#include "tensor/ops.h"
#include "tensor/ops/dropout_mask.h"
#include "tensor/ops/internal.h"

namespace tandem {
namespace {

// PyTorch's bernoulli_(q) on a CPU build without MKL (Debian's, and any
// built without it): for each element in order, one random64() v gives
// the uniform u = (v & (2^53 - 1)) * 2^-53 (at::uniform_real_distribution
// <double>), and the element is u < q. Here the kept elements hold `keep`,
// the others 0. Builds with MKL draw from MKL's MCG31 stream instead; their
// masks differ (docs/pytorch_compat.md).
template <typename T>
void FillMask(T* mask, int64_t n, double q, T keep, Generator& gen) {
  constexpr uint64_t kMask53 = (uint64_t{1} << 53) - 1;
  constexpr double kScale53 = 1.0 / static_cast<double>(uint64_t{1} << 53);
  for (int64_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(gen.Random64() & kMask53) * kScale53;
    mask[i] = u < q ? keep : T(0);
  }
}

}  // namespace

namespace internal {

absl::Status CheckAttentionDropout(const char* op, double dropout_p,
                                   const Generator* gen) {
  if (!(dropout_p >= 0 && dropout_p < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": dropout_p must be in [0, 1), got ", dropout_p));
  }
  if (dropout_p > 0 && gen == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": dropout_p is ", dropout_p,
        " but no generator was given; pass the rank's Generator (or "
        "dropout_p = 0 in eval)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> DropoutMask(const Shape& shape, DType dtype, double p,
                                   Generator& gen) {
  // 1 / (1 - p) becomes the tensor's type as PyTorch's noise.div_(1 - p)
  // rounds it (f16/bf16: computed in float, then rounded by To).
  const double q = 1 - p;
  Tensor mask;
  if (dtype == DType::kF64) {
    TANDEM_ASSIGN_OR_RETURN(mask, Tensor::Empty(shape, DType::kF64));
    FillMask(mask.data<double>(), mask.numel(), q, 1.0 / q, gen);
    return mask;
  }
  TANDEM_ASSIGN_OR_RETURN(mask, Tensor::Empty(shape, DType::kF32));
  FillMask(mask.data<float>(), mask.numel(), q, 1.0f / static_cast<float>(q),
           gen);
  if (dtype != DType::kF32) {
    TANDEM_ASSIGN_OR_RETURN(mask, mask.To(dtype));
  }
  return mask;
}

}  // namespace internal

absl::StatusOr<Tensor> Dropout(const Tensor& x, double p, bool training,
                               Generator& gen) {
  // The one argument check, for every device.
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice("Dropout", x));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloating(x, "Dropout", "x"));
  if (!(p >= 0 && p <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Dropout: probability p must be in [0, 1] (PyTorch: \"dropout "
        "probability has to be between 0 and 1\"), got ",
        p));
  }
  // As PyTorch: identity without drawing, or zeros without drawing.
  if (p == 0 || !training || x.numel() == 0) return x;
  if (p == 1) return Mul(x, 0.0);
  TANDEM_ASSIGN_OR_RETURN(Tensor mask,
                          internal::DropoutMask(x.shape(), x.dtype(), p, gen));
  if (!device.is_cpu()) {
    TANDEM_ASSIGN_OR_RETURN(mask, mask.To(device));
  }
  // The backward is Mul's: g * mask.
  return Mul(x, mask);
}

}  // namespace tandem
