// CausalSelfAttentionQkv: GPT-2's attention core straight from the fused
// QKV projection. On CPU f32 with AVX2 + FMA the kernels read each head's
// q, k and v in place from qkv [B, T, 3C] and write y [B, T, C] and qkv's
// gradient in place (tensor/cpu/avx2/attention_avx2.h's strided kernels), so
// the two permuted copies forward (qkv to [3, B, H, T, hd], y back to [B, T, H,
// hd]) and their two copies backward are never made. Everywhere else (CUDA, sim
// devices, f64, f16/bf16, other CPUs) it is the composition it replaces:
// Permute, ScaledDotProductAttention, Permute, each with its own kernels.
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autograd/autograd.h"
#include "tensor/cpu/avx2/attention_avx2.h"
#include "tensor/generator.h"
#include "tensor/ops.h"
#include "tensor/ops/dropout_mask.h"
#include "tensor/ops/internal.h"

namespace tandem {
namespace {

constexpr char kOp[] = "CausalSelfAttentionQkv";

// qkv [B, T, 3, H, hd] read in place: q's layout (k and v: the same from
// qkv + C and qkv + 2C), and y's [B, T, H, hd].
internal::HeadLayout QkvLayout(int64_t t, int64_t c, int64_t nh, int64_t hd) {
  return internal::HeadLayout{nh, t * 3 * c, hd, 3 * c};
}
internal::HeadLayout MergedLayout(int64_t t, int64_t c, int64_t nh,
                                  int64_t hd) {
  return internal::HeadLayout{nh, t * c, hd, c};
}

// The unfused form, for every device and dtype: qkv -> q, k, v [B, H, T,
// hd] by one permuted copy, attention, heads merged by another.
absl::StatusOr<Tensor> Composed(const Tensor& qkv, int64_t nh, double dropout_p,
                                Generator* gen) {
  const int64_t b = qkv.dim(0), t = qkv.dim(1), c = qkv.dim(2) / 3;
  const int64_t hd = c / nh;
  TANDEM_ASSIGN_OR_RETURN(Tensor x, Reshape(qkv, {b, t, 3, nh, hd}));
  TANDEM_ASSIGN_OR_RETURN(x, Permute(x, {2, 0, 3, 1, 4}));
  const int64_t n = b * nh * t * hd;
  TANDEM_ASSIGN_OR_RETURN(Tensor q, x.View(0, {b, nh, t, hd}));
  TANDEM_ASSIGN_OR_RETURN(Tensor k, x.View(n, {b, nh, t, hd}));
  TANDEM_ASSIGN_OR_RETURN(Tensor v, x.View(2 * n, {b, nh, t, hd}));
  TANDEM_ASSIGN_OR_RETURN(
      Tensor y, ScaledDotProductAttention(q, k, v, /*causal=*/true, dropout_p,
                                          dropout_p > 0 ? gen : nullptr));
  TANDEM_ASSIGN_OR_RETURN(y, Permute(y, {0, 2, 1, 3}));
  return Reshape(y, {b, t, c});
}

absl::Status CheckArgs(const Tensor& qkv, int64_t nh, double dropout_p,
                       const Generator* gen) {
  if (qkv.ndim() != 3 || qkv.dim(2) % 3 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": qkv must be [B, T, 3C] (q, k, v side by side), got ",
        internal::Describe(qkv)));
  }
  const int64_t c = qkv.dim(2) / 3;
  if (nh < 1 || c % nh != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": n_head must be >= 1 and divide C = ", c,
                     " (qkv's last dimension / 3), got n_head = ", nh));
  }
  return internal::CheckAttentionDropout(kOp, dropout_p, gen);
}

}  // namespace

absl::StatusOr<Tensor> CausalSelfAttentionQkv(const Tensor& qkv, int64_t n_head,
                                              double dropout_p,
                                              Generator* gen) {
  TANDEM_RETURN_IF_ERROR(CheckArgs(qkv, n_head, dropout_p, gen));
  // The dtype is the composition's to check: f16/bf16 (and autocast) go
  // through ScaledDotProductAttention's f32 routing there.
  const int64_t b = qkv.dim(0), t = qkv.dim(1), c = qkv.dim(2) / 3;
  const int64_t hd = c / n_head;
  if (!qkv.device().is_cpu() || qkv.dtype() != DType::kF32 ||
      !internal::AttentionAvx2Usable(hd) || qkv.numel() == 0) {
    return Composed(qkv, n_head, dropout_p, gen);
  }
  const Shape att_shape = {b, n_head, t, t};
  Tensor mask;
  if (dropout_p > 0) {
    // The same draws as ScaledDotProductAttention's, in the same order.
    TANDEM_ASSIGN_OR_RETURN(
        mask, internal::DropoutMask(att_shape, qkv.dtype(), dropout_p, *gen));
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const int64_t bh = b * n_head;
  const internal::HeadLayout in = QkvLayout(t, c, n_head, hd);
  const internal::HeadLayout out = MergedLayout(t, c, n_head, hd);
  TANDEM_ASSIGN_OR_RETURN(Tensor probs, Tensor::Empty(att_shape, qkv.dtype()));
  TANDEM_ASSIGN_OR_RETURN(Tensor y, Tensor::Empty({b, t, c}, qkv.dtype()));
  const float* base = qkv.data<float>();
  const float* mask_data = mask.defined() ? mask.data<float>() : nullptr;
  TANDEM_RETURN_IF_ERROR(internal::AttentionForwardAvx2Strided(
      base, base + c, base + 2 * c, in, mask_data, bh, t, hd,
      /*causal=*/true, scale, probs.data<float>(), y.data<float>(), out));
  if (ShouldRecord({qkv})) {
    RecordOp(
        kOp, y, {qkv},
        [sqkv = qkv.Detach(), probs, mask, bh, t, c, hd, scale, in, out](
            const Tensor& g, GradSink& sink) -> absl::Status {
          if (!g.device().is_cpu() || g.shape() != Shape{sqkv.dim(0), t, c}) {
            return absl::InvalidArgumentError(absl::StrCat(
                kOp, "Backward: expected a gradient [", sqkv.dim(0), ", ", t,
                ", ", c, "], got ", internal::Describe(g)));
          }
          TANDEM_RETURN_IF_ERROR(internal::CheckSameDType(
              g, sqkv, "CausalSelfAttentionQkvBackward"));
          TANDEM_ASSIGN_OR_RETURN(Tensor gqkv,
                                  Tensor::Empty(sqkv.shape(), sqkv.dtype()));
          const float* base = sqkv.data<float>();
          float* gbase = gqkv.data<float>();
          TANDEM_RETURN_IF_ERROR(internal::AttentionBackwardAvx2Strided(
              g.data<float>(), out, base, base + c, base + 2 * c, in,
              probs.data<float>(),
              mask.defined() ? mask.data<float>() : nullptr, bh, t, hd,
              /*causal=*/true, scale, gbase, gbase + c, gbase + 2 * c));
          return sink.Add(0, std::move(gqkv));
        });
  }
  return y;
}

}  // namespace tandem
