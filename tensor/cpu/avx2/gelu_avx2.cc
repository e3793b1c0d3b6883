#include "tensor/cpu/avx2/gelu_avx2.h"

#include <cmath>
#include <cstdint>

#include "tensor/cpu/avx2/avx2_math.h"

namespace tandem::internal {
namespace {

constexpr double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5;
constexpr double kKappa = 0.044715;

// Lanes [0, n) of p widened (n in [1, 4]); the others 0.
TANDEM_AVX2 __m256d LoadWide(const float* p, int64_t n) {
  if (n >= 4) return _mm256_cvtps_pd(_mm_loadu_ps(p));
  alignas(16) float tmp[4] = {0, 0, 0, 0};
  for (int64_t i = 0; i < n; ++i) tmp[i] = p[i];
  return _mm256_cvtps_pd(_mm_load_ps(tmp));
}

// Lanes [0, n) of v rounded to float into p.
TANDEM_AVX2 void StoreNarrow(__m256d v, int64_t n, float* p) {
  const __m128 f = _mm256_cvtpd_ps(v);
  if (n >= 4) {
    _mm_storeu_ps(p, f);
    return;
  }
  alignas(16) float tmp[4];
  _mm_store_ps(tmp, f);
  for (int64_t i = 0; i < n; ++i) p[i] = tmp[i];
}

// tanh(beta (x + kappa x^3)).
TANDEM_AVX2 __m256d TanhInner(__m256d x) {
  const __m256d x3 = _mm256_mul_pd(_mm256_mul_pd(x, x), x);
  const __m256d inner = _mm256_mul_pd(
      _mm256_set1_pd(kBeta), _mm256_fmadd_pd(_mm256_set1_pd(kKappa), x3, x));
  return avx2::TanhPd(inner);
}

}  // namespace

TANDEM_AVX2 void GeluTanhAvx2(const float* x, int64_t n, float* y) {
  const __m256d half = _mm256_set1_pd(0.5), one = _mm256_set1_pd(1.0);
  for (int64_t i = 0; i < n; i += 4) {
    const __m256d v = LoadWide(x + i, n - i);
    const __m256d t = TanhInner(v);
    StoreNarrow(_mm256_mul_pd(_mm256_mul_pd(half, v), _mm256_add_pd(one, t)),
                n - i, y + i);
  }
}

TANDEM_AVX2 void GeluTanhBackwardAvx2(const float* g, const float* x, int64_t n,
                                      float* gx) {
  const __m256d half = _mm256_set1_pd(0.5), one = _mm256_set1_pd(1.0);
  for (int64_t i = 0; i < n; i += 4) {
    const __m256d v = LoadWide(x + i, n - i);
    const __m256d t = TanhInner(v);
    // 0.5 (1 + t) + 0.5 x (1 - t^2) beta (1 + 3 kappa x^2).
    const __m256d right = _mm256_add_pd(one, t);
    const __m256d slope = _mm256_mul_pd(
        _mm256_mul_pd(_mm256_fnmadd_pd(t, t, one), _mm256_set1_pd(kBeta)),
        _mm256_fmadd_pd(_mm256_set1_pd(3 * kKappa), _mm256_mul_pd(v, v), one));
    const __m256d d = _mm256_fmadd_pd(_mm256_mul_pd(half, v), slope,
                                      _mm256_mul_pd(half, right));
    StoreNarrow(_mm256_mul_pd(LoadWide(g + i, n - i), d), n - i, gx + i);
  }
}

}  // namespace tandem::internal
