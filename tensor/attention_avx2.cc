#include "tensor/attention_avx2.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tensor/avx2_math.h"

// Each function that uses AVX2 or FMA carries the target attribute, so the
// file builds without -march=native; AttentionAvx2Usable asks the CPU
// before any of them runs.

namespace tandem::internal {
namespace {

using avx2::ExpPd;
using avx2::HorizontalSum;
using avx2::LaneMask;

constexpr int64_t kLanes = 4;  // doubles per vector
constexpr int64_t kTile = 32;  // keys per tile of RowTimesT: 8 vectors

int64_t RoundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// dst [hd, tp] = src [t, hd] transposed and widened, zero past column t.
void TransposeWiden(const float* src, int64_t t, int64_t hd, int64_t tp,
                    double* dst) {
  for (int64_t d = 0; d < hd; ++d) {
    double* row = dst + d * tp;
    for (int64_t j = 0; j < t; ++j) row[j] = src[j * hd + d];
    std::fill(row + t, row + tp, 0.0);
  }
}

void Widen(const float* src, int64_t n, double* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

// out[j] = sum_d a[d] * bt[d, j] for j in [0, RoundUp(jn, kTile)), bt of
// row stride tp (a multiple of kTile). Each lane sums over d in order.
TANDEM_AVX2 void RowTimesT(const double* a, const double* bt, int64_t hd,
                           int64_t tp, int64_t jn, double* out) {
  for (int64_t j = 0; j < jn; j += kTile) {
    __m256d acc[kTile / kLanes];
    for (auto& x : acc) x = _mm256_setzero_pd();
    for (int64_t d = 0; d < hd; ++d) {
      const __m256d w = _mm256_broadcast_sd(a + d);
      const double* b = bt + d * tp + j;
      for (int64_t v = 0; v < kTile / kLanes; ++v) {
        acc[v] = _mm256_fmadd_pd(w, _mm256_loadu_pd(b + v * kLanes), acc[v]);
      }
    }
    for (int64_t v = 0; v < kTile / kLanes; ++v) {
      _mm256_storeu_pd(out + j + v * kLanes, acc[v]);
    }
  }
}

// out[d] = sum_{j < n} w[j] * rows[j, d] (rows [n, hd], hd a multiple of
// kLanes), each lane summing over j in order; out rounded to float.
TANDEM_AVX2 void WeightedRows(const double* w, const double* rows, int64_t n,
                              int64_t hd, float* out) {
  int64_t d0 = 0;
  for (; d0 + 8 * kLanes <= hd; d0 += 8 * kLanes) {
    __m256d acc[8];
    for (auto& x : acc) x = _mm256_setzero_pd();
    for (int64_t j = 0; j < n; ++j) {
      const __m256d s = _mm256_broadcast_sd(w + j);
      const double* r = rows + j * hd + d0;
      for (int v = 0; v < 8; ++v) {
        acc[v] = _mm256_fmadd_pd(s, _mm256_loadu_pd(r + v * kLanes), acc[v]);
      }
    }
    for (int v = 0; v < 8; ++v) {
      _mm_storeu_ps(out + d0 + v * kLanes, _mm256_cvtpd_ps(acc[v]));
    }
  }
  for (; d0 < hd; d0 += kLanes) {
    __m256d acc = _mm256_setzero_pd();
    for (int64_t j = 0; j < n; ++j) {
      acc = _mm256_fmadd_pd(_mm256_broadcast_sd(w + j),
                            _mm256_loadu_pd(rows + j * hd + d0), acc);
    }
    _mm_storeu_ps(out + d0, _mm256_cvtpd_ps(acc));
  }
}

// The softmax of one row of scores: on entry e[j] (j < jn) holds the
// float-rounded scaled score widened to double; on return e[j] holds
// exp(e[j] - max) / sum and p[j] its float rounding, p[j] = 0 for j in
// [jn, t).
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
  const __m256d s = _mm256_set1_pd(HorizontalSum(sum));
  int64_t j = 0;
  for (; j + kLanes <= jn; j += kLanes) {
    const __m256d q = _mm256_div_pd(_mm256_loadu_pd(e + j), s);
    _mm256_storeu_pd(e + j, q);
    _mm_storeu_ps(p + j, _mm256_cvtpd_ps(q));
  }
  const double total = HorizontalSum(sum);
  for (; j < jn; ++j) {
    e[j] /= total;
    p[j] = static_cast<float>(e[j]);
  }
  std::fill(p + jn, p + t, 0.0f);
}

// e[j] = double(float(dot[j]) * scale) for j in [0, RoundUp(jn, kLanes)):
// the score rounded to float, then scaled in float, as PyTorch.
TANDEM_AVX2 void ScaleScores(const double* dot, int64_t jn, float scale,
                             double* e) {
  const __m128 s = _mm_set1_ps(scale);
  for (int64_t j = 0; j < jn; j += kLanes) {
    const __m128 f = _mm_mul_ps(_mm256_cvtpd_ps(_mm256_loadu_pd(dot + j)), s);
    _mm256_storeu_pd(e + j, _mm256_cvtps_pd(f));
  }
}

}  // namespace

bool AttentionAvx2Usable(int64_t hd) {
  return avx2::Avx2FmaCpu() && hd > 0 && hd % kLanes == 0;
}

void AttentionForwardAvx2(const float* q, const float* k, const float* v,
                          const float* mask, int64_t bh, int64_t t, int64_t hd,
                          bool causal, double scale, float* probs, float* y) {
  const int64_t tp = RoundUp(std::max<int64_t>(t, 1), kTile);
  std::vector<double> kt(static_cast<size_t>(hd * tp));
  std::vector<double> vd(static_cast<size_t>(t * hd));
  std::vector<double> qi(static_cast<size_t>(hd));
  std::vector<double> dot(static_cast<size_t>(tp));
  std::vector<double> e(static_cast<size_t>(tp));
  const float scale_f = static_cast<float>(scale);
  for (int64_t h = 0; h < bh; ++h) {
    const int64_t off = h * t * hd;
    TransposeWiden(k + off, t, hd, tp, kt.data());
    Widen(v + off, t * hd, vd.data());
    for (int64_t i = 0; i < t; ++i) {
      const int64_t jn = causal ? i + 1 : t;
      Widen(q + off + i * hd, hd, qi.data());
      RowTimesT(qi.data(), kt.data(), hd, tp, jn, dot.data());
      ScaleScores(dot.data(), jn, scale_f, e.data());
      float* p = probs + (h * t + i) * t;
      SoftmaxRow(e.data(), jn, t, p);
      // The weights of v: the float probabilities (times the dropout
      // mask, in float), widened.
      const float* m = mask != nullptr ? mask + (h * t + i) * t : nullptr;
      for (int64_t j = 0; j < jn; ++j) {
        e[j] = m != nullptr ? static_cast<double>(p[j] * m[j]) : p[j];
      }
      WeightedRows(e.data(), vd.data(), jn, hd, y + off + i * hd);
    }
  }
}

void AttentionBackwardAvx2(const float* gy, const float* q, const float* k,
                           const float* v, const float* probs,
                           const float* mask, int64_t bh, int64_t t, int64_t hd,
                           bool causal, double scale, float* gq, float* gk,
                           float* gv) {
  const int64_t tp = RoundUp(std::max<int64_t>(t, 1), kTile);
  const size_t block = static_cast<size_t>(t * hd);
  std::vector<double> vt(static_cast<size_t>(hd * tp));
  std::vector<double> kd(block), qd(block), gyd(block);
  std::vector<double> ds(static_cast<size_t>(tp));
  // dS of one head, transposed (dst[j * t + i] = dS[i, j]): gk's rows are
  // sums over dS's columns. The only [t, t] scratch, reused head to head.
  std::vector<double> dst(static_cast<size_t>(t * t));
  std::vector<double> col(static_cast<size_t>(t));
  for (int64_t h = 0; h < bh; ++h) {
    const int64_t off = h * t * hd;
    const float* ph = probs + h * t * t;
    const float* mh = mask != nullptr ? mask + h * t * t : nullptr;
    TransposeWiden(v + off, t, hd, tp, vt.data());
    Widen(k + off, t * hd, kd.data());
    Widen(q + off, t * hd, qd.data());
    Widen(gy + off, t * hd, gyd.data());
    for (int64_t i = 0; i < t; ++i) {
      const int64_t jn = causal ? i + 1 : t;
      const float* p = ph + i * t;
      const float* m = mh != nullptr ? mh + i * t : nullptr;
      // dA[j] = gy_i . v_j; dP = dA * mask; r = sum_j P dP.
      RowTimesT(gyd.data() + i * hd, vt.data(), hd, tp, jn, ds.data());
      double r = 0;
      for (int64_t j = 0; j < jn; ++j) {
        if (m != nullptr) ds[j] *= static_cast<double>(m[j]);
        r += static_cast<double>(p[j]) * ds[j];
      }
      for (int64_t j = 0; j < jn; ++j) {
        ds[j] = static_cast<double>(p[j]) * (ds[j] - r) * scale;
        dst[j * t + i] = ds[j];
      }
      WeightedRows(ds.data(), kd.data(), jn, hd, gq + off + i * hd);
    }
    // Row j of gk and gv: sums over the rows i that attend to key j (i >= j
    // when causal), in increasing i.
    for (int64_t j = 0; j < t; ++j) {
      const int64_t i0 = causal ? j : 0;
      WeightedRows(dst.data() + j * t + i0, qd.data() + i0 * hd, t - i0, hd,
                   gk + off + j * hd);
      for (int64_t i = i0; i < t; ++i) {
        const float pij = ph[i * t + j];
        col[i] = mh != nullptr ? static_cast<double>(pij * mh[i * t + j]) : pij;
      }
      WeightedRows(col.data() + i0, gyd.data() + i0 * hd, t - i0, hd,
                   gv + off + j * hd);
    }
  }
}

}  // namespace tandem::internal
