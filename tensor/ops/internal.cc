#include "tensor/ops/internal.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace tandem::internal {

std::string Describe(const Tensor& t) {
  if (!t.defined()) return "undefined";
  return absl::StrCat(DTypeName(t.dtype()), ShapeToString(t.shape()));
}

absl::Status CheckDefined(const Tensor& t, const char* op, const char* arg) {
  if (!t.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": `", arg, "` is an undefined tensor"));
  }
  return absl::OkStatus();
}

absl::Status CheckCpu(const Tensor& t, const char* op, const char* arg) {
  absl::Status s = CheckDefined(t, op, arg);
  if (!s.ok()) return s;
  if (!t.device().is_cpu()) {
    return absl::UnimplementedError(absl::StrCat(
        op, ": `", arg, "` is on ", t.device().ToString(),
        " but only CPU kernels exist; move it with To(Device::CPU())"));
  }
  return absl::OkStatus();
}

absl::Status DeviceMismatch(const char* op, Device a, Device b) {
  return absl::InvalidArgumentError(absl::StrCat(
      "Expected all tensors to be on the same device, but found at least "
      "two devices, ",
      a.ToString(), " and ", b.ToString(), " (in ", op,
      "); move one with To(Device) first"));
}

absl::Status CheckFloating(const Tensor& t, const char* op, const char* arg) {
  absl::Status s = CheckDefined(t, op, arg);
  if (!s.ok()) return s;
  if (!IsFloatingPoint(t.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": `", arg, "` is ", Describe(t),
        " but this op supports f32, f64, f16 and bf16; convert with "
        "To(DType)"));
  }
  return absl::OkStatus();
}

absl::Status CheckFloat(const Tensor& t, const char* op, const char* arg) {
  absl::Status s = CheckDefined(t, op, arg);
  if (!s.ok()) return s;
  if (t.dtype() != DType::kF32 && t.dtype() != DType::kF64) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": `", arg, "` is ", Describe(t),
        " but this op supports f32 and f64 only; convert with To(DType)"));
  }
  return absl::OkStatus();
}

absl::Status CheckGradDevice(const Tensor& g, Device device, const char* op) {
  if (!g.defined() || g.device() != device) {
    return absl::InternalError(
        absl::StrCat("the backward of ", op, " on ", device.ToString(),
                     " received a gradient on ",
                     g.defined() ? g.device().ToString() : "(undefined)",
                     "; gradients must stay on the op's device"));
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

absl::StatusOr<MatMulDims> MatMulDimsOf(const Tensor& a, const Tensor& b,
                                        bool transpose_a, bool transpose_b) {
  MatMulDims d;
  d.m = transpose_a ? a.dim(1) : a.dim(0);
  d.k = transpose_a ? a.dim(0) : a.dim(1);
  const int64_t kb = transpose_b ? b.dim(1) : b.dim(0);
  d.n = transpose_b ? b.dim(0) : b.dim(1);
  if (d.k != kb) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MatMul: inner dimensions differ: a ", Describe(a),
        transpose_a ? " (transposed)" : "", " has ", d.k, " columns but b ",
        Describe(b), transpose_b ? " (transposed)" : "", " has ", kb, " rows"));
  }
  return d;
}

absl::Status CheckLinearFeatures(const Tensor& x, const Tensor& weight) {
  if (weight.dim(1) != x.dim(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Linear: x ", Describe(x), " has ", x.dim(1), " features but weight ",
        Describe(weight), " expects ", weight.dim(1),
        " (weight is [out_features, in_features])"));
  }
  return absl::OkStatus();
}

absl::Status LabelOutOfRange(const Tensor& logits, int64_t index,
                             int64_t label) {
  const int64_t c = logits.dim(1);
  return absl::InvalidArgumentError(
      absl::StrCat("CrossEntropy: label at index ", index, " is ", label,
                   " but logits ", Describe(logits), " have ", c,
                   " classes (valid labels: 0 to ", c - 1, ")"));
}

absl::StatusOr<int64_t> NormalizeDim(int64_t dim, const Tensor& t,
                                     const char* op) {
  const int64_t n = t.ndim();
  const int64_t d = dim < 0 ? dim + n : dim;
  if (d < 0 || d >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": dim ", dim, " is out of range for ", Describe(t),
                     " (valid: ", -n, " to ", n - 1, ")"));
  }
  return d;
}

namespace {

bool AllOnes(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](int64_t d) { return d == 1; });
}

// True when `small` equals the last small.size() dims of `big`.
bool IsSuffix(const Shape& small, const Shape& big) {
  return small.size() <= big.size() &&
         std::equal(small.begin(), small.end(),
                    big.end() - static_cast<int64_t>(small.size()));
}

}  // namespace

absl::StatusOr<BroadcastPlan> MakeBroadcastPlan(const Tensor& a,
                                                const Tensor& b,
                                                const char* op) {
  BroadcastPlan p;
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  if (sa == sb) {
    p.out_shape = sa;
    p.inner = a.numel();
    return p;
  }
  // Scalar-like operand (one element, all dims 1, not more dims).
  if (b.numel() == 1 && AllOnes(sb) && sb.size() <= sa.size()) {
    p.out_shape = sa;
    p.inner = a.numel();
    p.b = {0, 0, true};
    return p;
  }
  if (a.numel() == 1 && AllOnes(sa) && sa.size() <= sb.size()) {
    p.out_shape = sb;
    p.inner = b.numel();
    p.a = {0, 0, true};
    return p;
  }
  // Row broadcasting: the smaller shape is a suffix of the larger.
  const bool b_small = IsSuffix(sb, sa);
  const bool a_small = !b_small && IsSuffix(sa, sb);
  if (!a_small && !b_small) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": shapes ", ShapeToString(sa), " and ", ShapeToString(sb),
        " are not broadcastable; tandem broadcasts equal shapes, a "
        "trailing-dims suffix ([N, M] with [M]) or a one-element tensor"));
  }
  const Tensor& big = b_small ? a : b;
  const Tensor& small = b_small ? b : a;
  p.out_shape = big.shape();
  p.inner = small.numel();
  p.outer = p.inner == 0 ? 0 : big.numel() / p.inner;
  BroadcastOperand full{p.inner, 1, false};
  BroadcastOperand row{0, 1, true};
  p.a = b_small ? full : row;
  p.b = b_small ? row : full;
  return p;
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
