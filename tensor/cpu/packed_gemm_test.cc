#include "tensor/cpu/packed_gemm.h"

#include <cblas.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "tensor/cpu/blas.h"
#include "tensor/cpu/skinny_gemm.h"

namespace tandem::cpu {
namespace {

struct Shape {
  int64_t m, n, k;
};

// Around the tiles (6 rows, 16 columns), the K block (256), the A block
// (128 rows when K >= 256) and the N block (1024 columns), K = 1, and the
// step's shapes in small.
const Shape kShapes[] = {
    {1, 1, 1},    {5, 15, 1},    {6, 16, 7},     {7, 17, 64},  {13, 33, 3},
    {64, 48, 64}, {64, 37, 257}, {130, 20, 300}, {3, 1030, 5}, {17, 9, 513},
};

std::vector<float> SmallInts(int64_t count, std::mt19937& rng) {
  std::uniform_int_distribution<int> d(-2, 2);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = static_cast<float>(d(rng));
  return v;
}

// op(A)(i, p) and op(B)(p, j) of row-major dense operands.
float At(const std::vector<float>& a, bool ta, int64_t m, int64_t k, int64_t i,
         int64_t p) {
  return ta ? a[p * m + i] : a[i * k + p];
}
float Bt(const std::vector<float>& b, bool tb, int64_t k, int64_t n, int64_t p,
         int64_t j) {
  return tb ? b[j * k + p] : b[p * n + j];
}

// Small integers: every product and partial sum is exact in f32 (|sum| <=
// 4 * 513 < 2^24), so any summation order gives the exact result and a
// missing, repeated or misplaced term shows as a wrong value.
TEST(PackedGemmTest, ExactOnIntegersInEveryLayoutAndShape) {
  if (!HasSkinnyGemm()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  std::mt19937 rng(5);
  for (const Shape& s : kShapes) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const std::vector<float> a = SmallInts(s.m * s.k, rng);
        const std::vector<float> b = SmallInts(s.k * s.n, rng);
        const std::vector<float> c0 = SmallInts(s.m * s.n, rng);
        for (auto [alpha, beta] : {std::pair{1.f, 0.f}, std::pair{1.f, 1.f},
                                   std::pair{-2.f, 0.5f}}) {
          std::vector<float> c = c0;
          PackedGemm(ta, tb, s.m, s.n, s.k, alpha, a.data(), b.data(), beta,
                     c.data());
          for (int64_t i = 0; i < s.m; ++i) {
            for (int64_t j = 0; j < s.n; ++j) {
              double dot = 0;
              for (int64_t p = 0; p < s.k; ++p) {
                dot += static_cast<double>(At(a, ta, s.m, s.k, i, p)) *
                       Bt(b, tb, s.k, s.n, p, j);
              }
              const double want = alpha * dot + beta * c0[i * s.n + j];
              ASSERT_EQ(c[i * s.n + j], static_cast<float>(want))
                  << "m=" << s.m << " n=" << s.n << " k=" << s.k << " ta=" << ta
                  << " tb=" << tb << " alpha=" << alpha << " beta=" << beta
                  << " at (" << i << ", " << j << ")";
            }
          }
        }
      }
    }
  }
}

// Real values against a double reference: within a few ulps of the sum of
// magnitudes (f32 accumulation over K), a bound a wrong term would break.
TEST(PackedGemmTest, CloseToDoubleReferenceOnRealValues) {
  if (!HasSkinnyGemm()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (const Shape& s : {Shape{64, 100, 300}, Shape{70, 40, 64}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        std::vector<float> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n);
        for (float& v : a) v = d(rng);
        for (float& v : b) v = d(rng);
        PackedGemm(ta, tb, s.m, s.n, s.k, 1.f, a.data(), b.data(), 0.f,
                   c.data());
        for (int64_t i = 0; i < s.m; ++i) {
          for (int64_t j = 0; j < s.n; ++j) {
            double dot = 0, mag = 0;
            for (int64_t p = 0; p < s.k; ++p) {
              const double t = static_cast<double>(At(a, ta, s.m, s.k, i, p)) *
                               Bt(b, tb, s.k, s.n, p, j);
              dot += t;
              mag += std::fabs(t);
            }
            EXPECT_NEAR(c[i * s.n + j], dot, 4 * s.k * 6e-8 * mag)
                << "ta=" << ta << " tb=" << tb << " at (" << i << ", " << j
                << ")";
          }
        }
      }
    }
  }
}

TEST(PackedGemmTest, BetaZeroNeverReadsCAndKZeroScales) {
  if (!HasSkinnyGemm()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  const int64_t m = 7, n = 18, k = 3;
  std::vector<float> a(m * k, 1.f), b(k * n, 2.f);
  std::vector<float> c(m * n, std::numeric_limits<float>::quiet_NaN());
  PackedGemm(false, false, m, n, k, 1.f, a.data(), b.data(), 0.f, c.data());
  for (float v : c) EXPECT_EQ(v, 6.f);
  PackedGemm(true, true, m, n, 0, 1.f, a.data(), b.data(), 0.5f, c.data());
  for (float v : c) EXPECT_EQ(v, 3.f);
  c.assign(m * n, std::numeric_limits<float>::quiet_NaN());
  PackedGemm(true, false, m, n, 0, 1.f, a.data(), b.data(), 0.f, c.data());
  for (float v : c) EXPECT_EQ(v, 0.f);
}

// The same inputs give the same bits on another call (packing buffers are
// reused, never read past what was packed).
TEST(PackedGemmTest, Deterministic) {
  if (!HasSkinnyGemm()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  const int64_t m = 64, n = 70, k = 600;
  std::vector<float> a(m * k), b(k * n), c1(m * n), c2(m * n);
  for (float& v : a) v = d(rng);
  for (float& v : b) v = d(rng);
  PackedGemm(false, false, m, n, k, 1.f, a.data(), b.data(), 0.f, c1.data());
  std::vector<float> big(300 * 300, 1.f);  // a larger call in between
  std::vector<float> cb(300 * 300);
  PackedGemm(true, false, 300, 300, 300, 1.f, big.data(), big.data(), 0.f,
             cb.data());
  PackedGemm(false, false, m, n, k, 1.f, a.data(), b.data(), 0.f, c2.data());
  EXPECT_EQ(c1, c2);
}

// Two threads at once (each with its own packing buffers) give the bits
// one thread gives.
TEST(PackedGemmTest, SameBitsOnEveryThread) {
  if (!HasSkinnyGemm()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  const int64_t m = 300, n = 270, k = 64;
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> a(k * m), b(k * n), want(m * n);
  for (float& v : a) v = d(rng);
  for (float& v : b) v = d(rng);
  PackedGemm(true, false, m, n, k, 1.f, a.data(), b.data(), 0.f, want.data());
  std::vector<std::vector<float>> got(2, std::vector<float>(m * n));
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      PackedGemm(true, false, m, n, k, 1.f, a.data(), b.data(), 0.f,
                 got[t].data());
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(got[0], want);
  EXPECT_EQ(got[1], want);
}

// Linear's weight gradient gᵀ·x (K = batch) goes to PackedGemm under
// kFastest only when it is written (beta 0: a gradient marked zero), and
// never under kPyTorch, whose beta-0 product keeps OpenBLAS's own bits
// (blas.cc zeroes C and runs beta 1, which is what OpenBLAS's driver does).
TEST(PackedGemmTest, GemmRoutesTheWrittenWeightGradient) {
  if (!HasSkinnyGemm() || __builtin_cpu_supports("avx512f")) {
    GTEST_SKIP() << "the packed path is on for AVX2 CPUs without AVX-512";
  }
  const int64_t m = 256, n = 272, k = 64;
  EXPECT_TRUE(UsePackedGemmTn(true, false, m, n, k, 0.f));
  EXPECT_FALSE(UsePackedGemmTn(true, false, m, n, k, 1.f));
  EXPECT_FALSE(UsePackedGemmTn(true, false, m, n, 129, 0.f));
  EXPECT_FALSE(UsePackedGemmTn(true, false, 255, n, k, 0.f));
  EXPECT_FALSE(UsePackedGemmTn(false, false, m, n, k, 0.f));
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> a(k * m), b(k * n);
  for (float& v : a) v = d(rng);
  for (float& v : b) v = d(rng);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> packed(m * n), fastest(m * n, nan);
  PackedGemm(true, false, m, n, k, 1.f, a.data(), b.data(), 0.f, packed.data());
  ASSERT_TRUE(Gemm<float>(true, false, m, n, k, 1.f, a.data(), b.data(), 0.f,
                          fastest.data())
                  .ok());
  EXPECT_EQ(fastest, packed);
  // beta 1 accumulates on OpenBLAS, under either choice.
  std::vector<float> blas_acc(m * n, 0.5f), fastest_acc(m * n, 0.5f);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, 1.f, a.data(),
              m, b.data(), n, 1.f, blas_acc.data(), n);
  ASSERT_TRUE(Gemm<float>(true, false, m, n, k, 1.f, a.data(), b.data(), 1.f,
                          fastest_acc.data())
                  .ok());
  EXPECT_EQ(fastest_acc, blas_acc);
  // kPyTorch: OpenBLAS's beta-0 bits in every layout, NaN in C ignored.
  SetKernelChoice(KernelChoice::kPyTorch);
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      std::vector<float> blas(m * n, nan), pytorch(m * n, nan);
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                  tb ? CblasTrans : CblasNoTrans, m, n, k, 1.f, a.data(),
                  ta ? m : k, b.data(), tb ? k : n, 0.f, blas.data(), n);
      const bool ok = Gemm<float>(ta, tb, m, n, k, 1.f, a.data(), b.data(), 0.f,
                                  pytorch.data())
                          .ok();
      EXPECT_TRUE(ok);
      EXPECT_EQ(pytorch, blas) << ta << tb;
    }
  }
  SetKernelChoice(KernelChoice::kFastest);
  // The two kernels sum in different orders (what kPyTorch is for).
  std::vector<float> blas0(m * n);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, 1.f, a.data(),
              m, b.data(), n, 0.f, blas0.data(), n);
  EXPECT_NE(packed, blas0);
}

}  // namespace
}  // namespace tandem::cpu
