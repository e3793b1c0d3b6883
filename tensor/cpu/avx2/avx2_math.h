// Double-precision AVX2 + FMA building blocks shared by the f32 CPU
// kernels that take exponentials, tanh and sums in double
// (attention_avx2.cc's softmax, gelu_avx2.cc). Every function carries the
// target attribute, so callers build without -march=native; callers run them
// only after Avx2FmaCpu().
//
// Thread-safety: pure functions.
#ifndef TANDEM_TENSOR_CPU_AVX2_AVX2_MATH_H_
#define TANDEM_TENSOR_CPU_AVX2_AVX2_MATH_H_

#include <immintrin.h>

#include <cstdint>

#define TANDEM_AVX2 __attribute__((target("avx2,fma")))

namespace tandem::internal::avx2 {

// True when this CPU runs AVX2 and FMA (asked once).
inline bool Avx2FmaCpu() {
  static const bool cpu =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return cpu;
}

// exp(x) for x <= 0 (scores minus their row's maximum), to about one unit
// in the last place of a double: x = n ln2 + r with |r| <= ln2 / 2
// (Cody-Waite, fdlibm's split of ln2), exp(r) by its Taylor series to
// r^13 / 13! (the next term is below 2^-60 of the result), times 2^n.
// Below -708 the result is clamped to exp(-708) (about 3e-308), which
// rounds to the same float 0 after normalisation; NaN stays NaN.
inline TANDEM_AVX2 __m256d ExpPd(__m256d x) {
  x = _mm256_max_pd(_mm256_set1_pd(-708.0), x);  // NaN in x is kept
  const __m256d n =
      _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634)),
                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d r =
      _mm256_fnmadd_pd(n, _mm256_set1_pd(6.93147180369123816490e-01), x);
  r = _mm256_fnmadd_pd(n, _mm256_set1_pd(1.90821492927058770002e-10), r);
  // 1/k! for k = 13 down to 0.
  static constexpr double kInvFact[] = {1.0 / 6227020800.0,
                                        1.0 / 479001600.0,
                                        1.0 / 39916800.0,
                                        1.0 / 3628800.0,
                                        1.0 / 362880.0,
                                        1.0 / 40320.0,
                                        1.0 / 5040.0,
                                        1.0 / 720.0,
                                        1.0 / 120.0,
                                        1.0 / 24.0,
                                        1.0 / 6.0,
                                        0.5,
                                        1.0,
                                        1.0};
  __m256d p = _mm256_set1_pd(kInvFact[0]);
  for (int i = 1; i < 14; ++i) {
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(kInvFact[i]));
  }
  // 2^n: n in [-1022, 0] (x in [-708, 0]), a normal double's exponent.
  const __m256i e = _mm256_slli_epi64(
      _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(n)),
                       _mm256_set1_epi64x(1023)),
      52);
  return _mm256_mul_pd(p, _mm256_castsi256_pd(e));
}

// Lanes [0, n) of all ones, the rest zero (n in [0, 4]).
inline TANDEM_AVX2 __m256d LaneMask(int64_t n) {
  const __m256i idx = _mm256_set_epi64x(3, 2, 1, 0);
  return _mm256_castsi256_pd(_mm256_cmpgt_epi64(_mm256_set1_epi64x(n), idx));
}

inline TANDEM_AVX2 double HorizontalSum(__m256d v) {
  const __m128d s =
      _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

// tanh(z) = sign(z) (1 - e) / (1 + e), e = exp(-2 |z|), in double: about
// 1e-16 absolute (relative to 1), so its float rounding is within one ulp
// of tanhf's; NaN stays NaN.
inline TANDEM_AVX2 __m256d TanhPd(__m256d z) {
  const __m256d sign = _mm256_set1_pd(-0.0);
  const __m256d a = _mm256_andnot_pd(sign, z);
  const __m256d e = ExpPd(_mm256_mul_pd(a, _mm256_set1_pd(-2.0)));
  const __m256d one = _mm256_set1_pd(1.0);
  const __m256d t = _mm256_div_pd(_mm256_sub_pd(one, e), _mm256_add_pd(one, e));
  return _mm256_or_pd(t, _mm256_and_pd(sign, z));
}

}  // namespace tandem::internal::avx2

#endif  // TANDEM_TENSOR_CPU_AVX2_AVX2_MATH_H_
