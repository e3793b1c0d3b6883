#include "tensor/cpu/skinny_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tensor/cpu/avx2_gemm_common.h"

namespace tandem::cpu {
namespace {

using internal::RoundUp;
using internal::Scratch;
using internal::Update;

// The micro-kernel's tile: kMr rows of C by kNr columns (two 8-float
// vectors), 12 accumulators + 2 B vectors + 1 broadcast of 16 registers.
constexpr int kMr = 6;
constexpr int kNr = 16;
// Floats of packed operand kept in L2 (256 KiB of its 512 KiB here).
constexpr int64_t kPackedFloats = 64 * 1024;
// K block: kMr rows of W of this many floats stay in L1
// (24 KiB of 32) while every packed strip of x passes over them.
constexpr int64_t kMaxKc = 1024;

// acc[2r], acc[2r + 1] = sum over k < kc of rows[r][k] * b[k * 16 + 0..15]
// (b: a packed strip, 32-byte aligned).
TANDEM_AVX2 inline void Micro(int64_t kc, const float* const* rows,
                              const float* b, __m256* acc) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00,
         c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00,
         c51 = c00;
  const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3],
              *r4 = rows[4], *r5 = rows[5];
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(b + k * kNr);
    const __m256 b1 = _mm256_load_ps(b + k * kNr + 8);
    __m256 a;
#define TANDEM_SKINNY_ROW(i, c0, c1) \
  a = _mm256_broadcast_ss(r##i + k); \
  c0 = _mm256_fmadd_ps(a, b0, c0);   \
  c1 = _mm256_fmadd_ps(a, b1, c1);
    TANDEM_SKINNY_ROW(0, c00, c01)
    TANDEM_SKINNY_ROW(1, c10, c11)
    TANDEM_SKINNY_ROW(2, c20, c21)
    TANDEM_SKINNY_ROW(3, c30, c31)
    TANDEM_SKINNY_ROW(4, c40, c41)
    TANDEM_SKINNY_ROW(5, c50, c51)
#undef TANDEM_SKINNY_ROW
  }
  acc[0] = c00, acc[1] = c01, acc[2] = c10, acc[3] = c11;
  acc[4] = c20, acc[5] = c21, acc[6] = c30, acc[7] = c31;
  acc[8] = c40, acc[9] = c41, acc[10] = c50, acc[11] = c51;
}

// Writes the tile transposed into C: its element (r, j), for r < rows and
// j < cols, goes to c[j * ldc + r] (C^T's tile is C's).
TANDEM_AVX2 void StoreTransposed(const __m256* acc, float* c, int64_t ldc,
                                 int64_t rows, int64_t cols, const Update& u) {
  alignas(32) float tile[kMr][kNr];
  for (int r = 0; r < kMr; ++r) {
    _mm256_store_ps(tile[r], acc[2 * r]);
    _mm256_store_ps(tile[r] + 8, acc[2 * r + 1]);
  }
  for (int64_t j = 0; j < cols; ++j) {
    float* row = c + j * ldc;
    if (u.first && u.beta == 0.f) {
      for (int64_t r = 0; r < rows; ++r) row[r] = u.alpha * tile[r][j];
    } else {
      for (int64_t r = 0; r < rows; ++r) row[r] = u.Apply(tile[r][j], row[r]);
    }
  }
}

// Packs rows [row0, row0 + 16) x columns [k0, k0 + kc) of the row-major
// x (ld columns, `rows` rows) k-major: dst[k * 16 + j], zeros past `rows`.
void PackRowsKMajor(const float* x, int64_t ld, int64_t rows, int64_t row0,
                    int64_t k0, int64_t kc, float* dst) {
  for (int64_t j = 0; j < kNr; ++j) {
    const int64_t row = row0 + j;
    if (row < rows) {
      const float* src = x + row * ld + k0;
      for (int64_t k = 0; k < kc; ++k) dst[k * kNr + j] = src[k];
    } else {
      for (int64_t k = 0; k < kc; ++k) dst[k * kNr + j] = 0.f;
    }
  }
}

// C[m,n] = x[m,k] W[n,k]^T as C^T = W x^T: W's rows read in place (six at
// a time, the broadcast operand), x packed into 16-row strips, each 6x16
// tile of C^T stored transposed.
TANDEM_AVX2 void GemmNt(int64_t m, int64_t n, int64_t k, float alpha,
                        const float* x, const float* w, float beta, float* c) {
  thread_local std::vector<float> buffer;
  const int64_t strips = RoundUp(m, kNr) / kNr;
  const int64_t kc_max =
      std::clamp<int64_t>(kPackedFloats / (strips * kNr), 1, kMaxKc);
  float* packed = Scratch(buffer, strips * kNr * std::min(k, kc_max));
  for (int64_t k0 = 0; k0 < k; k0 += kc_max) {
    const int64_t kc = std::min(kc_max, k - k0);
    for (int64_t s = 0; s < strips; ++s) {
      PackRowsKMajor(x, k, m, s * kNr, k0, kc, packed + s * kNr * kc);
    }
    const Update u{alpha, beta, k0 == 0};
    for (int64_t i0 = 0; i0 < n; i0 += kMr) {
      const int64_t rows = std::min<int64_t>(kMr, n - i0);
      const float* w_rows[kMr];
      // Rows past n repeat the last one; their sums are never stored.
      for (int r = 0; r < kMr; ++r) {
        w_rows[r] = w + (i0 + std::min<int64_t>(r, rows - 1)) * k + k0;
      }
      for (int64_t s = 0; s < strips; ++s) {
        __m256 acc[2 * kMr];
        Micro(kc, w_rows, packed + s * kNr * kc, acc);
        StoreTransposed(acc, c + s * kNr * n + i0, n, rows,
                        std::min<int64_t>(kNr, m - s * kNr), u);
      }
    }
  }
}

}  // namespace

bool HasSkinnyGemm() {
  static const bool has =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

bool UseSkinnyGemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                   int64_t k) {
  // Where it measured faster than the libraries (bench/PERFORMANCE.md,
  // "GEMM at the step's shapes"): x·Wᵀ with at most kShortMax rows against
  // W of at least kLongMin rows and columns.
  constexpr int64_t kShortMax = 128, kLongMin = 256;
  // Measured on an AVX2 machine only: where AVX-512 exists the libraries'
  // wider kernels keep the product (an AVX2 kernel has half their peak).
  static const bool tuned_here =
      HasSkinnyGemm() && !__builtin_cpu_supports("avx512f");
  return tuned_here && !transpose_a && transpose_b && m <= kShortMax &&
         n >= kLongMin && k >= kLongMin;
}

void SkinnyGemmNt(int64_t m, int64_t n, int64_t k, float alpha, const float* x,
                  const float* w, float beta, float* c) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m * n; ++i) c[i] = beta == 0.f ? 0.f : beta * c[i];
    return;
  }
  GemmNt(m, n, k, alpha, x, w, beta, c);
}

}  // namespace tandem::cpu
