#include "tensor/cpu/skinny_gemm.h"

#include <cblas.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "tensor/cpu/blas.h"

namespace tandem::cpu {
namespace {

// Shapes around the kernel's tiles (6 rows of W, 16 rows of x), its K
// block (1024, less when x has many rows) and the sizes a step uses.
const int64_t kMs[] = {1, 5, 15, 16, 17, 33, 64, 130};
const int64_t kNs[] = {1, 5, 6, 7, 13, 64, 67};
const int64_t kKs[] = {1, 7, 64, 1025};

std::vector<float> SmallInts(int64_t count, std::mt19937& rng) {
  std::uniform_int_distribution<int> d(-2, 2);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = static_cast<float>(d(rng));
  return v;
}

std::vector<float> Uniform(int64_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = d(rng);
  return v;
}

// Small integers: every product and partial sum is exact in f32 (|sum| <=
// 4 * 1025 < 2^24), so any order of summation gives the exact result and a
// missing, repeated or misplaced term shows as a wrong value.
TEST(SkinnyGemmTest, ExactOnIntegersAtEveryShape) {
  if (!HasSkinnyGemm()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  std::mt19937 rng(11);
  for (int64_t m : kMs) {
    for (int64_t n : kNs) {
      for (int64_t k : kKs) {
        const std::vector<float> x = SmallInts(m * k, rng);
        const std::vector<float> w = SmallInts(n * k, rng);
        const std::vector<float> c0 = SmallInts(m * n, rng);
        for (auto [alpha, beta] : {std::pair{1.f, 0.f}, std::pair{1.f, 1.f},
                                   std::pair{-2.f, 0.5f}}) {
          std::vector<float> c = c0;
          SkinnyGemmNt(m, n, k, alpha, x.data(), w.data(), beta, c.data());
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              int64_t dot = 0;
              for (int64_t p = 0; p < k; ++p) {
                dot += static_cast<int64_t>(x[i * k + p]) *
                       static_cast<int64_t>(w[j * k + p]);
              }
              const double want = alpha * static_cast<double>(dot) +
                                  beta * static_cast<double>(c0[i * n + j]);
              ASSERT_EQ(c[i * n + j], static_cast<float>(want))
                  << "m=" << m << " n=" << n << " k=" << k << " at (" << i
                  << ", " << j << ") alpha=" << alpha << " beta=" << beta;
            }
          }
        }
      }
    }
  }
}

// Random floats: within the worst-case bound of f32 summation,
// (k + 2) * eps * sum |x w| (+ the beta term's rounding), against a double
// reference.
TEST(SkinnyGemmTest, MatchesDoubleReferenceOnRandomFloats) {
  if (!HasSkinnyGemm()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{64, 300, 1100},
                         {17, 67, 2100},
                         {130, 13, 700},
                         {64, 512, 1100}}) {
    std::vector<float> x(m * k), w(n * k), c(m * n);
    for (auto* v : {&x, &w, &c})
      for (float& e : *v) e = d(rng);
    const std::vector<float> c0 = c;
    SkinnyGemmNt(m, n, k, 1.f, x.data(), w.data(), 1.f, c.data());
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double dot = 0, magnitude = 0;
        for (int64_t p = 0; p < k; ++p) {
          dot += static_cast<double>(x[i * k + p]) * w[j * k + p];
          magnitude +=
              std::fabs(static_cast<double>(x[i * k + p]) * w[j * k + p]);
        }
        const double want = dot + c0[i * n + j];
        const double bound = (k + 2) * double{FLT_EPSILON} *
                             (magnitude + std::fabs(c0[i * n + j]));
        ASSERT_NEAR(c[i * n + j], want, bound)
            << "m=" << m << " n=" << n << " k=" << k << " at (" << i << ", "
            << j << ")";
      }
    }
  }
}

TEST(SkinnyGemmTest, BetaZeroNeverReadsC) {
  if (!HasSkinnyGemm()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  const int64_t m = 20, n = 9, k = 1030;
  std::vector<float> x(m * k, 1.f), w(n * k, 0.5f);
  std::vector<float> c(m * n, std::numeric_limits<float>::quiet_NaN());
  SkinnyGemmNt(m, n, k, 1.f, x.data(), w.data(), 0.f, c.data());
  for (float v : c) EXPECT_EQ(v, 515.f);
}

TEST(SkinnyGemmTest, EmptyShapes) {
  if (!HasSkinnyGemm()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  std::vector<float> c = {1.f, 2.f, 3.f, 4.f};
  SkinnyGemmNt(0, 2, 3, 1.f, nullptr, nullptr, 0.f, c.data());
  SkinnyGemmNt(2, 0, 3, 1.f, nullptr, nullptr, 0.f, c.data());
  EXPECT_EQ(c, (std::vector<float>{1.f, 2.f, 3.f, 4.f}));
  SkinnyGemmNt(2, 2, 0, 1.f, nullptr, nullptr, 2.f, c.data());
  EXPECT_EQ(c, (std::vector<float>{2.f, 4.f, 6.f, 8.f}));
  SkinnyGemmNt(2, 2, 0, 1.f, nullptr, nullptr, 0.f, c.data());
  EXPECT_EQ(c, (std::vector<float>{0.f, 0.f, 0.f, 0.f}));
}

// Deterministic: the same bits from two threads at once (each keeps its
// own packing buffer) as from one.
TEST(SkinnyGemmTest, SameBitsOnEveryThread) {
  if (!HasSkinnyGemm()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  const int64_t m = 64, n = 512, k = 1500;
  std::mt19937 rng(13);
  const std::vector<float> x = Uniform(m * k, rng), w = Uniform(n * k, rng);
  std::vector<float> want(m * n);
  SkinnyGemmNt(m, n, k, 1.f, x.data(), w.data(), 0.f, want.data());
  std::vector<std::vector<float>> got(2, std::vector<float>(m * n));
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      SkinnyGemmNt(m, n, k, 1.f, x.data(), w.data(), 0.f, got[t].data());
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(got[0], want);
  EXPECT_EQ(got[1], want);
}

TEST(SkinnyGemmTest, PolicyTakesOnlySkinnyXWt) {
  if (!HasSkinnyGemm() || __builtin_cpu_supports("avx512f")) {
    EXPECT_FALSE(UseSkinnyGemm(false, true, 64, 4096, 4096));
    return;
  }
  // The large MLP's forward products at batch 64.
  EXPECT_TRUE(UseSkinnyGemm(false, true, 64, 4096, 1024));
  EXPECT_TRUE(UseSkinnyGemm(false, true, 64, 4096, 4096));
  EXPECT_TRUE(UseSkinnyGemm(false, true, 64, 1024, 4096));
  EXPECT_FALSE(UseSkinnyGemm(false, true, 129, 4096, 4096));  // OpenBLAS
  EXPECT_FALSE(UseSkinnyGemm(false, true, 64, 10, 4096));     // short n
  EXPECT_FALSE(UseSkinnyGemm(false, true, 64, 4096, 64));     // short k
  EXPECT_FALSE(UseSkinnyGemm(false, false, 64, 4096, 4096));  // g·W: OpenBLAS
  EXPECT_FALSE(UseSkinnyGemm(true, false, 4096, 4096, 64));   // gᵀ·x
  EXPECT_FALSE(UseSkinnyGemm(true, true, 64, 4096, 4096));
}

// cpu::Gemm sends the skinny x·Wᵀ here under kFastest and to OpenBLAS
// under kPyTorch (PyTorch's calls, bit for bit).
TEST(SkinnyGemmTest, GemmRoutesByKernelChoice) {
  if (!HasSkinnyGemm() || __builtin_cpu_supports("avx512f")) {
    GTEST_SKIP() << "the skinny path is on for AVX2 CPUs without AVX-512";
  }
  const int64_t m = 64, n = 256, k = 300;
  std::mt19937 rng(14);
  const std::vector<float> x = Uniform(m * k, rng), w = Uniform(n * k, rng);
  std::vector<float> skinny(m * n), blas(m * n), fastest(m * n), pytorch(m * n);
  SkinnyGemmNt(m, n, k, 1.f, x.data(), w.data(), 0.f, skinny.data());
  ASSERT_TRUE(Gemm<float>(false, true, m, n, k, 1.f, x.data(), w.data(), 0.f,
                          fastest.data())
                  .ok());
  EXPECT_EQ(fastest, skinny);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.f, x.data(),
              k, w.data(), k, 0.f, blas.data(), n);
  SetKernelChoice(KernelChoice::kPyTorch);
  const absl::Status s = Gemm<float>(false, true, m, n, k, 1.f, x.data(),
                                     w.data(), 0.f, pytorch.data());
  SetKernelChoice(KernelChoice::kFastest);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(pytorch, blas);
  // The two kernels sum in different orders: some results differ (this is
  // what kPyTorch is for).
  EXPECT_NE(skinny, blas);
}

}  // namespace
}  // namespace tandem::cpu
