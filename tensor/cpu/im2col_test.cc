#include "tensor/cpu/im2col.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace tandem::cpu {
namespace {

TEST(Im2ColTest, SmallExampleWithPadding) {
  // One channel, 2x2 image, 2x2 kernel, padding 1, stride 1 -> 3x3 output.
  ConvGeometry g{.channels = 1,
                 .height = 2,
                 .width = 2,
                 .kernel_h = 2,
                 .kernel_w = 2,
                 .pad_h = 1,
                 .pad_w = 1};
  ASSERT_EQ(g.out_h(), 3);
  ASSERT_EQ(g.col_rows(), 4);
  ASSERT_EQ(g.col_cols(), 9);
  const std::vector<double> x = {1, 2, 3, 4};
  std::vector<double> col(36, -1);
  Im2Col(g, x.data(), col.data());
  // Row (i=0, j=0) sees x[oh-1, ow-1].
  const std::vector<double> row00 = {0, 0, 0, 0, 1, 2, 0, 3, 4};
  const std::vector<double> row11 = {1, 2, 0, 3, 4, 0, 0, 0, 0};
  EXPECT_EQ(std::vector<double>(col.begin(), col.begin() + 9), row00);
  EXPECT_EQ(std::vector<double>(col.begin() + 27, col.end()), row11);
}

TEST(Im2ColTest, StrideSkipsPositions) {
  ConvGeometry g{.channels = 1,
                 .height = 3,
                 .width = 3,
                 .kernel_h = 1,
                 .kernel_w = 1,
                 .stride_h = 2,
                 .stride_w = 2};
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> col(g.col_rows() * g.col_cols());
  Im2Col(g, x.data(), col.data());
  EXPECT_EQ(col, (std::vector<float>{1, 3, 7, 9}));
}

// col2im is the adjoint of im2col: <im2col(x), c> == <x, col2im(c)>.
TEST(Im2ColTest, Col2ImIsTheAdjoint) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> d(-1, 1);
  ConvGeometry g{.channels = 2,
                 .height = 5,
                 .width = 4,
                 .kernel_h = 3,
                 .kernel_w = 2,
                 .stride_h = 2,
                 .stride_w = 1,
                 .pad_h = 1,
                 .pad_w = 1};
  std::vector<double> x(2 * 5 * 4), c(g.col_rows() * g.col_cols());
  for (double& v : x) v = d(rng);
  for (double& v : c) v = d(rng);
  std::vector<double> col(c.size());
  Im2Col(g, x.data(), col.data());
  std::vector<double> back(x.size(), 0.0);
  Col2ImAdd(g, c.data(), back.data());
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < c.size(); ++i) lhs += col[i] * c[i];
  for (size_t i = 0; i < x.size(); ++i) rhs += x[i] * back[i];
  EXPECT_NEAR(lhs, rhs, 1e-12);
}

// The definition, element by element: the reference the fast row-wise
// implementation must match exactly for every geometry.
TEST(Im2ColTest, MatchesTheDefinitionOnManyGeometries) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-1, 1);
  int checked = 0;
  for (int64_t stride = 1; stride <= 3; ++stride) {
    for (int64_t pad = 0; pad <= 2; ++pad) {
      for (int64_t k = 1; k <= 3; ++k) {
        for (int64_t hw : {1, 4, 7}) {
          ConvGeometry g{.channels = 2,
                         .height = hw,
                         .width = hw + 1,
                         .kernel_h = k,
                         .kernel_w = k + (stride == 2),
                         .stride_h = stride,
                         .stride_w = stride,
                         .pad_h = pad,
                         .pad_w = pad};
          if (g.height + 2 * pad < g.kernel_h ||
              g.width + 2 * pad < g.kernel_w) {
            continue;
          }
          std::vector<double> x(g.channels * g.height * g.width);
          for (double& v : x) v = dist(rng);
          std::vector<double> col(g.col_rows() * g.col_cols(), 99);
          Im2Col(g, x.data(), col.data());
          std::vector<double> back(x.size(), 0), want_back(x.size(), 0);
          Col2ImAdd(g, col.data(), back.data());
          int64_t index = 0;
          for (int64_t c = 0; c < g.channels; ++c)
            for (int64_t i = 0; i < g.kernel_h; ++i)
              for (int64_t j = 0; j < g.kernel_w; ++j)
                for (int64_t oh = 0; oh < g.out_h(); ++oh)
                  for (int64_t ow = 0; ow < g.out_w(); ++ow, ++index) {
                    const int64_t h = oh * stride - pad + i;
                    const int64_t w = ow * stride - pad + j;
                    const bool in =
                        h >= 0 && h < g.height && w >= 0 && w < g.width;
                    const int64_t xi = (c * g.height + h) * g.width + w;
                    ASSERT_EQ(col[index], in ? x[xi] : 0.0)
                        << "stride " << stride << " pad " << pad << " k " << k
                        << " hw " << hw << " entry " << index;
                    if (in) want_back[xi] += col[index];
                  }
          ASSERT_EQ(back, want_back);
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 60);
}

// The batched, tap-selecting form: image n's rows of the listed taps, side
// by side at stride ld, equal the per-image im2col's; col2im adds back.
TEST(Im2ColTest, TapsFormSelectsRowsOfEveryImage) {
  ConvGeometry g{.channels = 2,
                 .height = 3,
                 .width = 4,
                 .kernel_h = 3,
                 .kernel_w = 3,
                 .stride_h = 2,
                 .stride_w = 1,
                 .pad_h = 1,
                 .pad_w = 1};
  const int64_t batch = 3, cols = g.col_cols(), plane = 2 * 3 * 4;
  const std::vector<int64_t> taps = {1, 5, 8};
  const int64_t ld = batch * cols + 2;  // padding columns stay untouched
  std::vector<float> x(batch * plane);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1);
  std::vector<float> col(2 * taps.size() * ld, -5.f);
  Im2ColTaps(g, taps, batch, x.data(), col.data(), ld);
  std::vector<float> want_back(x.size(), 0.f);
  for (int64_t n = 0; n < batch; ++n) {
    std::vector<float> one(g.col_rows() * cols);
    Im2Col(g, x.data() + n * plane, one.data());
    for (int64_t c = 0; c < 2; ++c) {
      for (size_t k = 0; k < taps.size(); ++k) {
        for (int64_t p = 0; p < cols; ++p) {
          const float got = col[(c * 3 + k) * ld + n * cols + p];
          ASSERT_EQ(got, one[(c * 9 + taps[k]) * cols + p])
              << "image " << n << " channel " << c << " tap " << taps[k];
        }
      }
    }
  }
  for (int64_t r = 0; r < 6; ++r) {
    EXPECT_EQ(col[r * ld + batch * cols], -5.f);
    EXPECT_EQ(col[r * ld + batch * cols + 1], -5.f);
  }
  // col2im of all ones counts how often each pixel was read by those taps.
  std::vector<float> ones(col.size(), 1.f), back(x.size(), 0.f);
  Col2ImTapsAdd(g, taps, batch, ones.data(), ld, back.data());
  for (int64_t n = 0; n < batch; ++n) {
    std::vector<float> one(g.col_rows() * cols, 0.f), counts(plane, 0.f);
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t t : taps)
        for (int64_t p = 0; p < cols; ++p) one[(c * 9 + t) * cols + p] = 1.f;
    Col2ImAdd(g, one.data(), counts.data());
    for (int64_t i = 0; i < plane; ++i) {
      ASSERT_EQ(back[n * plane + i], counts[i])
          << "image " << n << " pixel " << i;
    }
  }
}

}  // namespace
}  // namespace tandem::cpu
