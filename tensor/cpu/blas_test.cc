#include "tensor/cpu/blas.h"

#include <cblas.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace tandem::cpu {
namespace {

// Reference row-major GEMM (test only).
std::vector<double> Naive(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                          const std::vector<double>& a,
                          const std::vector<double>& b) {
  std::vector<double> c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) {
        const double av = ta ? a[p * m + i] : a[i * k + p];
        const double bv = tb ? b[j * k + p] : b[p * n + j];
        c[i * n + j] += av * bv;
      }
  return c;
}

TEST(BlasTest, DefaultsToOneThread) { EXPECT_EQ(BlasNumThreads(), 1); }

TEST(BlasTest, AllTransposesAndBetas) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> d(-1, 1);
  const int64_t m = 3, n = 4, k = 5;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      std::vector<double> a(m * k), b(k * n), c(m * n);
      for (auto* v : {&a, &b, &c})
        for (double& x : *v) x = d(rng);
      const std::vector<double> ref = Naive(ta, tb, m, n, k, a, b);
      std::vector<double> c0 = c;
      ASSERT_TRUE(
          Gemm<double>(ta, tb, m, n, k, 1.0, a.data(), b.data(), 0.0, c0.data())
              .ok());
      std::vector<double> c1 = c;
      ASSERT_TRUE(
          Gemm<double>(ta, tb, m, n, k, 2.0, a.data(), b.data(), 1.0, c1.data())
              .ok());
      for (int64_t i = 0; i < m * n; ++i) {
        EXPECT_NEAR(c0[i], ref[i], 1e-12);
        EXPECT_NEAR(c1[i], c[i] + 2 * ref[i], 1e-12);
      }
    }
  }
}

// GemmStrided: operands as views into wider rows (pitch = stored row + 3),
// every layout, C's padding untouched; with the default pitches it is Gemm
// bit for bit; a pitch shorter than the row is refused.
TEST(BlasTest, GemmStridedReadsAndWritesViewsIntoWiderRows) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> d(-1, 1);
  const int64_t m = 5, n = 6, k = 7, pad = 3;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k;
      const int64_t b_rows = tb ? n : k, b_cols = tb ? k : n;
      std::vector<double> a(a_rows * a_cols), b(b_rows * b_cols);
      for (auto* v : {&a, &b})
        for (double& x : *v) x = d(rng);
      const std::vector<double> ref = Naive(ta, tb, m, n, k, a, b);
      const int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
      std::vector<double> wa(a_rows * lda, 99), wb(b_rows * ldb, 99);
      for (int64_t i = 0; i < a_rows; ++i)
        std::copy_n(&a[i * a_cols], a_cols, &wa[i * lda]);
      for (int64_t i = 0; i < b_rows; ++i)
        std::copy_n(&b[i * b_cols], b_cols, &wb[i * ldb]);
      std::vector<double> wc(m * ldc, 7.0);
      ASSERT_TRUE(GemmStrided<double>(ta, tb, m, n, k, 2.0, wa.data(), lda,
                                      wb.data(), ldb, 1.0, wc.data(), ldc)
                      .ok());
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < ldc; ++j) {
          const double want = j < n ? 7.0 + 2 * ref[i * n + j] : 7.0;
          EXPECT_NEAR(wc[i * ldc + j], want, 1e-12) << i << "," << j;
        }
      }
      // Default pitches: Gemm's bits (f32, where kernels could differ).
      std::vector<float> fa(a.begin(), a.end()), fb(b.begin(), b.end());
      std::vector<float> c0(m * n), c1(m * n);
      ASSERT_TRUE(Gemm<float>(ta, tb, m, n, k, 1.f, fa.data(), fb.data(), 0.f,
                              c0.data())
                      .ok());
      ASSERT_TRUE(GemmStrided<float>(ta, tb, m, n, k, 1.f, fa.data(), a_cols,
                                     fb.data(), b_cols, 0.f, c1.data(), n)
                      .ok());
      EXPECT_EQ(c0, c1);
    }
  }
  std::vector<float> x(64);
  absl::Status s = GemmStrided<float>(false, false, 2, 2, 4, 1.f, x.data(), 3,
                                      x.data(), 2, 0.f, x.data(), 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("lda=3"), std::string::npos) << s;
  EXPECT_FALSE(GemmStrided<float>(false, false, 2, 2, 2, 1.f, x.data(), 2,
                                  x.data(), 2, 0.f, x.data(), -1)
                   .ok());
}

// GemmOneDnn: the product in every layout, and for f32 exactly oneDNN's
// sgemm's bits, under either kernel choice (OpenBLAS's differ in the last
// bits on this K).
TEST(BlasTest, GemmOneDnnIsOneDnnInEveryLayout) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> d(-1, 1);
  const int64_t m = 13, n = 17, k = 301;
  std::vector<float> a(m * k), b(k * n);
  for (float& x : a) x = d(rng);
  for (float& x : b) x = d(rng);
  const std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end());
  for (KernelChoice choice : {KernelChoice::kFastest, KernelChoice::kPyTorch}) {
    SetKernelChoice(choice);
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        std::vector<float> c(m * n, 0.5f), want(m * n, 0.5f);
        ASSERT_TRUE(GemmOneDnn<float>(ta, tb, m, n, k, 1.f, a.data(), b.data(),
                                      1.f, c.data())
                        .ok());
        ASSERT_EQ(
            dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.f, a.data(),
                       ta ? m : k, b.data(), tb ? k : n, 1.f, want.data(), n),
            dnnl_success);
        EXPECT_EQ(c, want) << "ta " << ta << " tb " << tb;
        const std::vector<double> ref = Naive(ta, tb, m, n, k, ad, bd);
        for (int64_t i = 0; i < m * n; ++i) {
          EXPECT_NEAR(c[i], 0.5 + ref[i], 1e-4);
        }
      }
    }
  }
  SetKernelChoice(KernelChoice::kFastest);
}

TEST(BlasTest, FloatMatchesDouble) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {7, 8, 9, 10, 11, 12};
  std::vector<float> c(4);
  ASSERT_TRUE(
      Gemm<float>(false, false, 2, 2, 3, 1.f, a.data(), b.data(), 0.f, c.data())
          .ok());
  EXPECT_EQ(c, (std::vector<float>{58, 64, 139, 154}));
}

TEST(BlasTest, ZeroDimensions) {
  // K == 0: C = beta * C without reading A or B; beta 0 overwrites NaN.
  std::vector<float> c = {std::numeric_limits<float>::quiet_NaN(), 1};
  ASSERT_TRUE(
      Gemm<float>(false, false, 1, 2, 0, 1.f, nullptr, nullptr, 0.f, c.data())
          .ok());
  EXPECT_EQ(c, (std::vector<float>{0, 0}));
  c = {3, 4};
  ASSERT_TRUE(
      Gemm<float>(false, false, 1, 2, 0, 1.f, nullptr, nullptr, 1.f, c.data())
          .ok());
  EXPECT_EQ(c, (std::vector<float>{3, 4}));
  ASSERT_TRUE(
      Gemm<float>(true, true, 2, 1, 0, 1.f, nullptr, nullptr, 2.f, c.data())
          .ok());
  EXPECT_EQ(c, (std::vector<float>{6, 8}));
  // M == 0 or N == 0: nothing to do, nothing touched.
  EXPECT_TRUE(
      Gemm<float>(false, false, 0, 5, 5, 1.f, nullptr, nullptr, 0.f, nullptr)
          .ok());
  EXPECT_TRUE(
      Gemm<float>(false, false, 5, 0, 5, 1.f, nullptr, nullptr, 0.f, nullptr)
          .ok());
}

TEST(BlasTest, Errors) {
  EXPECT_FALSE(
      Gemm<float>(false, false, -1, 1, 1, 1.f, nullptr, nullptr, 0.f, nullptr)
          .ok());
  absl::Status s = Gemm<float>(false, false, int64_t{1} << 32, 1, 1, 1.f,
                               nullptr, nullptr, 0.f, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(SetBlasNumThreads(0).ok());
  ASSERT_TRUE(SetBlasNumThreads(2).ok());
  EXPECT_EQ(BlasNumThreads(), 2);
  ASSERT_TRUE(SetBlasNumThreads(1).ok());
}

// The A·B layout with more than 128 rows runs on oneDNN (OpenMP): every
// calling thread must get the process-wide thread count, or each rank would
// run machine-wide teams.
TEST(BlasTest, OneDnnFollowsTheThreadCountInEveryCallingThread) {
  // A: 130 rows alternating (1, 2) and (3, 4).
  std::vector<float> a;
  for (int r = 0; r < 65; ++r) a.insert(a.end(), {1, 2, 3, 4});
  const std::vector<float> b = {5, 6, 7, 8};
  std::vector<float> c(260);
  int seen_three = 0, seen_one = 0;
  bool ok = true;
  ASSERT_TRUE(SetBlasNumThreads(3).ok());
  std::thread rank([&] {
    ok = ok && Gemm<float>(false, false, 130, 2, 2, 1.f, a.data(), b.data(),
                           0.f, c.data())
                   .ok();
    seen_three = omp_get_max_threads();
    ASSERT_TRUE(SetBlasNumThreads(1).ok());
    ok = ok && Gemm<float>(false, false, 130, 2, 2, 1.f, a.data(), b.data(),
                           0.f, c.data())
                   .ok();
    seen_one = omp_get_max_threads();
  });
  rank.join();
  ASSERT_TRUE(SetBlasNumThreads(1).ok());
  EXPECT_TRUE(ok);
  EXPECT_EQ(seen_three, 3);
  EXPECT_EQ(seen_one, 1);
  for (int r = 0; r < 130; r += 2) {
    EXPECT_EQ(std::vector<float>(c.begin() + 2 * r, c.begin() + 2 * r + 4),
              (std::vector<float>{19, 22, 43, 50}))
        << "rows " << r << ", " << r + 1;
  }
}

TEST(BlasTest, ConcurrentCallersGetTheirOwnResults) {
  // Like simulated ranks: several threads multiply at once, every layout.
  constexpr int kThreads = 4;
  constexpr int64_t m = 33, n = 65, k = 47;
  // One byte per thread: vector<bool> packs bits, and its neighbours race.
  std::vector<char> good(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::uniform_int_distribution<int> d(-4, 4);
      std::vector<double> ad(m * k), bd(k * n);
      for (double& v : ad) v = d(rng);
      for (double& v : bd) v = d(rng);
      const std::vector<float> af(ad.begin(), ad.end()),
          bf(bd.begin(), bd.end());
      bool all = true;
      for (int layout = 0; layout < 4; ++layout) {
        const bool ta = layout & 1, tb = layout & 2;
        // Small integers: every product and sum is exact in f32.
        const std::vector<double> want = Naive(ta, tb, m, n, k, ad, bd);
        std::vector<float> c(m * n, -1.f);
        for (int rep = 0; rep < 20; ++rep) {
          all = all && Gemm<float>(ta, tb, m, n, k, 1.f, af.data(), bf.data(),
                                   0.f, c.data())
                           .ok();
          all = all && std::equal(c.begin(), c.end(), want.begin());
        }
      }
      good[t] = all ? 1 : 0;
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(good[t], 1) << "thread " << t;
}

}  // namespace
}  // namespace tandem::cpu

namespace tandem::cpu {
namespace {

TEST(BlasTest, KernelChoicePyTorchCallsOpenBlasForEveryLayout) {
  EXPECT_EQ(GetKernelChoice(), KernelChoice::kFastest);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> d(-1, 1);
  const int64_t m = 37, n = 29, k = 300;
  std::vector<float> a(m * k), b(k * n);
  for (float& v : a) v = d(rng);
  for (float& v : b) v = d(rng);
  SetKernelChoice(KernelChoice::kPyTorch);
  std::vector<float> c(m * n), want(m * n);
  ASSERT_TRUE(
      Gemm<float>(false, false, m, n, k, 1.f, a.data(), b.data(), 0.f, c.data())
          .ok());
  SetKernelChoice(KernelChoice::kFastest);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.f, a.data(),
              k, b.data(), n, 0.f, want.data(), n);
  EXPECT_EQ(c, want);  // the same library call: the same bits
}

}  // namespace
}  // namespace tandem::cpu
