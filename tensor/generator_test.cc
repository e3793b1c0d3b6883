#include "tensor/generator.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/normal_fill.h"

// Every expected value below was printed by PyTorch 1.13 (Debian
// python3-torch) with the snippet in the comment beside it.

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

// kaiming_uniform_(a = sqrt(5)) bound, with the operations in PyTorch's order:
// gain = sqrt(2 / (1 + a**2)); std = gain / sqrt(fan); bound = sqrt(3) * std.
double KaimingBound(int64_t fan_in) {
  const double a = std::sqrt(5.0);
  const double gain = std::sqrt(2.0 / (1 + a * a));
  const double std_dev = gain / std::sqrt(static_cast<double>(fan_in));
  return std::sqrt(3.0) * std_dev;
}

TEST(GeneratorTest, RandomIsMt19937OfLow32BitsOfSeed) {
  Generator gen(uint64_t{0xABCD} << 32 | 5489u);
  std::mt19937 reference(5489u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(gen.Random(), reference()) << i;
  EXPECT_EQ(gen.InitialSeed(), uint64_t{0xABCD} << 32 | 5489u);
}

TEST(GeneratorTest, DefaultSeedIsPyTorchs) {
  // python3 -c "import torch; print(torch.Generator().initial_seed())"
  EXPECT_EQ(Generator().InitialSeed(), 67280421310721u);
  Generator a;
  Generator b(67280421310721u);
  EXPECT_EQ(a.Random(), b.Random());
}

TEST(GeneratorTest, Random64IsTwoDrawsHighFirst) {
  Generator gen(9);
  std::mt19937 reference(9);
  const uint64_t hi = reference();
  const uint64_t lo = reference();
  EXPECT_EQ(gen.Random64(), (hi << 32) | lo);
}

TEST(GeneratorTest, ManualSeedRestartsTheStream) {
  Generator gen(17);
  const uint32_t first = gen.Random();
  gen.Random();
  gen.ManualSeed(17);
  EXPECT_EQ(gen.Random(), first);
}

TEST(GeneratorTest, CopyContinuesIndependently) {
  Generator gen(4);
  gen.Random();
  Generator copy = gen;
  const uint32_t a = gen.Random();
  const uint32_t b = copy.Random();
  EXPECT_EQ(a, b);
  gen.Random();
  copy.Random();
  EXPECT_EQ(gen.Random(), copy.Random());
}

TEST(GeneratorTest, RandpermMatchesPyTorchSmall) {
  // torch.manual_seed(0); torch.randperm(10)
  Generator gen(0);
  EXPECT_THAT(gen.Randperm(10), ElementsAre(4, 1, 7, 5, 3, 9, 0, 8, 6, 2));
  // torch.manual_seed(0); torch.randperm(5)
  gen.ManualSeed(0);
  EXPECT_THAT(gen.Randperm(5), ElementsAre(4, 0, 1, 3, 2));
}

TEST(GeneratorTest, RandpermMatchesPyTorch1000) {
  // torch.manual_seed(42); p = torch.randperm(1000)
  // p[:10], p[-5:], (p * torch.arange(1000)).sum()
  Generator gen(42);
  const std::vector<int64_t> p = gen.Randperm(1000);
  ASSERT_EQ(p.size(), 1000u);
  EXPECT_THAT(std::vector<int64_t>(p.begin(), p.begin() + 10),
              ElementsAre(542, 618, 816, 68, 94, 215, 60, 585, 942, 165));
  EXPECT_THAT(std::vector<int64_t>(p.end() - 5, p.end()),
              ElementsAre(335, 284, 638, 96, 455));
  int64_t weighted = 0;
  for (int64_t i = 0; i < 1000; ++i) weighted += p[i] * i;
  EXPECT_EQ(weighted, 250882558);
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);
}

TEST(GeneratorTest, RandpermUsesOnlyLow32BitsOfSeed) {
  // g = torch.Generator(); g.manual_seed(2**32 + 3); torch.randperm(6,
  // generator=g)
  Generator gen((uint64_t{1} << 32) + 3);
  EXPECT_THAT(gen.Randperm(6), ElementsAre(4, 0, 3, 2, 1, 5));
}

TEST(GeneratorTest, RandpermEdgeCasesDrawNothing) {
  Generator gen(1);
  Generator untouched(1);
  EXPECT_TRUE(gen.Randperm(0).empty());
  EXPECT_TRUE(gen.Randperm(-3).empty());
  EXPECT_THAT(gen.Randperm(1), ElementsAre(0));
  EXPECT_EQ(gen.Random(), untouched.Random());
}

TEST(GeneratorTest, UniformMatchesPyTorchUnitInterval) {
  // torch.manual_seed(7); torch.empty(5).uniform_()
  Generator gen(7);
  std::vector<float> u(5);
  gen.Uniform(u.data(), 5, 0.0f, 1.0f);
  EXPECT_THAT(u, ElementsAre(0.53492254f, 0.198803186f, 0.659211695f,
                             0.656890273f, 0.232761562f));
}

TEST(GeneratorTest, UniformRangeIsAFloatSubtraction) {
  // torch.manual_seed(7); torch.empty(8).uniform_(0.1, 0.7)
  // Elements 3, 4 and 7 come out one ulp different if `to - from` is done
  // in double instead of float, so this pins ATen's exact recipe.
  Generator gen(7);
  std::vector<float> u(8);
  gen.Uniform(u.data(), 8, 0.1f, 0.7f);
  EXPECT_THAT(
      u, ElementsAre(0.420953512f, 0.219281912f, 0.495526999f, 0.494134128f,
                     0.239656925f, 0.355036825f, 0.224251613f, 0.477841794f));
}

TEST(GeneratorTest, UniformDoubleMatchesPyTorch) {
  // torch.manual_seed(3); torch.empty(4, dtype=torch.float64).uniform_(-1, 2)
  Generator gen(3);
  std::vector<double> u(4);
  gen.Uniform(u.data(), 4, -1.0, 2.0);
  EXPECT_THAT(u, ElementsAre(-0.89767541304843856, -0.13977931983607916,
                             1.318744832985753, -0.475218912156116));
}

TEST(GeneratorTest, UniformDoubleMultiplyAddIsFused) {
  // torch.manual_seed(1); torch.nn.Linear(3, 2, dtype=torch.float64).weight
  // Element 4 is 0.064741814621122162 with a separate multiply and add;
  // PyTorch's kernel fuses them.
  Generator gen(1);
  std::vector<double> w(6);
  const double bound = KaimingBound(3);
  gen.Uniform(w.data(), 6, -bound, bound);
  EXPECT_THAT(w, ElementsAre(-0.50685202000106, -0.31805705956047264,
                             -0.30685876522082661, -0.3728536959091529,
                             0.064741814621122135, -0.45097539245165741));
}

TEST(GeneratorTest, LongUniformStreamsMatchPyTorch) {
  // torch.manual_seed(5); a = torch.empty(200000).uniform_(0.1, 0.7)
  // a[12345], a[100000], a[199999]  (all 200000 were compared once: equal)
  Generator gen(5);
  std::vector<float> a(200000);
  gen.Uniform(a.data(), 200000, 0.1f, 0.7f);
  EXPECT_EQ(a[12345], 0.585770786f);
  EXPECT_EQ(a[100000], 0.614480615f);
  EXPECT_EQ(a[199999], 0.449426681f);
  // torch.manual_seed(6)
  // b = torch.empty(200000, dtype=torch.float64).uniform_(-0.3, 1.7)
  // b[777], b[199999]
  gen.ManualSeed(6);
  std::vector<double> b(200000);
  gen.Uniform(b.data(), 200000, -0.3, 1.7);
  EXPECT_EQ(b[777], -0.14192806948522135);
  EXPECT_EQ(b[199999], 1.6399165313549569);
}

TEST(GeneratorTest, LinearInitMatchesPyTorch) {
  // torch.manual_seed(123); l = torch.nn.Linear(2, 30)
  // ['%.9g' % v for v in l.weight.flatten()[:4]], same for l.bias[:3].
  // (docs/pytorch_compat.md lists these to 8 digits: -0.28834125, 0.02342260,
  // ...; weight is [30, 2], so its "weight[0][0..3]" is the flat first four.)
  Generator gen(123);
  std::vector<float> weight(60);
  std::vector<float> bias(30);
  const double w_bound = KaimingBound(2);
  gen.Uniform(weight.data(), 60, static_cast<float>(-w_bound),
              static_cast<float>(w_bound));
  const double b_bound = 1 / std::sqrt(2.0);
  gen.Uniform(bias.data(), 30, static_cast<float>(-b_bound),
              static_cast<float>(b_bound));
  EXPECT_THAT(
      std::vector<float>(weight.begin(), weight.begin() + 4),
      ElementsAre(-0.288341254f, 0.0234226044f, -0.351190627f, 0.266659558f));
  EXPECT_THAT(std::vector<float>(bias.begin(), bias.begin() + 3),
              ElementsAre(0.11153017f, 0.584262252f, -0.668215692f));
}

TEST(GeneratorTest, Conv2dInitMatchesPyTorch) {
  // torch.manual_seed(5); c = torch.nn.Conv2d(3, 16, 3)
  // c.weight.flatten()[:4], c.weight[15, 2, 2, 2], c.bias[:3], c.bias[15]
  Generator gen(5);
  const int64_t fan_in = 3 * 3 * 3;
  std::vector<float> weight(16 * fan_in);
  std::vector<float> bias(16);
  const double w_bound = KaimingBound(fan_in);
  gen.Uniform(weight.data(), static_cast<int64_t>(weight.size()),
              static_cast<float>(-w_bound), static_cast<float>(w_bound));
  const double b_bound = 1 / std::sqrt(static_cast<double>(fan_in));
  gen.Uniform(bias.data(), 16, static_cast<float>(-b_bound),
              static_cast<float>(b_bound));
  EXPECT_THAT(
      std::vector<float>(weight.begin(), weight.begin() + 4),
      ElementsAre(0.127114013f, -0.143909976f, 0.156835154f, 0.123139977f));
  EXPECT_EQ(weight[15 * fan_in + 2 * 9 + 2 * 3 + 2], 0.147321984f);
  EXPECT_THAT(std::vector<float>(bias.begin(), bias.begin() + 3),
              ElementsAre(-0.109703556f, 0.0725652426f, 0.181267798f));
  EXPECT_EQ(bias[15], 0.0129278181f);
}

// The values below were printed by PyTorch 1.13 (Debian's python3-torch, an
// AVX2 CPU) with '%.9g', which round-trips a float: equality is bit for bit.

TEST(GeneratorTest, RandnMatchesPyTorchBitForBit) {
  // torch.manual_seed(0); torch.randn(16)[[0, 7, 8, 15]]. Index 7 is one
  // where the C library's log/cos gives -2.11521959 instead.
  Generator gen(0);
  std::vector<float> n(16);
  gen.Normal(n.data(), 16, 0.0f, 1.0f);
  EXPECT_EQ(n[0], -1.12583983f);
  EXPECT_EQ(n[7], -2.11521935f);
  EXPECT_EQ(n[8], 0.322274923f);
  EXPECT_EQ(n[15], -0.247278154f);
}

TEST(GeneratorTest, RandnOfTwoImagesMatchesPyTorchBitForBit) {
  // torch.manual_seed(2024); torch.randn(2, 3, 32, 32).flatten()
  // [[0, 1, 3071, 3072, 6143]]: ddp_demo's images.
  Generator gen(2024);
  std::vector<float> n(2 * 3 * 32 * 32);
  gen.Normal(n.data(), static_cast<int64_t>(n.size()), 0.0f, 1.0f);
  EXPECT_EQ(n[0], -1.22623551f);
  EXPECT_EQ(n[1], -0.00931481924f);
  EXPECT_EQ(n[3071], -0.130419537f);
  EXPECT_EQ(n[3072], -1.80613136f);
  EXPECT_EQ(n[6143], 1.49507296f);
}

TEST(GeneratorTest, NormalWithTailMatchesPyTorchBitForBit) {
  // torch.manual_seed(11); torch.empty(40).normal_(1.0, 2.0)
  // [[0, 1, 15, 16, 20, 39]]: 40 % 16 != 0, so the last 16 are redrawn.
  Generator gen(11);
  std::vector<float> n(40);
  gen.Normal(n.data(), 40, 1.0f, 2.0f);
  const std::vector<float> expected = {-0.0215951204f, 3.05654359f,
                                       0.984015584f,   1.49576008f,
                                       0.690749764f,   -0.277655482f};
  const int picks[] = {0, 1, 15, 16, 20, 39};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(n[picks[i]], expected[i]) << "index " << picks[i];
  }
  // torch.manual_seed(123); torch.randn(17)[[0, 1, 15, 16]]
  gen.ManualSeed(123);
  gen.Normal(n.data(), 17, 0.0f, 1.0f);
  EXPECT_EQ(n[0], 0.337370187f);
  EXPECT_EQ(n[1], -1.02047193f);
  EXPECT_EQ(n[15], -2.83999395f);
  EXPECT_EQ(n[16], -0.784853339f);
}

TEST(GeneratorTest, NormalF64MatchesPyTorchBitForBit) {
  // torch.manual_seed(11); torch.randn(5, dtype=torch.float64): the short
  // path (Box-Muller with log(1 - u), not log1p: element 2 tells them apart).
  Generator gen(11);
  std::vector<double> n(40);
  gen.Normal(n.data(), 5, 0.0, 1.0);
  EXPECT_EQ(n[0], 0.73762945176194261);
  EXPECT_EQ(n[2], -0.69954160956691336);
  EXPECT_EQ(n[3], -1.3022973799235349);
  EXPECT_EQ(n[4], -0.51326220164676783);
  // torch.manual_seed(11); torch.empty(40, dtype=torch.float64)
  // .normal_(1.0, 2.0)[[0, 1, 15, 16, 39]]
  gen.ManualSeed(11);
  gen.Normal(n.data(), 40, 1.0, 2.0);
  EXPECT_EQ(n[0], 1.556759691858999);
  EXPECT_EQ(n[1], -2.7472290337929208);
  EXPECT_EQ(n[15], 1.1365264999895539);
  EXPECT_EQ(n[16], -1.0260651082703811);
  EXPECT_EQ(n[39], -0.49298615191092643);
}

TEST(GeneratorTest, CephesFunctionsAreCloseToTheCLibrary) {
  // Exact where exact, within 2 float ulps elsewhere on Box-Muller's ranges.
  EXPECT_EQ(internal::CephesLogf(1.0f), 0.0f);
  EXPECT_TRUE(std::isnan(internal::CephesLogf(0.0f)));
  EXPECT_TRUE(std::isnan(internal::CephesLogf(-1.0f)));
  for (float u = 1.0f / 16777216; u <= 1.0f; u *= 1.37f) {
    const float want = std::log(u);
    EXPECT_NEAR(internal::CephesLogf(u), want,
                2 * std::abs(std::nextafter(want, 0.0f) - want) + 1e-30)
        << u;
  }
  for (float x = 0.0f; x < 6.2831855f; x += 0.01f) {
    float s = 0;
    float c = 0;
    internal::CephesSinCosf(x, &s, &c);
    // Absolute error: near a zero of sin or cos the ulp is tiny.
    EXPECT_NEAR(s, std::sin(x), 2e-7) << x;
    EXPECT_NEAR(c, std::cos(x), 2e-7) << x;
  }
}

TEST(GeneratorTest, NormalShortTensorMatchesPyTorch) {
  // torch.manual_seed(11); torch.empty(5).normal_(1.0, 2.0)
  Generator gen(11);
  std::vector<float> n(5);
  gen.Normal(n.data(), 5, 1.0f, 2.0f);
  const std::vector<float> expected = {2.47525883f, 4.8918581f, -0.399083227f,
                                       -1.60459471f, -0.0265244041f};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(n[i], expected[i]) << i;
}

TEST(GeneratorTest, NormalMomentsAreRight) {
  Generator gen(2024);
  const int64_t count = 100000;
  std::vector<float> n(count);
  gen.Normal(n.data(), count, -3.0f, 0.5f);
  double sum = 0;
  double sum_sq = 0;
  for (float v : n) {
    sum += v;
    sum_sq += static_cast<double>(v) * v;
  }
  const double mean = sum / count;
  const double var = sum_sq / count - mean * mean;
  // Standard error of the mean is 0.5 / sqrt(1e5) ~ 0.0016.
  EXPECT_NEAR(mean, -3.0, 0.01);
  EXPECT_NEAR(std::sqrt(var), 0.5, 0.01);
}

TEST(GeneratorTest, NormalShortPathCachesTheSecondSample) {
  // Two calls of 1 element each use one Box-Muller pair (4 raw draws).
  Generator gen(8);
  float a = 0;
  float b = 0;
  gen.Normal(&a, 1, 0.0f, 1.0f);
  gen.Normal(&b, 1, 0.0f, 1.0f);
  Generator pair(8);
  float both[2];
  pair.Normal(both, 2, 0.0f, 1.0f);
  EXPECT_EQ(a, both[0]);
  EXPECT_EQ(b, both[1]);
  Generator reference(8);
  for (int i = 0; i < 4; ++i) reference.Random();
  EXPECT_EQ(gen.Random(), reference.Random());
}

TEST(GeneratorTest, StateRestoresTheStreamExactly) {
  Generator gen(99);
  gen.Randperm(10);
  float one;
  gen.Normal(&one, 1, 0.f, 1.f);  // leaves a cached second sample
  const std::string state = gen.State();
  std::vector<float> expected(20);
  gen.Normal(expected.data(), 3, 0.f, 1.f);
  gen.Uniform(expected.data() + 3, 17, -1.f, 1.f);

  Generator other(1);
  ASSERT_TRUE(other.SetState(state).ok());
  EXPECT_EQ(other.InitialSeed(), 99u);
  std::vector<float> got(20);
  other.Normal(got.data(), 3, 0.f, 1.f);
  other.Uniform(got.data() + 3, 17, -1.f, 1.f);
  EXPECT_EQ(got, expected);
}

TEST(GeneratorTest, SetStateRefusesOtherTextAndChangesNothing) {
  Generator gen(5);
  Generator reference(5);
  EXPECT_FALSE(gen.SetState("").ok());
  EXPECT_FALSE(gen.SetState("tandem-generator-v1 5 1 2 3").ok());
  EXPECT_FALSE(gen.SetState(reference.State() + " extra").ok());
  EXPECT_EQ(gen.Random(), reference.Random());
}

}  // namespace
}  // namespace tandem
