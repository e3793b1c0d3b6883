#include "tensor/cpu/conv_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace tandem::cpu {
namespace {

// The definition in double, element by element: y, and the gradients of
// sum(y * dy) with respect to w and x.
struct Reference {
  std::vector<double> y, dw, dx;
};

Reference Direct(const ConvProblem& p, const std::vector<double>& x,
                 const std::vector<double>& w, const std::vector<double>& b,
                 const std::vector<double>& dy) {
  const ConvGeometry& g = p.geometry;
  const int64_t oh_n = g.out_h(), ow_n = g.out_w();
  Reference r;
  r.y.assign(static_cast<size_t>(p.batch * p.out_channels * oh_n * ow_n), 0);
  r.dw.assign(w.size(), 0);
  r.dx.assign(x.size(), 0);
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t o = 0; o < p.out_channels; ++o)
      for (int64_t oh = 0; oh < oh_n; ++oh)
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          const int64_t yi = ((n * p.out_channels + o) * oh_n + oh) * ow_n + ow;
          double acc = b.empty() ? 0 : b[o];
          for (int64_t c = 0; c < g.channels; ++c)
            for (int64_t i = 0; i < g.kernel_h; ++i)
              for (int64_t j = 0; j < g.kernel_w; ++j) {
                const int64_t h = oh * g.stride_h - g.pad_h + i;
                const int64_t v = ow * g.stride_w - g.pad_w + j;
                if (h < 0 || h >= g.height || v < 0 || v >= g.width) continue;
                const int64_t xi =
                    ((n * g.channels + c) * g.height + h) * g.width + v;
                const int64_t wi =
                    ((o * g.channels + c) * g.kernel_h + i) * g.kernel_w + j;
                acc += w[wi] * x[xi];
                r.dw[wi] += dy[yi] * x[xi];
                r.dx[xi] += dy[yi] * w[wi];
              }
          r.y[yi] = acc;
        }
  return r;
}

template <typename T>
std::vector<T> Cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

template <typename T>
void ExpectNear(const std::vector<T>& got, const std::vector<double>& want,
                double tol, const char* what, int64_t shape) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i])))
        << what << " entry " << i << " of geometry " << shape;
  }
}

using Pair = std::pair<int64_t, int64_t>;

ConvProblem Problem(int64_t channels, int64_t height, int64_t width,
                    Pair kernel, Pair stride, Pair pad, int64_t batch,
                    int64_t out_channels) {
  return {{.channels = channels,
           .height = height,
           .width = width,
           .kernel_h = kernel.first,
           .kernel_w = kernel.second,
           .stride_h = stride.first,
           .stride_w = stride.second,
           .pad_h = pad.first,
           .pad_w = pad.second},
          batch,
          out_channels};
}

template <typename T>
void CheckGeometries(double tol) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> dist(-1, 1);
  auto draw = [&](int64_t n) {
    std::vector<double> v(static_cast<size_t>(n));
    for (double& e : v) e = dist(rng);
    return v;
  };
  // ResNet's shapes at small sizes (3x3 pad 1 on 1x1 and 2x2 maps, where
  // taps read only padding; strided; 1x1; the 7x7 stem), plus odd ones.
  const std::vector<ConvProblem> problems = {
      // channels, height, width, kernel, stride, pad (h, w) pairs; batch, O
      Problem(3, 1, 1, {3, 3}, {1, 1}, {1, 1}, 3, 4),
      Problem(2, 2, 2, {3, 3}, {2, 2}, {1, 1}, 2, 5),
      Problem(4, 2, 2, {3, 3}, {1, 1}, {1, 1}, 3, 3),
      Problem(3, 9, 8, {7, 7}, {2, 2}, {3, 3}, 2, 4),
      Problem(5, 4, 4, {1, 1}, {1, 1}, {0, 0}, 3, 6),
      Problem(5, 5, 4, {1, 1}, {2, 2}, {0, 0}, 2, 3),
      Problem(2, 5, 6, {3, 2}, {2, 1}, {1, 0}, 1, 2),
      // Whole rows and columns of padding.
      Problem(2, 3, 3, {1, 1}, {1, 1}, {2, 2}, 2, 2),
      // Several chunks (100 pixels: 6 images per GEMM; the last chunk one
      // image, written straight into y), one image per GEMM (576 pixels),
      // and a pointwise one whose image is its own column matrix.
      Problem(2, 10, 10, {3, 3}, {1, 1}, {1, 1}, 7, 3),
      Problem(1, 24, 24, {3, 3}, {1, 1}, {1, 1}, 2, 2),
      Problem(2, 23, 23, {1, 1}, {1, 1}, {0, 0}, 2, 3),
  };
  int64_t shape = 0;
  for (const ConvProblem& p : problems) {
    const ConvGeometry& g = p.geometry;
    const int64_t x_n = p.batch * g.channels * g.height * g.width;
    const int64_t w_n = p.out_channels * g.col_rows();
    const int64_t y_n = p.batch * p.out_channels * g.col_cols();
    const std::vector<double> x = draw(x_n), w = draw(w_n),
                              b = draw(p.out_channels), dy = draw(y_n);
    const Reference want = Direct(p, x, w, b, dy);
    const std::vector<T> xt = Cast<T>(x), wt = Cast<T>(w), bt = Cast<T>(b),
                         dyt = Cast<T>(dy);
    std::vector<T> y(static_cast<size_t>(y_n), T(99));
    ASSERT_TRUE(
        ConvGemmForward<T>(p, xt.data(), wt.data(), bt.data(), y.data()).ok());
    ExpectNear(y, want.y, tol, "y", shape);
    // Overwrite: stale values must not survive.
    std::vector<T> dw(static_cast<size_t>(w_n), T(99)),
        dx(static_cast<size_t>(x_n), T(99));
    ASSERT_TRUE(ConvGemmBackward<T>(p, xt.data(), wt.data(), dyt.data(),
                                    dw.data(), false, dx.data(), false)
                    .ok());
    ExpectNear(dw, want.dw, tol, "dw", shape);
    ExpectNear(dx, want.dx, tol, "dx", shape);
    // Accumulate: a second pass adds the same gradients again.
    ASSERT_TRUE(ConvGemmBackward<T>(p, xt.data(), wt.data(), dyt.data(),
                                    dw.data(), true, dx.data(), true)
                    .ok());
    std::vector<double> dw2 = want.dw, dx2 = want.dx;
    for (double& v : dw2) v *= 2;
    for (double& v : dx2) v *= 2;
    ExpectNear(dw, dw2, tol, "accumulated dw", shape);
    ExpectNear(dx, dx2, tol, "accumulated dx", shape);
    // One gradient alone (the other pointer null) is the same.
    std::vector<T> dx_only(static_cast<size_t>(x_n), T(7));
    ASSERT_TRUE(ConvGemmBackward<T>(p, xt.data(), wt.data(), dyt.data(),
                                    nullptr, false, dx_only.data(), false)
                    .ok());
    ExpectNear(dx_only, want.dx, tol, "dx alone", shape);
    ++shape;
  }
}

TEST(ConvGemmTest, DoubleMatchesTheDefinition) {
  CheckGeometries<double>(1e-12);
}

TEST(ConvGemmTest, FloatMatchesTheDefinition) { CheckGeometries<float>(1e-5); }

TEST(ConvGemmTest, LiveTapsDropOnlyPaddingTaps) {
  // 3x3, pad 1 on a 1x1 map: only the centre tap reads the pixel.
  EXPECT_EQ(LiveTaps({.channels = 1,
                      .height = 1,
                      .width = 1,
                      .kernel_h = 3,
                      .kernel_w = 3,
                      .pad_h = 1,
                      .pad_w = 1}),
            (std::vector<int64_t>{4}));
  // Stride 2 on a 2x2 map: one output reads the lower-right 2x2 taps.
  EXPECT_EQ(LiveTaps({.channels = 1,
                      .height = 2,
                      .width = 2,
                      .kernel_h = 3,
                      .kernel_w = 3,
                      .stride_h = 2,
                      .stride_w = 2,
                      .pad_h = 1,
                      .pad_w = 1}),
            (std::vector<int64_t>{4, 5, 7, 8}));
  // A 2x2 map at stride 1: every tap reads a pixel somewhere.
  EXPECT_EQ(LiveTaps({.channels = 1,
                      .height = 2,
                      .width = 2,
                      .kernel_h = 3,
                      .kernel_w = 3,
                      .pad_h = 1,
                      .pad_w = 1})
                .size(),
            9u);
}

}  // namespace
}  // namespace tandem::cpu
