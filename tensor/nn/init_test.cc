#include "tensor/nn/init.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/generator.h"
#include "tensor/nn/test_util.h"
#include "tensor/tensor.h"

namespace tandem::nn::init {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(InitTest, FanInFollowsPyTorch) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor linear_w, Tensor::Empty({30, 7}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(int64_t fan, FanIn(linear_w));
  EXPECT_EQ(fan, 7);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor conv_w, Tensor::Empty({16, 3, 5, 2}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(fan, FanIn(conv_w));
  EXPECT_EQ(fan, 30);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor vec, Tensor::Empty({4}));
  EXPECT_THAT(FanIn(vec).status().message(), HasSubstr("at least 2 dims"));
}

TEST(InitTest, KaimingBoundWithSqrt5IsOneOverSqrtFanIn) {
  // gain = sqrt(2 / 6) = 1/sqrt(3), so bound = 1/sqrt(fan_in), up to the
  // rounding of PyTorch's operation order.
  EXPECT_NEAR(KaimingUniformBound(27, std::sqrt(5.0)), 1 / std::sqrt(27.0),
              1e-15);
  // a = 0 (ReLU gain sqrt(2)): bound = sqrt(6 / fan_in).
  EXPECT_NEAR(KaimingUniformBound(10, 0.0), std::sqrt(0.6), 1e-15);
}

// Numbers from /usr/bin/python3 (torch 1.13):
//   torch.manual_seed(5); w = torch.empty(4, 3, 3, 3)
//   torch.nn.init.kaiming_normal_(w, mode='fan_out', nonlinearity='relu')
//   # bits of w.flatten()[:4], w.flatten()[-1]
//   torch.manual_seed(5); w = torch.empty(5, 2, dtype=torch.float64)
//   torch.nn.init.kaiming_normal_(w, mode='fan_in')  # w.flatten()[:3]
TEST(InitTest, KaimingNormalMatchesPyTorch) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor conv_w, Tensor::Empty({4, 3, 3, 3}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(int64_t fan, FanOut(conv_w));
  EXPECT_EQ(fan, 36);
  Generator gen(5);
  TANDEM_NN_ASSERT_OK(KaimingNormal(conv_w, 0.0, FanMode::kFanOut, gen));
  const float* w = conv_w.data<float>();
  const uint32_t expected[] = {0x3ede54e1, 0x3dfa79ee, 0xbece980a, 0xbecd525b};
  for (int i = 0; i < 4; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &w[i], 4);
    EXPECT_EQ(bits, expected[i]) << i;
  }
  EXPECT_EQ(w[107], 0.42644068598747253f);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor lin_w,
                                 Tensor::Empty({5, 2}, DType::kF64));
  gen.ManualSeed(5);
  TANDEM_NN_ASSERT_OK(KaimingNormal(lin_w, 0.0, FanMode::kFanIn, gen));
  EXPECT_EQ(lin_w.data<double>()[0], -0.48678075071242677);
  EXPECT_EQ(lin_w.data<double>()[1], -0.6038215878840039);
  EXPECT_EQ(lin_w.data<double>()[2], -0.5580962308236769);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor empty, Tensor::Empty({0, 3}));
  EXPECT_THAT(KaimingNormal(empty, 0.0, FanMode::kFanOut, gen).message(),
              HasSubstr("the fan is 0"));
}

TEST(InitTest, UniformMatchesPyTorch) {
  // torch.manual_seed(7); torch.nn.init.uniform_(torch.empty(2, 4), 0.1, 0.7)
  Generator gen(7);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Empty({2, 4}));
  TANDEM_NN_ASSERT_OK(Uniform(t, 0.1, 0.7, gen));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::vector<float> v, t.ToVector<float>());
  EXPECT_THAT(
      v, ElementsAre(0.420953512f, 0.219281912f, 0.495526999f, 0.494134128f,
                     0.239656925f, 0.355036825f, 0.224251613f, 0.477841794f));
}

TEST(InitTest, UniformFloat64MatchesPyTorch) {
  // torch.manual_seed(3); torch.empty(4, dtype=torch.float64).uniform_(-1, 2)
  Generator gen(3);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Empty({4}, DType::kF64));
  TANDEM_NN_ASSERT_OK(Uniform(t, -1, 2, gen));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::vector<double> v, t.ToVector<double>());
  EXPECT_THAT(v, ElementsAre(-0.89767541304843856, -0.13977931983607916,
                             1.318744832985753, -0.475218912156116));
}

TEST(InitTest, NormalHasTheRightMoments) {
  Generator gen(99);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Empty({200, 100}, dtype));
    TANDEM_NN_ASSERT_OK(Normal(t, 2.0, 3.0, gen));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor t64, t.To(DType::kF64));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::vector<double> v,
                                   t64.ToVector<double>());
    double sum = 0;
    double sum_sq = 0;
    for (double x : v) {
      sum += x;
      sum_sq += x * x;
    }
    const double mean = sum / v.size();
    const double sd = std::sqrt(sum_sq / v.size() - mean * mean);
    // Standard error of the mean: 3 / sqrt(2e4) ~ 0.021.
    EXPECT_NEAR(mean, 2.0, 0.1) << DTypeName(dtype);
    EXPECT_NEAR(sd, 3.0, 0.1) << DTypeName(dtype);
  }
}

TEST(InitTest, RejectsIntegerTensors) {
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Zeros({3, 3}, DType::kI64));
  absl::Status s = Uniform(t, 0, 1, gen);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("i64"));
  EXPECT_FALSE(KaimingUniform(t, 0, gen).ok());
  EXPECT_FALSE(Uniform(Tensor(), 0, 1, gen).ok());
}

}  // namespace
}  // namespace tandem::nn::init
