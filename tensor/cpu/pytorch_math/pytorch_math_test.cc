// Pins cascade_sum.h, sleef_mathf.h and softmax_kernels.h to values printed
// by PyTorch 1.13 (Debian's python3-torch, an AVX2 CPU) with '%.9g', which
// round-trips a float: every comparison is bit for bit. Each case also
// names where the naive evaluation (the C library, a running sum) differs,
// so a fallback to it would fail here.
#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "tensor/cpu/pytorch_math/cascade_sum.h"
#include "tensor/cpu/pytorch_math/sleef_mathf.h"
#include "tensor/cpu/pytorch_math/softmax_kernels.h"

namespace tandem::internal {
namespace {

// float(1 / (i + 1)), negated when i % 3 == 0: the same in NumPy and C++.
std::vector<float> Data(int64_t n, float scale = 1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float x = static_cast<float>(1.0 / static_cast<double>(i + 1));
    v[static_cast<size_t>(i)] = (i % 3 != 0 ? x : -x) * scale;
  }
  return v;
}

TEST(SleefMathfTest, ExpMatchesTorchExp) {
  // torch.exp(torch.linspace(-20, 20, 200001)) at its first values where
  // float(math.exp(x)) differs (2.06239226e-09 from the C library).
  EXPECT_EQ(SleefExpf(-19.9993992f), 2.06239248e-09f);
  EXPECT_EQ(SleefExpf(-19.9958f), 2.06982875e-09f);
  EXPECT_EQ(SleefExpf(-19.9881992f), 2.08562101e-09f);
  EXPECT_EQ(SleefExpf(0.0f), 1.0f);
  EXPECT_EQ(SleefExpf(-105.0f), 0.0f);
  EXPECT_TRUE(std::isinf(SleefExpf(101.0f)));
}

TEST(SleefMathfTest, LogMatchesTorchLog) {
  // torch.log(torch.linspace(1e-3, 3, 200001)), where the C library gives
  // -5.31878567, -3.83422327, -3.81023622.
  EXPECT_EQ(SleefLogf(0.00489869993f), -5.31878519f);
  EXPECT_EQ(SleefLogf(0.021618126f), -3.83422303f);
  EXPECT_EQ(SleefLogf(0.0221429504f), -3.81023598f);
  EXPECT_EQ(SleefLogf(1.0f), 0.0f);
  EXPECT_TRUE(std::isinf(SleefLogf(0.0f)) && SleefLogf(0.0f) < 0);
  EXPECT_TRUE(std::isnan(SleefLogf(-1.0f)));
}

TEST(CascadeSumTest, MatchesTorchSumOfAStridedRun) {
  // Data(3000).reshape(1000, 3).sum(0): three strided runs of 1000 (long
  // enough for the levels); a running sum of column 1 gives 2.74204969.
  const std::vector<float> v = Data(3000);
  EXPECT_EQ(CascadeSum(v.data(), 3, 1000), -3.34654069f);
  EXPECT_EQ(CascadeSum(v.data() + 1, 3, 1000), 2.74205208f);
  EXPECT_EQ(CascadeSum(v.data() + 2, 3, 1000), 2.495157f);
  EXPECT_EQ(CascadeSum(v.data(), 1, 0), 0.0f);
  EXPECT_EQ(CascadeSum(v.data(), 1, 3), (v[0] + v[1]) + v[2]);
}

TEST(CascadeSumTest, ColumnSumsMatchTorchSumOverDim0) {
  // Data(40 * 70).reshape(40, 70).sum(0): columns 0-63 take the
  // 32-column path, 64-69 the interleaved one; a running sum differs in
  // column 2 among others.
  const std::vector<float> m = Data(40 * 70);
  std::vector<float> sums(70);
  ColumnSums(m.data(), 40, 70, sums.data());
  EXPECT_EQ(sums[0], -0.969778299f);
  EXPECT_EQ(sums[31], 0.0505533777f);
  EXPECT_EQ(sums[32], 0.0392780975f);
  EXPECT_EQ(sums[63], 0.00543051632f);
  EXPECT_EQ(sums[64], 0.0322191752f);
  EXPECT_EQ(sums[69], 0.00627125939f);
}

TEST(SoftmaxKernelsTest, MatchTorchOnRowsOf13) {
  // x = Data(39).reshape(3, 13) * 7: 13 columns exercise a full vector and
  // a blended tail.
  const std::vector<float> x = Data(39, 7.0f);
  std::vector<float> y(39);
  SoftmaxRows(x.data(), 3, 13, y.data());  // torch.softmax(x, 1)
  EXPECT_EQ(y[0], 1.50539945e-05f);
  EXPECT_EQ(y[13 + 5], 0.0436016247f);
  EXPECT_EQ(y[26 + 12], 0.0832956582f);
  // torch.softmax(x, 1).backward(Data(39).reshape(3, 13)): x.grad
  const std::vector<float> g = Data(39);
  std::vector<float> gx(39);
  SoftmaxBackwardRows(g.data(), y.data(), 3, 13, gx.data());
  EXPECT_EQ(gx[0], -2.05246488e-05f);
  EXPECT_EQ(gx[13 + 5], -0.00382611249f);
  EXPECT_EQ(gx[26 + 12], 0.000735852343f);

  LogSoftmaxRows(x.data(), 3, 13, y.data());  // torch.log_softmax(x, 1)
  EXPECT_EQ(y[0], -11.1038675f);
  EXPECT_EQ(y[13 + 5], -3.13266087f);
  EXPECT_EQ(y[26 + 12], -2.48535872f);
}

TEST(SoftmaxKernelsTest, CrossEntropyMatchesTorch) {
  // F.cross_entropy(x, [3, 0, 12]) and x.grad after backward.
  const std::vector<float> x = Data(39, 7.0f);
  const int64_t labels[] = {3, 0, 12};
  std::vector<float> logp(39);
  LogSoftmaxRows(x.data(), 3, 13, logp.data());
  EXPECT_EQ(NllLoss(logp.data(), labels, 3, 13, -100, true), 3.53448868f);
  std::vector<float> g(39, 0.0f);
  for (int i = 0; i < 3; ++i) g[i * 13 + labels[i]] = -(1.0f / 3.0f);
  std::vector<float> gx(39);
  LogSoftmaxBackwardRows(g.data(), logp.data(), 3, 13, gx.data());
  EXPECT_EQ(gx[3], -0.332377076f);
  EXPECT_EQ(gx[4], 0.0223153792f);
  EXPECT_EQ(gx[26 + 12], -0.305568129f);
}

}  // namespace
}  // namespace tandem::internal
