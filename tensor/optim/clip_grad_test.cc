// ClipGradNorm against torch.nn.utils.clip_grad_norm_ (PyTorch 1.13), its
// non-finite cases, and its place after GradScaler::Unscale.
#include "tensor/optim/clip_grad.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/nn/test_util.h"
#include "tensor/ops.h"
#include "tensor/optim/grad_scaler.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"

namespace tandem::optim {
namespace {

using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

// a (2x3), b (2), c (1) with the gradients of the PyTorch script:
//   a.grad = [[0.25, -0.5, 1.0], [2.0, -0.125, 0.3]]
//   b.grad = [-1.1, 0.45]; c.grad = [0.9]
//   n = torch.nn.utils.clip_grad_norm_([a, b, c], 0.5, norm_type=p)
template <typename T>
std::vector<Tensor> Params() {
  std::vector<Tensor> out = {
      *Tensor::FromVector<T>({0.5, -1.25, 2.0, 0.1, -0.3, 0.7}, {2, 3}),
      *Tensor::FromVector<T>({0.3, -0.7}), *Tensor::FromVector<T>({1.5})};
  const std::vector<std::vector<T>> grads = {
      {0.25, -0.5, 1.0, 2.0, -0.125, 0.3}, {-1.1, 0.45}, {0.9}};
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_TRUE(out[i].set_requires_grad(true).ok());
    EXPECT_TRUE(
        out[i].set_grad(*Tensor::FromVector<T>(grads[i], out[i].shape())).ok());
  }
  return out;
}

struct Case {
  double p;
  double total;
  double a0, a1, c0;  // a.grad[0], a.grad[1], c.grad[0] after clipping
};

template <typename T>
void ExpectCases(const std::vector<Case>& cases, double rel) {
  for (const Case& k : cases) {
    std::vector<Tensor> params = Params<T>();
    absl::StatusOr<double> total =
        ClipGradNorm(params, 0.5, {.norm_type = k.p});
    ASSERT_TRUE(total.ok()) << total.status();
    EXPECT_NEAR(*total, k.total, rel * k.total) << "p " << k.p;
    const std::vector<T> a = *params[0].grad().ToVector<T>();
    const std::vector<T> c = *params[2].grad().ToVector<T>();
    EXPECT_NEAR(a[0], k.a0, rel * std::abs(k.a0)) << "p " << k.p;
    EXPECT_NEAR(a[1], k.a1, rel * std::abs(k.a1)) << "p " << k.p;
    EXPECT_NEAR(c[0], k.c0, rel * std::abs(k.c0)) << "p " << k.p;
  }
}

TEST(ClipGradNormTest, F64MatchesTorch) {
  ExpectCases<double>({{2, 2.7641680484369977, 0.045221546804701175,
                        -0.09044309360940235, 0.16279756849692423},
                       {1, 6.625, 0.018867921680313707, -0.037735843360627415,
                        0.06792451804912934},
                       {kInf, 2.0, 0.06249996875001562, -0.12499993750003124,
                        0.22499988750005626},
                       {3, 2.2453866378397596, 0.05566967497882008,
                        -0.11133934995764017, 0.2004108299237523}},
                      1e-12);
}

// PyTorch sums f32 per-parameter norms in f32 (6.625000476837158 for p = 1);
// tandem in double: equal within f32 rounding.
TEST(ClipGradNormTest, F32MatchesTorchWithinF32Rounding) {
  ExpectCases<float>({{2, 2.7641680240631104, 0.04522154852747917,
                       -0.09044309705495834, 0.16279757022857666},
                      {1, 6.625000476837158, 0.018867921084165573,
                       -0.037735842168331146, 0.06792451441287994},
                      {kInf, 2.0, 0.06249997019767761, -0.12499994039535522,
                       0.22499988973140717},
                      {3, 2.2453866004943848, 0.05566967651247978,
                       -0.11133935302495956, 0.20041082799434662}},
                     1e-6);
}

TEST(ClipGradNormTest, BelowMaxNormLeavesGradientsAsTheyAre) {
  std::vector<Tensor> params = Params<double>();
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(double total, ClipGradNorm(params, 100.0));
  EXPECT_EQ(total, 2.7641680484369977);
  EXPECT_EQ(params[2].grad().ToVector<double>()->at(0), 0.9);
  // No gradients at all: 0, nothing to do.
  Tensor bare = *Tensor::FromVector<double>({1.0});
  EXPECT_EQ(*ClipGradNorm({bare}, 1.0), 0.0);
}

TEST(ClipGradNormTest, NonFiniteTotalIsAppliedLikePyTorch113) {
  std::vector<Tensor> params = Params<double>();
  params[1].grad().data<double>()[0] = kInf;
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(double total, ClipGradNorm(params, 0.5));
  EXPECT_TRUE(std::isinf(total));
  // clip_coef = 0: finite gradients become 0, the infinite one NaN.
  EXPECT_EQ(params[0].grad().ToVector<double>()->at(0), 0.0);
  EXPECT_TRUE(std::isnan(params[1].grad().ToVector<double>()->at(0)));

  params = Params<double>();
  params[2].grad().data<double>()[0] = std::nan("");
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(total, ClipGradNorm(params, 0.5));
  EXPECT_TRUE(std::isnan(total));
  EXPECT_TRUE(std::isnan(params[0].grad().ToVector<double>()->at(0)));

  params = Params<double>();
  params[2].grad().data<double>()[0] = kInf;
  absl::StatusOr<double> refused =
      ClipGradNorm(params, 0.5, {.error_if_nonfinite = true});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("is inf"));
  EXPECT_EQ(params[0].grad().ToVector<double>()->at(0), 0.25);
}

TEST(ClipGradNormTest, RefusesBadArguments) {
  std::vector<Tensor> params = Params<double>();
  EXPECT_FALSE(ClipGradNorm(params, -1).ok());
  EXPECT_FALSE(ClipGradNorm(params, kInf).ok());
  EXPECT_FALSE(ClipGradNorm(params, 1, {.norm_type = 0}).ok());
  EXPECT_FALSE(ClipGradNorm(params, 1, {.norm_type = std::nan("")}).ok());
  EXPECT_EQ(params[0].grad().ToVector<double>()->at(0), 0.25);
}

// Under AMP: Unscale, clip the true gradients, then Step (which does not
// unscale again). loss = sum(w * (3, 4)): true gradient (3, 4), norm 5.
TEST(ClipGradNormTest, AfterGradScalerUnscale) {
  Tensor w = *Tensor::FromVector<float>({1.0f, 2.0f});
  ASSERT_TRUE(w.set_requires_grad(true).ok());
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Sgd sgd, Sgd::Create({w}, /*lr=*/1.0));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(GradScaler scaler, GradScaler::Create());
  Tensor c = *Tensor::FromVector<float>({3.0f, 4.0f});
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor prod, Mul(w, c));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor loss, Sum(prod));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor scaled, scaler.Scale(loss));
  TANDEM_NN_ASSERT_OK(scaled.Backward());
  EXPECT_EQ(w.grad().ToVector<float>()->at(0), 3.0f * 65536.0f);
  TANDEM_NN_ASSERT_OK(scaler.Unscale(sgd));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(double total, ClipGradNorm({w}, 1.0));
  EXPECT_EQ(total, 5.0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(bool stepped, scaler.Step(sgd));
  EXPECT_TRUE(stepped);
  // w - 1.0 * (3, 4) * clip_coef, clip_coef = f32(1 / (5 + 1e-6)).
  const float coef = 1.0f / (5.0f + 1e-6f);
  EXPECT_EQ(w.ToVector<float>()->at(0), 1.0f - 3.0f * coef);
  EXPECT_EQ(w.ToVector<float>()->at(1), 2.0f - 4.0f * coef);
}

}  // namespace
}  // namespace tandem::optim
