// Dropout (tensor/ops/dropout.cc): masks, values and gradients bit for bit
// against PyTorch 1.13's CPU F.dropout from the same seed (f64 and f32),
// the number of draws (the generator continues like torch's), the cases
// that draw nothing, GradCheck, and the argument check.
//
// The numbers were printed by /usr/bin/python3 (torch 1.13, no MKL):
//   for dt in [torch.float64, torch.float32]:
//     torch.manual_seed(3)
//     x = (torch.arange(24, dtype=dt) * 0.1 - 1).reshape(4, 6)
//     x.requires_grad_(True)
//     y = F.dropout(x, 0.3); y2 = F.dropout(x, 0.55)
//     w = torch.arange(24, dtype=dt).reshape(4, 6) * 0.5 + 0.25
//     ((y + y2) * w).sum().backward()
//     print(y.flatten().tolist(), y2.flatten().tolist(),
//           x.grad.flatten().tolist())
//     print(torch.randint(0, 1000, (3,)).tolist())   # [311, 472, 975]
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "tensor/generator.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "tensor/testing/gradcheck.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

struct Expected {
  std::vector<double> y, y2, grad;
};

const Expected kF64 = {{-1.4285714285714286,
                        -1.2857142857142858,
                        -0.0,
                        -1.0,
                        -0.0,
                        -0.7142857142857143,
                        -0.5714285714285713,
                        -0.4285714285714285,
                        -0.28571428571428564,
                        -0.0,
                        0.0,
                        0.142857142857143,
                        0.285714285714286,
                        0.42857142857142866,
                        0.0,
                        0.7142857142857143,
                        0.8571428571428573,
                        1.0000000000000002,
                        0.0,
                        1.285714285714286,
                        1.4285714285714286,
                        1.5714285714285716,
                        1.7142857142857146,
                        1.8571428571428577},
                       {-2.2222222222222223,
                        -2.0,
                        -1.777777777777778,
                        -0.0,
                        -0.0,
                        -0.0,
                        -0.0,
                        -0.6666666666666665,
                        -0.44444444444444436,
                        -0.22222222222222218,
                        0.0,
                        0.0,
                        0.44444444444444486,
                        0.0,
                        0.0,
                        0.0,
                        0.0,
                        1.555555555555556,
                        1.777777777777778,
                        0.0,
                        2.2222222222222223,
                        2.4444444444444446,
                        0.0,
                        0.0},
                       {0.9126984126984128,
                        2.738095238095238,
                        2.7777777777777777,
                        2.5,
                        0.0,
                        3.928571428571429,
                        4.642857142857143,
                        13.690476190476192,
                        15.515873015873016,
                        10.555555555555555,
                        19.166666666666668,
                        8.214285714285715,
                        22.817460317460316,
                        9.642857142857142,
                        0.0,
                        11.071428571428571,
                        11.785714285714286,
                        31.944444444444446,
                        20.555555555555557,
                        13.928571428571429,
                        37.420634920634924,
                        39.24603174603175,
                        16.071428571428573,
                        16.785714285714285}};

const Expected kF32 = {{-1.4285714626312256,
                        -1.2857142686843872,
                        -0.0,
                        -1.0,
                        -0.0,
                        -0.7142857313156128,
                        -0.5714285373687744,
                        -0.4285714626312256,
                        -0.2857142686843872,
                        -0.0,
                        0.0,
                        0.14285717904567719,
                        0.28571435809135437,
                        0.42857155203819275,
                        0.0,
                        0.7142857313156128,
                        0.8571429252624512,
                        1.0000001192092896,
                        0.0,
                        1.2857142686843872,
                        1.4285714626312256,
                        1.5714287757873535,
                        1.7142858505249023,
                        1.8571428060531616},
                       {-2.222222328186035,
                        -2.0,
                        -1.777777910232544,
                        -0.0,
                        -0.0,
                        -0.0,
                        -0.0,
                        -0.6666667461395264,
                        -0.4444444477558136,
                        -0.22222214937210083,
                        0.0,
                        0.0,
                        0.44444456696510315,
                        0.0,
                        0.0,
                        0.0,
                        0.0,
                        1.5555557012557983,
                        1.7777780294418335,
                        0.0,
                        2.222222328186035,
                        2.4444448947906494,
                        0.0,
                        0.0},
                       {0.9126984477043152,
                        2.738095283508301,
                        2.777777910232544,
                        2.5,
                        0.0,
                        3.9285714626312256,
                        4.642857074737549,
                        13.69047737121582,
                        15.515872955322266,
                        10.555556297302246,
                        19.166667938232422,
                        8.214285850524902,
                        22.817461013793945,
                        9.642857551574707,
                        0.0,
                        11.071429252624512,
                        11.785714149475098,
                        31.94444465637207,
                        20.555557250976562,
                        13.928571701049805,
                        37.42063522338867,
                        39.24603271484375,
                        16.071428298950195,
                        16.785715103149414}};

// arange(24, dtype) * scale + shift, each step rounded in dtype as torch
// computes it (two ops, no fused multiply-add).
Tensor Ramp(DType dtype, double scale, double shift) {
  std::vector<double> v(24);
  for (int i = 0; i < 24; ++i) v[i] = i;
  Tensor r = Tensor::FromVector(v, {4, 6}).value().To(dtype).value();
  return Add(Mul(r, scale).value(), shift).value();
}

std::vector<double> F64(const Tensor& t) {
  return t.To(DType::kF64).value().ToVector<double>().value();
}

// Bit for bit: the same draws, the same roundings (signed zeros included).
void ExpectSameBits(const std::vector<double>& got,
                    const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i], want[i]) << what << "[" << i << "]";
    EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i]))
        << what << "[" << i << "]";
  }
}

void CheckAgainstTorch(DType dtype, const Expected& e) {
  SCOPED_TRACE(DTypeName(dtype));
  Generator gen(3);
  Tensor x = Ramp(dtype, 0.1, -1);
  ASSERT_TRUE(x.set_requires_grad(true).ok());
  absl::StatusOr<Tensor> y = Dropout(x, 0.3, true, gen);
  ASSERT_TRUE(y.ok()) << y.status();
  absl::StatusOr<Tensor> y2 = Dropout(x, 0.55, true, gen);
  ASSERT_TRUE(y2.ok()) << y2.status();
  EXPECT_EQ(y->dtype(), dtype);
  EXPECT_EQ(y->shape(), x.shape());
  Tensor w = Ramp(dtype, 0.5, 0.25);
  ASSERT_TRUE(
      Sum(Mul(Add(*y, *y2).value(), w).value()).value().Backward().ok());
  ExpectSameBits(F64(*y), e.y, "y");
  ExpectSameBits(F64(*y2), e.y2, "y2");
  ExpectSameBits(F64(x.grad()), e.grad, "grad");
  // 24 + 24 Random64 draws, as torch's generator: its next randint(0, 1000)
  // values (random() % 1000) follow.
  EXPECT_EQ(gen.Random() % 1000, 311u);
  EXPECT_EQ(gen.Random() % 1000, 472u);
  EXPECT_EQ(gen.Random() % 1000, 975u);
}

TEST(DropoutTest, MatchesPyTorchBitForBit) {
  CheckAgainstTorch(DType::kF64, kF64);
  CheckAgainstTorch(DType::kF32, kF32);
}

TEST(DropoutTest, SameSeedSameMaskOtherSeedAnother) {
  Tensor x = Tensor::Ones({1000}, DType::kF32).value();
  Generator a(9), b(9), c(10);
  std::vector<float> ya =
      Dropout(x, 0.5, true, a).value().ToVector<float>().value();
  std::vector<float> yb =
      Dropout(x, 0.5, true, b).value().ToVector<float>().value();
  std::vector<float> yc =
      Dropout(x, 0.5, true, c).value().ToVector<float>().value();
  EXPECT_EQ(ya, yb);
  EXPECT_NE(ya, yc);
  // About half kept (1000 draws: 6 sigma is 95).
  int64_t kept = 0;
  for (float v : ya) kept += v != 0;
  EXPECT_NEAR(static_cast<double>(kept), 500, 95);
}

TEST(DropoutTest, EvalAndZeroPReturnTheInputAndDrawNothing) {
  Tensor x = Ramp(DType::kF32, 0.1, -1);
  ASSERT_TRUE(x.set_requires_grad(true).ok());
  Generator gen(4), untouched(4);
  Tensor eval = Dropout(x, 0.5, false, gen).value();
  Tensor p0 = Dropout(x, 0.0, true, gen).value();
  EXPECT_EQ(eval.raw_data(), x.raw_data());  // x itself, as PyTorch
  EXPECT_EQ(p0.raw_data(), x.raw_data());
  EXPECT_EQ(gen.Random(), untouched.Random());
}

TEST(DropoutTest, POneGivesZerosWithZeroGradientAndDrawsNothing) {
  Tensor x = Ramp(DType::kF64, 0.1, -1);
  ASSERT_TRUE(x.set_requires_grad(true).ok());
  Generator gen(4), untouched(4);
  Tensor y = Dropout(x, 1.0, true, gen).value();
  for (double v : F64(y)) EXPECT_EQ(v, 0.0);
  ASSERT_TRUE(Sum(y).value().Backward().ok());
  for (double v : F64(x.grad())) EXPECT_EQ(v, 0.0);
  EXPECT_EQ(gen.Random(), untouched.Random());
}

// bf16: the mask holds 1 / (1 - p) rounded to bf16, as PyTorch's
// noise.div_(1 - p) on a bf16 tensor. Printed by torch 1.13:
//   torch.manual_seed(5)
//   x = (torch.arange(24, dtype=torch.bfloat16) * 0.1 + (-1)).reshape(4, 6)
//   print(x.float().flatten().tolist())
//   print(F.dropout(x, 0.25).float().flatten().tolist())
TEST(DropoutTest, Bf16MatchesPyTorch) {
  const std::vector<double> x = {
      -1.0,       -0.8984375,  -0.80078125, -0.69921875, -0.6015625, -0.5,
      -0.3984375, -0.30078125, -0.19921875, -0.09765625, 0.0,        0.1015625,
      0.203125,   0.3046875,   0.3984375,   0.5,         0.6015625,  0.703125,
      0.8046875,  0.8984375,   1.0,         1.109375,    1.203125,   1.296875};
  const std::vector<double> want = {
      -1.3359375, -1.203125,    -1.0703125,  -0.93359375, -0.8046875,
      -0.0,       -0.53125,     -0.40234375, -0.0,        -0.130859375,
      0.0,        0.1357421875, 0.0,         0.40625,     0.53125,
      0.66796875, 0.8046875,    0.9375,      0.0,         1.203125,
      1.3359375,  1.484375,     1.609375,    1.734375};
  Generator gen(5);
  Tensor xb = Tensor::FromVector(x).value().To(DType::kBF16).value();
  Tensor y = Dropout(xb, 0.25, true, gen).value();
  EXPECT_EQ(y.dtype(), DType::kBF16);
  ExpectSameBits(F64(y), want, "bf16 y");
}

TEST(DropoutTest, GradCheck) {
  std::mt19937 rng(3);
  Tensor x = RandomTensor({5, 4}, rng);
  absl::Status s = GradCheck(
      [](const std::vector<Tensor>& in) {
        Generator gen(21);  // the same mask on every evaluation
        return Dropout(in[0], 0.4, true, gen);
      },
      {x});
  EXPECT_TRUE(s.ok()) << s;
}

TEST(DropoutTest, RefusesPOutsideZeroOne) {
  Generator gen(1);
  Tensor x = Tensor::Ones({2}, DType::kF32).value();
  for (double p : {1.5, -0.1, std::numeric_limits<double>::quiet_NaN()}) {
    absl::StatusOr<Tensor> r = Dropout(x, p, true, gen);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(),
                HasSubstr("probability p must be in [0, 1]"));
  }
  EXPECT_THAT(Dropout(x, 1.5, true, gen).status().message(),
              HasSubstr("got 1.5"));
  EXPECT_FALSE(
      Dropout(Tensor::Ones({2}, DType::kI64).value(), 0.5, true, gen).ok());
}

}  // namespace
}  // namespace tandem
