#include "tensor/cpu/packed_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tensor/cpu/avx2_gemm_common.h"
#include "tensor/cpu/skinny_gemm.h"

namespace tandem::cpu {
namespace {

using internal::RoundUp;
using internal::Scratch;
using internal::Update;

// The micro-kernel's tile: kMr rows of C by kNr columns (two 8-float
// vectors): 12 accumulators + 2 B vectors + 1 broadcast of 16 registers.
constexpr int64_t kMr = 6;
constexpr int64_t kNr = 16;
// K block: a packed 16-column strip of B (16 KiB) stays in L1 while the
// micro-kernel passes every 6-row panel of the packed A block over it.
constexpr int64_t kKc = 256;
// Floats of the packed A block, kept in L2 (128 KiB of 512).
constexpr int64_t kAFloats = 32 * 1024;
// Columns of B packed at once (the N block): 1024 x kKc floats = 1 MiB.
constexpr int64_t kNc = 1024;
// Packing row-major B asks for the row this many rows on (below).
constexpr int64_t kAhead = 4;
// Below this K block the tiles walk C along its rows (Run).
constexpr int64_t kRowOrderKc = 128;

// Packs op(A)[i0, i0 + mc) x [p0, p0 + kc) into 6-row panels, k-major
// within a panel (dst[panel][k][r]), zeros past m.
void PackA(bool ta, const float* a, int64_t lda, int64_t m, int64_t i0,
           int64_t mc, int64_t p0, int64_t kc, float* dst) {
  for (int64_t ip = 0; ip < mc; ip += kMr, dst += kMr * kc) {
    const int64_t row0 = i0 + ip;
    const int64_t rows = std::min<int64_t>(kMr, m - row0);
    if (ta) {  // op(A)(i, p) = a[p * lda + i]: 6 contiguous floats per k
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = a + (p0 + p) * lda + row0;
        float* d = dst + p * kMr;
        for (int64_t r = 0; r < rows; ++r) d[r] = src[r];
        for (int64_t r = rows; r < kMr; ++r) d[r] = 0.f;
      }
    } else {  // op(A)(i, p) = a[i * lda + p]: a row per r
      for (int64_t r = 0; r < kMr; ++r) {
        if (r < rows) {
          const float* src = a + (row0 + r) * lda + p0;
          for (int64_t p = 0; p < kc; ++p) dst[p * kMr + r] = src[p];
        } else {
          for (int64_t p = 0; p < kc; ++p) dst[p * kMr + r] = 0.f;
        }
      }
    }
  }
}

// Floats from one packed strip of B to the next: kc rows of 16 and a cache
// line more, so that strips are not a power of two apart (at kc = 256,
// 16 KiB: every strip's row p would share one L1 set and a few L2 sets, and
// packing, which writes row p of every strip in turn, would thrash them).
int64_t StripStride(int64_t kc) { return kc * kNr + 16; }

// Packs op(B)[p0, p0 + kc) x [j0, j0 + nc) into 16-column strips, k-major
// within a strip (dst[strip * StripStride(kc) + k * 16 + j]), zeros past n.
TANDEM_AVX2 void PackB(bool tb, const float* b, int64_t ldb, int64_t b_rows,
                       int64_t n, int64_t j0, int64_t nc, int64_t p0,
                       int64_t kc, float* dst) {
  const int64_t strips = RoundUp(nc, kNr) / kNr;
  if (!tb) {
    // op(B)(p, j) = b[p * ldb + j]: read each row of the block once, in
    // order (the memory-friendly direction), scattering 16-float pieces.
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = b + (p0 + p) * ldb + j0;
      // B's rows are far apart (ldb floats): each is a new stream the
      // hardware prefetcher starts cold. Ask for a row kAhead rows on
      // (of this block or the next K block) while copying this one.
      const float* ahead =
          p0 + p + kAhead < b_rows ? src + kAhead * ldb : nullptr;
      for (int64_t s = 0; s < strips; ++s) {
        if (ahead != nullptr) {
          _mm_prefetch(reinterpret_cast<const char*>(ahead + s * kNr),
                       _MM_HINT_T0);
        }
        float* d = dst + s * StripStride(kc) + p * kNr;
        const int64_t cols = std::min<int64_t>(kNr, n - j0 - s * kNr);
        if (cols == kNr) {
          _mm256_store_ps(d, _mm256_loadu_ps(src + s * kNr));
          _mm256_store_ps(d + 8, _mm256_loadu_ps(src + s * kNr + 8));
        } else {
          for (int64_t j = 0; j < cols; ++j) d[j] = src[s * kNr + j];
          for (int64_t j = cols; j < kNr; ++j) d[j] = 0.f;
        }
      }
    }
    return;
  }
  // op(B)(p, j) = b[j * ldb + p]: a row of b per column of the strip.
  for (int64_t s = 0; s < strips; ++s) {
    float* d = dst + s * StripStride(kc);
    const int64_t cols = std::min<int64_t>(kNr, n - j0 - s * kNr);
    for (int64_t j = 0; j < kNr; ++j) {
      if (j < cols) {
        const float* src = b + (j0 + s * kNr + j) * ldb + p0;
        for (int64_t p = 0; p < kc; ++p) d[p * kNr + j] = src[p];
      } else {
        for (int64_t p = 0; p < kc; ++p) d[p * kNr + j] = 0.f;
      }
    }
  }
}

// C's 6x16 tile (row stride ldc) meets the accumulators as Update::Apply
// says, 8 lanes at a time.
TANDEM_AVX2 inline void UpdateTile(const __m256* acc, float* c, int64_t ldc,
                                   const Update& u) {
  const __m256 alpha = _mm256_set1_ps(u.alpha);
  const __m256 beta = _mm256_set1_ps(u.beta);
  for (int64_t r = 0; r < kMr; ++r) {
    float* row = c + r * ldc;
    for (int h = 0; h < 2; ++h) {
      const __m256 v = _mm256_mul_ps(alpha, acc[2 * r + h]);
      __m256 out;
      if (!u.first) {
        out = _mm256_add_ps(_mm256_loadu_ps(row + 8 * h), v);
      } else if (u.beta == 0.f) {
        out = v;
      } else {
        out =
            _mm256_add_ps(_mm256_mul_ps(beta, _mm256_loadu_ps(row + 8 * h)), v);
      }
      _mm256_storeu_ps(row + 8 * h, out);
    }
  }
}

// One 6x16 tile: the sum over p < kc of a[p][r] * b[p][j] (packed panel
// and strip) meets C[r][j] (row stride ldc) for r < rows, j < cols.
TANDEM_AVX2 void Tile(int64_t kc, const float* a, const float* b, float* c,
                      int64_t ldc, int64_t rows, int64_t cols,
                      const Update& u) {
  // C's tile is needed after the K loop: have it on its way meanwhile
  // (from L3 or memory when C is large, as the weight gradient's 64 MB).
  for (int64_t r = 0; r < rows; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + kNr - 1),
                 _MM_HINT_T0);
  }
  __m256 acc[2 * kMr];
  {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00,
           c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00,
           c50 = c00, c51 = c00;
    for (int64_t p = 0; p < kc; ++p, a += kMr, b += kNr) {
      const __m256 b0 = _mm256_load_ps(b);
      const __m256 b1 = _mm256_load_ps(b + 8);
      __m256 x;
#define TANDEM_PACKED_ROW(i, c0, c1) \
  x = _mm256_broadcast_ss(a + i);    \
  c0 = _mm256_fmadd_ps(x, b0, c0);   \
  c1 = _mm256_fmadd_ps(x, b1, c1);
      TANDEM_PACKED_ROW(0, c00, c01)
      TANDEM_PACKED_ROW(1, c10, c11)
      TANDEM_PACKED_ROW(2, c20, c21)
      TANDEM_PACKED_ROW(3, c30, c31)
      TANDEM_PACKED_ROW(4, c40, c41)
      TANDEM_PACKED_ROW(5, c50, c51)
#undef TANDEM_PACKED_ROW
    }
    acc[0] = c00, acc[1] = c01, acc[2] = c10, acc[3] = c11;
    acc[4] = c20, acc[5] = c21, acc[6] = c30, acc[7] = c31;
    acc[8] = c40, acc[9] = c41, acc[10] = c50, acc[11] = c51;
  }
  if (rows == kMr && cols == kNr) {
    UpdateTile(acc, c, ldc, u);
    return;
  }
  // An edge tile goes through a full one, so that every element of C
  // meets its sum by the same arithmetic.
  alignas(32) float tile[kMr * kNr] = {};
  const bool reads_c = !(u.first && u.beta == 0.f);
  for (int64_t r = 0; r < rows && reads_c; ++r) {
    for (int64_t j = 0; j < cols; ++j) tile[r * kNr + j] = c[r * ldc + j];
  }
  UpdateTile(acc, tile, kNr, u);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) c[r * ldc + j] = tile[r * kNr + j];
  }
}

void Run(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
         const float* a, const float* b, float beta, float* c) {
  thread_local std::vector<float> a_buffer, b_buffer;
  const int64_t lda = ta ? m : k, ldb = tb ? k : n;
  // K in equal blocks of at most kKc (384 = 2 x 192, not 256 + 128: a
  // short last block pays the tiles' fixed costs for little work).
  const int64_t kc_max = (k + (k + kKc - 1) / kKc - 1) / ((k + kKc - 1) / kKc);
  // The A block: as many 6-row panels as fit kAFloats (all of a short A).
  const int64_t mc_max = std::min(
      RoundUp(m, kMr), std::max<int64_t>(kMr, kAFloats / kc_max / kMr * kMr));
  const int64_t nc_max = std::min(RoundUp(n, kNr), kNc);
  float* ap = Scratch(a_buffer, mc_max * kc_max);
  float* bp = Scratch(b_buffer, nc_max / kNr * StripStride(kc_max));
  for (int64_t jc = 0; jc < n; jc += nc_max) {
    const int64_t nc = std::min(nc_max, n - jc);
    for (int64_t pc = 0; pc < k; pc += kc_max) {
      const int64_t kc = std::min(kc_max, k - pc);
      PackB(tb, b, ldb, k, n, jc, nc, pc, kc, bp);
      const Update u{alpha, beta, pc == 0};
      for (int64_t ic = 0; ic < m; ic += mc_max) {
        const int64_t mc = std::min(mc_max, m - ic);
        PackA(ta, a, lda, m, ic, mc, pc, kc, ap);
        if (kc < kRowOrderKc) {
          // A short K (the weight gradient's K = batch): C's traffic
          // dominates, so walk C along its rows (sequential lines, one
          // page after another) with a 6-row panel of A in L1 and the
          // strips of B from L2.
          for (int64_t ir = 0; ir < mc; ir += kMr) {
            const int64_t rows = std::min<int64_t>(kMr, mc - ir);
            for (int64_t jr = 0; jr < nc; jr += kNr) {
              Tile(kc, ap + ir * kc, bp + jr / kNr * StripStride(kc),
                   c + (ic + ir) * n + jc + jr, n, rows,
                   std::min<int64_t>(kNr, nc - jr), u);
            }
          }
          continue;
        }
        for (int64_t jr = 0; jr < nc; jr += kNr) {
          const float* strip = bp + jr / kNr * StripStride(kc);
          const int64_t cols = std::min<int64_t>(kNr, nc - jr);
          for (int64_t ir = 0; ir < mc; ir += kMr) {
            Tile(kc, ap + ir * kc, strip, c + (ic + ir) * n + jc + jr, n,
                 std::min<int64_t>(kMr, mc - ir), cols, u);
          }
        }
      }
    }
  }
}

}  // namespace

void PackedGemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                int64_t k, float alpha, const float* a, const float* b,
                float beta, float* c) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m * n; ++i) c[i] = beta == 0.f ? 0.f : beta * c[i];
    return;
  }
  Run(transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c);
}

bool UsePackedGemmTn(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                     int64_t k, float beta) {
  // Only where it wins (bench/PERFORMANCE.md, "zero_grad as a mark"): a
  // short K and beta == 0, so C is only written; with beta == 1 OpenBLAS
  // was ~5 % faster inside the step.
  constexpr int64_t kShortKMax = 128, kLongMin = 256;
  static const bool tuned_here =
      HasSkinnyGemm() && !__builtin_cpu_supports("avx512f");
  return tuned_here && transpose_a && !transpose_b && beta == 0.f &&
         k <= kShortKMax && m >= kLongMin && n >= kLongMin;
}

}  // namespace tandem::cpu
