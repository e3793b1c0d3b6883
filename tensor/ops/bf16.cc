// bf16 MatMul and Linear on oneDNN (see bf16.h). Gradient buffers are
// written straight by the kernel: accumulate = true adds into an existing
// gradient with one rounding, like the f32 ops' beta = 1.
#include "tensor/ops/bf16.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autograd/autograd.h"
#include "tensor/cpu/gemm_bf16.h"
#include "tensor/ops/internal.h"

namespace tandem::internal {
namespace {

const uint16_t* Bits(const Tensor& t) {
  return t.defined() ? reinterpret_cast<const uint16_t*>(t.data<BFloat16>())
                     : nullptr;
}
uint16_t* MutableBits(const Tensor& t) {
  return reinterpret_cast<uint16_t*>(t.data<BFloat16>());
}

}  // namespace

absl::Status MatMulBf16(const Tensor& a, const Tensor& b, bool transpose_a,
                        bool transpose_b, const Tensor& c, bool accumulate) {
  return cpu::GemmBf16({.transpose_a = transpose_a,
                        .transpose_b = transpose_b,
                        .m = c.dim(0),
                        .n = c.dim(1),
                        .k = transpose_a ? a.dim(0) : a.dim(1),
                        .accumulate = accumulate},
                       Bits(a), Bits(b), nullptr, MutableBits(c));
}

absl::Status LinearBf16(const Tensor& x, const Tensor& weight,
                        const Tensor& bias, const Tensor& y) {
  return cpu::GemmBf16(
      {.transpose_b = true, .m = x.dim(0), .n = weight.dim(0), .k = x.dim(1)},
      Bits(x), Bits(weight), Bits(bias), MutableBits(y));
}

void ColumnSumsBf16(const Tensor& g, const Tensor& out, bool accumulate) {
  const int64_t rows = g.dim(0), cols = g.dim(1);
  BFloat16* po = out.data<BFloat16>();
  const BFloat16* pg = g.data<BFloat16>();
  std::vector<float> sums(static_cast<size_t>(cols), 0.f);
  for (int64_t r = 0; r < rows; ++r) {
    const BFloat16* row = pg + r * cols;
    for (int64_t c = 0; c < cols; ++c) sums[c] += static_cast<float>(row[c]);
  }
  for (int64_t c = 0; c < cols; ++c) {
    const float prior = accumulate ? static_cast<float>(po[c]) : 0.f;
    po[c] = BFloat16(prior + sums[c]);
  }
}

namespace {

// One 16-bit element type: widen exactly, round to nearest even.
template <typename T>
float Widen(T v) {
  return static_cast<float>(v);
}

template <typename T>
absl::StatusOr<Tensor> ReluIn(const Tensor& x) {
  TANDEM_ASSIGN_OR_RETURN(Tensor y, NewLike(x.shape(), x.dtype()));
  const T* px = x.data<T>();
  T* py = y.data<T>();
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) {
    const float v = Widen(px[i]);
    py[i] = T(v < 0 ? 0.f : v);  // NaN stays NaN, as torch.relu
  }
  if (ShouldRecord({x})) {
    RecordOp(
        "Relu", y, {x},
        [sx = x.Detach()](const Tensor& g, GradSink& sink) -> absl::Status {
          TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer buf, sink.GetBuffer(0));
          const T* px = sx.data<T>();
          const T* pg = g.data<T>();
          T* out = buf.tensor.data<T>();
          const int64_t n = g.numel();
          for (int64_t i = 0; i < n; ++i) {
            const float d = Widen(px[i]) > 0 ? Widen(pg[i]) : 0.f;
            out[i] = T(buf.accumulate ? Widen(out[i]) + d : d);
          }
          return absl::OkStatus();
        });
  }
  return y;
}

}  // namespace

absl::StatusOr<Tensor> ReluLowPrecision(const Tensor& x) {
  TANDEM_RETURN_IF_ERROR(CheckCpu(x, "Relu", "x"));
  if (x.dtype() == DType::kBF16) return ReluIn<BFloat16>(x);
  if (x.dtype() == DType::kF16) return ReluIn<Half>(x);
  return absl::InvalidArgumentError(absl::StrCat(
      "Relu: the 16-bit kernel takes f16 or bf16, got ", Describe(x)));
}

}  // namespace tandem::internal
