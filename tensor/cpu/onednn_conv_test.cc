#include "tensor/cpu/onednn_conv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

namespace tandem::cpu {
namespace {

// Direct-definition convolution in double (test only).
struct Ref {
  std::vector<double> y, dw, db, dx;
};

Ref Reference(const ConvProblem& p, const std::vector<float>& x,
              const std::vector<float>& w, const std::vector<float>& b,
              const std::vector<float>& dy) {
  const ConvGeometry& g = p.geometry;
  const int64_t oh = g.out_h(), ow = g.out_w(), C = g.channels;
  const int64_t O = p.out_channels, KH = g.kernel_h, KW = g.kernel_w;
  Ref r;
  r.y.assign(static_cast<size_t>(p.batch * O * oh * ow), 0.0);
  r.dw.assign(w.size(), 0.0);
  r.db.assign(static_cast<size_t>(O), 0.0);
  r.dx.assign(x.size(), 0.0);
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t yi = ((n * O + o) * oh + i) * ow + j;
          double acc = b[o];
          r.db[o] += dy[yi];
          for (int64_t c = 0; c < C; ++c)
            for (int64_t u = 0; u < KH; ++u)
              for (int64_t v = 0; v < KW; ++v) {
                const int64_t hi = i * g.stride_h - g.pad_h + u;
                const int64_t wi = j * g.stride_w - g.pad_w + v;
                if (hi < 0 || hi >= g.height || wi < 0 || wi >= g.width) {
                  continue;
                }
                const int64_t xi = ((n * C + c) * g.height + hi) * g.width + wi;
                const int64_t wk = ((o * C + c) * KH + u) * KW + v;
                acc += double{x[xi]} * w[wk];
                r.dw[wk] += double{dy[yi]} * x[xi];
                r.dx[xi] += double{dy[yi]} * w[wk];
              }
          r.y[yi] = acc;
        }
  return r;
}

std::vector<float> Random(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (float& e : v) e = d(rng);
  return v;
}

// Float sums of up to C*KH*KW (forward) or N*OH*OW (weights) products of
// values in [-1, 1]: within 1e-6 relative to the sum of magnitudes.
void ExpectNear(const std::vector<float>& got, const std::vector<double>& want,
                double tolerance, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tolerance) << what << " " << i;
  }
}

void CheckProblem(const ConvProblem& p) {
  std::mt19937 rng(7);
  const ConvGeometry& g = p.geometry;
  const size_t xs = p.batch * g.channels * g.height * g.width;
  const size_t ws = p.out_channels * g.channels * g.kernel_h * g.kernel_w;
  const size_t ys = p.batch * p.out_channels * g.out_h() * g.out_w();
  const std::vector<float> x = Random(xs, rng), w = Random(ws, rng),
                           b = Random(p.out_channels, rng),
                           dy = Random(ys, rng);
  const Ref ref = Reference(p, x, w, b, dy);
  std::vector<float> y(ys), dw(ws), db(p.out_channels), dx(xs);
  ASSERT_TRUE(
      OneDnnConvForward(p, x.data(), w.data(), b.data(), y.data()).ok());
  ExpectNear(y, ref.y, 1e-4, "y");
  ASSERT_TRUE(
      OneDnnConvBackwardWeights(p, x.data(), dy.data(), dw.data(), db.data())
          .ok());
  ExpectNear(dw, ref.dw, 1e-3, "dw");
  std::vector<double> db_ref(ref.db.begin(), ref.db.end());
  ExpectNear(db, db_ref, 1e-3, "db");
  ASSERT_TRUE(OneDnnConvBackwardData(p, w.data(), dy.data(), dx.data()).ok());
  ExpectNear(dx, ref.dx, 1e-4, "dx");
  // No bias: y is the convolution alone, and a second call (cached
  // primitives) gives the same bits.
  std::vector<float> y0(ys), y1(ys);
  ASSERT_TRUE(
      OneDnnConvForward(p, x.data(), w.data(), nullptr, y0.data()).ok());
  ASSERT_TRUE(
      OneDnnConvForward(p, x.data(), w.data(), nullptr, y1.data()).ok());
  EXPECT_EQ(y0, y1);
  for (size_t i = 0; i < ys; ++i) {
    const int64_t o = (i / (g.out_h() * g.out_w())) % p.out_channels;
    ASSERT_NEAR(y0[i], ref.y[i] - b[o], 1e-4) << i;
  }
}

TEST(OneDnnConvTest, DdpDemoLayerMatchesTheDefinition) {
  CheckProblem({.geometry = {.channels = 3,
                             .height = 12,
                             .width = 12,
                             .kernel_h = 3,
                             .kernel_w = 3},
                .batch = 4,
                .out_channels = 16});
}

TEST(OneDnnConvTest, StridePaddingAndOddChannels) {
  CheckProblem({.geometry = {.channels = 5,
                             .height = 9,
                             .width = 7,
                             .kernel_h = 3,
                             .kernel_w = 2,
                             .stride_h = 2,
                             .stride_w = 1,
                             .pad_h = 1,
                             .pad_w = 1},
                .batch = 3,
                .out_channels = 6});
}

TEST(OneDnnConvTest, ThreadsGetTheirOwnPrimitives) {
  ConvProblem p{.geometry = {.channels = 3,
                             .height = 8,
                             .width = 8,
                             .kernel_h = 3,
                             .kernel_w = 3},
                .batch = 2,
                .out_channels = 8};
  std::mt19937 rng(3);
  const std::vector<float> x = Random(2 * 3 * 64, rng), w = Random(8 * 27, rng);
  std::vector<float> a(2 * 8 * 36), c(2 * 8 * 36);
  ASSERT_TRUE(OneDnnConvForward(p, x.data(), w.data(), nullptr, a.data()).ok());
  std::thread t([&] {
    EXPECT_TRUE(
        OneDnnConvForward(p, x.data(), w.data(), nullptr, c.data()).ok());
  });
  t.join();
  EXPECT_EQ(a, c);
}

TEST(OneDnnConvTest, PyTorchsRuleForUsingOneDnn) {
  const ConvGeometry k3{
      .channels = 3, .height = 32, .width = 32, .kernel_h = 3, .kernel_w = 3};
  EXPECT_TRUE(
      PyTorchUsesOneDnn({.geometry = k3, .batch = 2, .out_channels = 16}));
  // One small image goes to PyTorch's own kernel (3072 <= 20480 elements).
  EXPECT_FALSE(
      PyTorchUsesOneDnn({.geometry = k3, .batch = 1, .out_channels = 16}));
  const ConvGeometry big{
      .channels = 3, .height = 100, .width = 100, .kernel_h = 3, .kernel_w = 3};
  EXPECT_TRUE(
      PyTorchUsesOneDnn({.geometry = big, .batch = 1, .out_channels = 4}));
  // 1x1 unstrided kernels need a batch of 16.
  const ConvGeometry k1{.channels = 8, .height = 8, .width = 8};
  EXPECT_FALSE(
      PyTorchUsesOneDnn({.geometry = k1, .batch = 15, .out_channels = 4}));
  EXPECT_TRUE(
      PyTorchUsesOneDnn({.geometry = k1, .batch = 16, .out_channels = 4}));
}

}  // namespace
}  // namespace tandem::cpu
