#include "tensor/ops_internal.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace tandem::internal {

std::string Describe(const Tensor& t) {
  if (!t.defined()) return "undefined";
  return absl::StrCat(DTypeName(t.dtype()), ShapeToString(t.shape()));
}

absl::Status CheckCpu(const Tensor& t, const char* op, const char* arg) {
  if (!t.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": `", arg, "` is an undefined tensor"));
  }
  if (!t.device().is_cpu()) {
    return absl::UnimplementedError(absl::StrCat(
        op, ": `", arg, "` is on ", t.device().ToString(),
        " but only CPU kernels exist; move it with To(Device::CPU())"));
  }
  return absl::OkStatus();
}

absl::Status CheckFloat(const Tensor& t, const char* op, const char* arg) {
  absl::Status s = CheckCpu(t, op, arg);
  if (!s.ok()) return s;
  if (t.dtype() != DType::kF32 && t.dtype() != DType::kF64) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": `", arg, "` is ", Describe(t),
        " but this op supports f32 and f64 only; convert with To(DType)"));
  }
  return absl::OkStatus();
}

absl::Status CheckSameDType(const Tensor& a, const Tensor& b, const char* op) {
  if (a.dtype() != b.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": dtype mismatch, ", Describe(a), " vs ", Describe(b),
        "; tandem does not promote dtypes, convert one with To(DType)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> NormalizeDim(int64_t dim, const Tensor& t,
                                     const char* op) {
  const int64_t n = t.ndim();
  const int64_t d = dim < 0 ? dim + n : dim;
  if (d < 0 || d >= n) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": dim ", dim, " is out of range for ", Describe(t),
        " (valid: ", -n, " to ", n - 1, ")"));
  }
  return d;
}

DimSplit SplitAt(const Shape& shape, int64_t dim) {
  DimSplit s;
  for (int64_t d = 0; d < dim; ++d) s.outer *= shape[d];
  s.size = shape[dim];
  for (int64_t d = dim + 1; d < static_cast<int64_t>(shape.size()); ++d) {
    s.inner *= shape[d];
  }
  return s;
}

}  // namespace tandem::internal
