// bf16 MatMul and Linear on oneDNN (see ops_bf16.h). Gradient buffers are
// written straight by the kernel: accumulate = true adds into an existing
// gradient with one rounding, like the f32 ops' beta = 1.
#include "tensor/ops_bf16.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autograd.h"
#include "tensor/cpu/gemm_bf16.h"
#include "tensor/ops_internal.h"

namespace tandem::internal {
namespace {

const uint16_t* Bits(const Tensor& t) {
  return t.defined() ? reinterpret_cast<const uint16_t*>(t.data<BFloat16>())
                     : nullptr;
}
uint16_t* MutableBits(const Tensor& t) {
  return reinterpret_cast<uint16_t*>(t.data<BFloat16>());
}

absl::Status CheckBf16Matrix(const Tensor& t, const char* op, const char* arg) {
  TANDEM_RETURN_IF_ERROR(CheckCpu(t, op, arg));
  if (t.dtype() != DType::kBF16 || t.ndim() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": `", arg, "` must be a 2-d bf16 tensor like the other operand",
        " (mixed dtypes need autocast), got ", Describe(t)));
  }
  return absl::OkStatus();
}

// C (+)= op(A) op(B) into a gradient buffer.
absl::Status GemmInto(const GradSink::Buffer& c, bool ta, bool tb, int64_t m,
                      int64_t n, int64_t k, const Tensor& a, const Tensor& b) {
  return cpu::GemmBf16({.transpose_a = ta,
                        .transpose_b = tb,
                        .m = m,
                        .n = n,
                        .k = k,
                        .accumulate = c.accumulate},
                       Bits(a), Bits(b), nullptr, MutableBits(c.tensor));
}

}  // namespace

absl::StatusOr<Tensor> MatMulBf16(const Tensor& a, const Tensor& b,
                                  bool transpose_a, bool transpose_b) {
  TANDEM_RETURN_IF_ERROR(CheckBf16Matrix(a, "MatMul", "a"));
  TANDEM_RETURN_IF_ERROR(CheckBf16Matrix(b, "MatMul", "b"));
  TANDEM_ASSIGN_OR_RETURN(const MatMulDims dims,
                          MatMulDimsOf(a, b, transpose_a, transpose_b));
  const int64_t m = dims.m, n = dims.n, k = dims.k;
  TANDEM_ASSIGN_OR_RETURN(Tensor out, NewLike({m, n}, DType::kBF16));
  TANDEM_RETURN_IF_ERROR(cpu::GemmBf16({.transpose_a = transpose_a,
                                        .transpose_b = transpose_b,
                                        .m = m,
                                        .n = n,
                                        .k = k},
                                       Bits(a), Bits(b), nullptr,
                                       MutableBits(out)));
  if (ShouldRecord({a, b})) {
    const bool ta = transpose_a, tb = transpose_b;
    RecordOp(
        "MatMul", out, {a, b},
        [sa = a.Detach(), sb = b.Detach(), ta, tb, m, n, k](
            const Tensor& g, GradSink& sink) -> absl::Status {
          if (sink.needs(0)) {
            TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer da, sink.GetBuffer(0));
            TANDEM_RETURN_IF_ERROR(
                !ta ? GemmInto(da, false, !tb, m, k, n, g, sb)
                    : GemmInto(da, tb, true, k, m, n, sb, g));
          }
          if (sink.needs(1)) {
            TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer db, sink.GetBuffer(1));
            TANDEM_RETURN_IF_ERROR(
                !tb ? GemmInto(db, !ta, false, k, n, m, sa, g)
                    : GemmInto(db, true, ta, n, k, m, g, sa));
          }
          return absl::OkStatus();
        });
  }
  return out;
}

absl::StatusOr<Tensor> LinearBf16(const Tensor& x, const Tensor& weight,
                                  const Tensor& bias) {
  TANDEM_RETURN_IF_ERROR(CheckBf16Matrix(x, "Linear", "x"));
  TANDEM_RETURN_IF_ERROR(CheckBf16Matrix(weight, "Linear", "weight"));
  const int64_t batch = x.dim(0), in = x.dim(1), out_features = weight.dim(0);
  TANDEM_RETURN_IF_ERROR(CheckLinearFeatures(x, weight));
  if (bias.defined()) {
    TANDEM_RETURN_IF_ERROR(CheckCpu(bias, "Linear", "bias"));
    if (bias.dtype() != DType::kBF16 || bias.shape() != Shape{out_features}) {
      return absl::InvalidArgumentError(
          absl::StrCat("Linear: bias ", Describe(bias), " must be bf16[",
                       out_features, "] to match weight ", Describe(weight)));
    }
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor y,
                          NewLike({batch, out_features}, DType::kBF16));
  TANDEM_RETURN_IF_ERROR(cpu::GemmBf16(
      {.transpose_b = true, .m = batch, .n = out_features, .k = in}, Bits(x),
      Bits(weight), Bits(bias), MutableBits(y)));
  if (ShouldRecord({x, weight, bias})) {
    Tensor sx = weight.requires_grad() ? x.Detach() : Tensor();
    Tensor sw = x.requires_grad() ? weight.Detach() : Tensor();
    RecordOp(
        "Linear", y, {x, weight, bias},
        [sx, sw, batch, in, out_features](const Tensor& g,
                                          GradSink& sink) -> absl::Status {
          if (sink.needs(1)) {  // dW [out, in] = g^T x
            TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer dw, sink.GetBuffer(1));
            TANDEM_RETURN_IF_ERROR(
                GemmInto(dw, true, false, out_features, in, batch, g, sx));
          }
          if (sink.needs(2)) {  // db [out] = column sums of g, in f32
            TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer db, sink.GetBuffer(2));
            BFloat16* pdb = db.tensor.data<BFloat16>();
            const BFloat16* pg = g.data<BFloat16>();
            std::vector<float> sums(static_cast<size_t>(out_features), 0.f);
            for (int64_t r = 0; r < batch; ++r) {
              const BFloat16* row = pg + r * out_features;
              for (int64_t c = 0; c < out_features; ++c) {
                sums[c] += static_cast<float>(row[c]);
              }
            }
            for (int64_t c = 0; c < out_features; ++c) {
              const float prior =
                  db.accumulate ? static_cast<float>(pdb[c]) : 0.f;
              pdb[c] = BFloat16(prior + sums[c]);
            }
          }
          if (sink.needs(0)) {  // dx [batch, in] = g W
            TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer dx, sink.GetBuffer(0));
            TANDEM_RETURN_IF_ERROR(
                GemmInto(dx, false, false, batch, in, out_features, g, sw));
          }
          return absl::OkStatus();
        });
  }
  return y;
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
