#include "tensor/cpu/avx2/attention_avx2.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "base/status_macros.h"
#include "tensor/cpu/avx2/avx2_math.h"
#include "tensor/cpu/blas.h"

// Each function that uses AVX2 or FMA carries the target attribute, so the
// file builds without -march=native; AttentionAvx2Usable asks the CPU
// before any of them runs.

namespace tandem::internal {
namespace {

using avx2::ExpPd;
using avx2::HorizontalSum;
using avx2::LaneMask;

constexpr int64_t kLanes = 4;  // doubles per vector
// Scratch rows are padded by this many floats: the vector loops read up to
// one vector past a row's last live element.
constexpr int64_t kPad = 8;

int64_t RoundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// e[j] = double(s[j] * scale) for j in [0, RoundUp(jn, kLanes)): the f32
// score (q k^T rounded by the GEMM) scaled in float, as PyTorch; lanes past
// jn hold whatever s holds there and are masked by SoftmaxRow.
TANDEM_AVX2 void ScaleScores(const float* s, int64_t jn, float scale,
                             double* e) {
  const __m128 sc = _mm_set1_ps(scale);
  for (int64_t j = 0; j < jn; j += kLanes) {
    _mm256_storeu_pd(e + j,
                     _mm256_cvtps_pd(_mm_mul_ps(_mm_loadu_ps(s + j), sc)));
  }
}

// The softmax of one row of scores: on entry e[j] (j < jn) holds the
// float-rounded scaled score widened to double; on return p[j] holds the
// float rounding of exp(e[j] - max) / sum, p[j] = 0 for j in [jn, t).
TANDEM_AVX2 void SoftmaxRow(double* e, int64_t jn, int64_t t, float* p) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < jn; ++j) mx = std::max(mx, e[j]);
  const __m256d m = _mm256_set1_pd(mx);
  __m256d sum = _mm256_setzero_pd();
  for (int64_t j = 0; j < jn; j += kLanes) {
    __m256d x = ExpPd(_mm256_sub_pd(_mm256_loadu_pd(e + j), m));
    if (jn - j < kLanes) x = _mm256_and_pd(x, LaneMask(jn - j));
    _mm256_storeu_pd(e + j, x);
    sum = _mm256_add_pd(sum, x);
  }
  const double total = HorizontalSum(sum);
  const __m256d s = _mm256_set1_pd(total);
  int64_t j = 0;
  for (; j + kLanes <= jn; j += kLanes) {
    _mm_storeu_ps(p + j,
                  _mm256_cvtpd_ps(_mm256_div_pd(_mm256_loadu_pd(e + j), s)));
  }
  for (; j < jn; ++j) p[j] = static_cast<float>(e[j] / total);
  std::fill(p + jn, p + t, 0.0f);
}

// a[j] = p[j] * m[j] in float (p[j] without a mask) for j < jn, 0 for j in
// [jn, nk): the weights of v, one row of the [r, nk] block the GEMM reads.
void WeightsRow(const float* p, const float* m, int64_t jn, int64_t nk,
                float* a) {
  if (m != nullptr) {
    for (int64_t j = 0; j < jn; ++j) a[j] = p[j] * m[j];
  } else {
    std::copy(p, p + jn, a);
  }
  std::fill(a + jn, a + nk, 0.0f);
}

// One row of softmax backward: on entry ds[j] holds dA[j] = gy_i . v_j;
// dP = dA * m in float; on return ds[j] = float(p[j] (dP[j] - r) scale)
// with r = sum_j p[j] dP[j] in double, for j < jn, and 0 in [jn, nk).
TANDEM_AVX2 void SoftmaxBackwardRow(const float* p, const float* m, int64_t jn,
                                    int64_t nk, double scale, float* ds) {
  if (m != nullptr) {
    for (int64_t j = 0; j < jn; ++j) ds[j] *= m[j];
  }
  __m256d acc = _mm256_setzero_pd();
  int64_t j = 0;
  for (; j + kLanes <= jn; j += kLanes) {
    acc = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm_loadu_ps(p + j)),
                          _mm256_cvtps_pd(_mm_loadu_ps(ds + j)), acc);
  }
  double r = HorizontalSum(acc);
  for (int64_t jt = j; jt < jn; ++jt) {
    r += static_cast<double>(p[jt]) * ds[jt];
  }
  const __m256d rv = _mm256_set1_pd(r);
  const __m256d sv = _mm256_set1_pd(scale);
  for (j = 0; j + kLanes <= jn; j += kLanes) {
    const __m256d d = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(ds + j)), rv);
    const __m256d x = _mm256_mul_pd(
        _mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(p + j)), d), sv);
    _mm_storeu_ps(ds + j, _mm256_cvtpd_ps(x));
  }
  for (; j < jn; ++j) {
    ds[j] = static_cast<float>(static_cast<double>(p[j]) * (ds[j] - r) * scale);
  }
  std::fill(ds + jn, ds + nk, 0.0f);
}

// The [t, hd] rows of one head, `ld` apart, as a contiguous block: src
// itself when already contiguous, else gathered into `scratch` (t * hd
// floats). A · Bᵀ on contiguous operands of up to 128 rows takes tandem's
// skinny kernel (cpu::UseSkinnyGemm), which ran these products faster than
// OpenBLAS on strided operands, and the gathered head stays in cache for
// the head's products.
const float* ContiguousHead(const float* src, int64_t t, int64_t hd, int64_t ld,
                            std::vector<float>& scratch) {
  if (ld == hd) return src;
  for (int64_t i = 0; i < t; ++i) {
    std::copy(src + i * ld, src + i * ld + hd, scratch.data() + i * hd);
  }
  return scratch.data();
}

}  // namespace

bool AttentionAvx2Usable(int64_t hd) { return avx2::Avx2FmaCpu() && hd > 0; }

absl::Status AttentionForwardAvx2(const float* q, const float* k,
                                  const float* v, const float* mask, int64_t bh,
                                  int64_t t, int64_t hd, bool causal,
                                  double scale, float* probs, float* y,
                                  int64_t row_block) {
  const HeadLayout layout = HeadLayout::Contiguous(t, hd);
  return AttentionForwardAvx2Strided(q, k, v, layout, mask, bh, t, hd, causal,
                                     scale, probs, y, layout, row_block);
}

absl::Status AttentionBackwardAvx2(const float* gy, const float* q,
                                   const float* k, const float* v,
                                   const float* probs, const float* mask,
                                   int64_t bh, int64_t t, int64_t hd,
                                   bool causal, double scale, float* gq,
                                   float* gk, float* gv, int64_t row_block) {
  const HeadLayout layout = HeadLayout::Contiguous(t, hd);
  return AttentionBackwardAvx2Strided(gy, layout, q, k, v, layout, probs, mask,
                                      bh, t, hd, causal, scale, gq, gk, gv,
                                      row_block);
}

absl::Status AttentionForwardAvx2Strided(const float* q, const float* k,
                                         const float* v, const HeadLayout& in,
                                         const float* mask, int64_t bh,
                                         int64_t t, int64_t hd, bool causal,
                                         double scale, float* probs, float* y,
                                         const HeadLayout& out,
                                         int64_t row_block) {
  const int64_t rows = std::min(row_block, t);
  const int64_t ld = in.row_stride, ldy = out.row_stride;
  // One block's scores, then (in place) its weights A = probs * mask.
  std::vector<float> s(static_cast<size_t>(rows * t + kPad));
  std::vector<double> e(static_cast<size_t>(RoundUp(t, kLanes) + kPad), 0.0);
  const float scale_f = static_cast<float>(scale);
  std::vector<float> q_head, k_head;
  if (ld != hd) {
    q_head.resize(static_cast<size_t>(t * hd));
    k_head.resize(static_cast<size_t>(t * hd));
  }
  for (int64_t h = 0; h < bh; ++h) {
    const int64_t off = in.Offset(h), off_y = out.Offset(h);
    const float* qh = ContiguousHead(q + off, t, hd, ld, q_head);
    const float* kh = ContiguousHead(k + off, t, hd, ld, k_head);
    for (int64_t i0 = 0; i0 < t; i0 += row_block) {
      const int64_t i1 = std::min(i0 + row_block, t);
      const int64_t r = i1 - i0;
      const int64_t nk = causal ? i1 : t;  // keys any row here sees
      TANDEM_RETURN_IF_ERROR(cpu::Gemm<float>(
          false, true, r, nk, hd, 1.0f, qh + i0 * hd, kh, 0.0f, s.data()));
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t jn = causal ? i + 1 : t;
        float* row = s.data() + (i - i0) * nk;
        float* p = probs + (h * t + i) * t;
        ScaleScores(row, jn, scale_f, e.data());
        SoftmaxRow(e.data(), jn, t, p);
        WeightsRow(p, mask != nullptr ? mask + (h * t + i) * t : nullptr, jn,
                   nk, row);
      }
      TANDEM_RETURN_IF_ERROR(cpu::GemmStrided<float>(
          false, false, r, hd, nk, 1.0f, s.data(), nk, v + off, ld, 0.0f,
          y + off_y + i0 * ldy, ldy));
    }
  }
  return absl::OkStatus();
}

absl::Status AttentionBackwardAvx2Strided(
    const float* gy, const HeadLayout& out, const float* q, const float* k,
    const float* v, const HeadLayout& in, const float* probs, const float* mask,
    int64_t bh, int64_t t, int64_t hd, bool causal, double scale, float* gq,
    float* gk, float* gv, int64_t row_block) {
  const int64_t rows = std::min(row_block, t);
  const int64_t ld = in.row_stride, ldy = out.row_stride;
  std::vector<float> ds(static_cast<size_t>(rows * t + kPad));
  std::vector<float> a(static_cast<size_t>(rows * t + kPad));
  const int64_t blocks = (t + row_block - 1) / row_block;
  std::vector<float> gy_head, v_head;
  if (ldy != hd) gy_head.resize(static_cast<size_t>(t * hd));
  if (ld != hd) v_head.resize(static_cast<size_t>(t * hd));
  for (int64_t h = 0; h < bh; ++h) {
    const int64_t off = in.Offset(h);
    const float* gyh = ContiguousHead(gy + out.Offset(h), t, hd, ldy, gy_head);
    const float* vh = ContiguousHead(v + off, t, hd, ld, v_head);
    // Last block first: it reaches every key, so its gk and gv products
    // overwrite (beta 0) every row the earlier blocks then add to.
    for (int64_t b = blocks - 1; b >= 0; --b) {
      const int64_t i0 = b * row_block;
      const int64_t i1 = std::min(i0 + row_block, t);
      const int64_t r = i1 - i0;
      const int64_t nk = causal ? i1 : t;
      const float beta = b == blocks - 1 ? 0.0f : 1.0f;
      const float* gy_block = gyh + i0 * hd;
      // dA = gy v^T on the block's rows and keys.
      TANDEM_RETURN_IF_ERROR(cpu::Gemm<float>(false, true, r, nk, hd, 1.0f,
                                              gy_block, vh, 0.0f, ds.data()));
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t jn = causal ? i + 1 : t;
        const float* p = probs + (h * t + i) * t;
        const float* m = mask != nullptr ? mask + (h * t + i) * t : nullptr;
        SoftmaxBackwardRow(p, m, jn, nk, scale, ds.data() + (i - i0) * nk);
        WeightsRow(p, m, jn, nk, a.data() + (i - i0) * nk);
      }
      TANDEM_RETURN_IF_ERROR(
          cpu::GemmStrided<float>(false, false, r, hd, nk, 1.0f, ds.data(), nk,
                                  k + off, ld, 0.0f, gq + off + i0 * ld, ld));
      TANDEM_RETURN_IF_ERROR(
          cpu::GemmStrided<float>(true, false, nk, hd, r, 1.0f, ds.data(), nk,
                                  q + off + i0 * ld, ld, beta, gk + off, ld));
      TANDEM_RETURN_IF_ERROR(
          cpu::GemmStrided<float>(true, false, nk, hd, r, 1.0f, a.data(), nk,
                                  gy_block, hd, beta, gv + off, ld));
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::internal
