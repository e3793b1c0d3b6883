// Gelu (tensor/ops/gelu.cc, the worked example of docs/adding_an_op.md):
// values and gradients against PyTorch 1.13's torch.nn.functional.gelu,
// gradcheck of both forms, and the kernel table's answer on a device
// without a Gelu kernel.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tensor/dispatch/op_table.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "tensor/testing/gradcheck.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

const std::vector<double> kX = {-3.0, -1.5, -0.5, 0.0, 0.25, 1.0, 2.5, 4.0};

struct Expected {
  GeluApproximation approximate;
  std::vector<double> y, grad;
};

// torch.nn.functional.gelu(x, approximate=...) and d(sum y)/dx in f64, from
// /usr/bin/python3 (torch 1.13).
const Expected kF64[] = {
    {GeluApproximation::kNone,
     {-0.00404969409489031, -0.10021080190328704, -0.15426876936299344, 0.0,
      0.14967658142073093, 0.841344746068543, 2.4844758366855597,
      3.9998733150326675},
     {-0.01194564720418392, -0.1274691922299796, 0.13250487534383712, 0.5,
      0.695373354883636, 1.0833154705876864, 1.037611085908145,
      1.0005036496612265}},
    {GeluApproximation::kTanh,
     {-0.0036373920817729943, -0.10042842301976707, -0.15428599017485606, 0.0,
      0.149675350701685, 0.8411919906082768, 2.484915733910001,
      3.9999297540518075},
     {-0.011584166630969648, -0.12771079315143308, 0.13263009646535764, 0.5,
      0.6953540951510604, 1.0829640838457826, 1.037951576212666,
      1.000335123197122}},
};

// The same in f32 (PyTorch's vectorised CPU kernel).
const Expected kF32[] = {
    {GeluApproximation::kNone,
     {-0.004049867391586304, -0.10021086037158966, -0.1542687863111496, 0.0,
      0.14967656135559082, 0.8413447141647339, 2.48447585105896,
      3.999873161315918},
     {-0.011945605278015137, -0.12746915221214294, 0.1325049102306366, 0.5,
      0.6953732967376709, 1.083315372467041, 1.0376110076904297,
      1.000503659248352}},
    {GeluApproximation::kTanh,
     {-0.0036374330520629883, -0.10042843222618103, -0.1542859971523285, 0.0,
      0.14967535436153412, 0.8411920070648193, 2.4849157333374023,
      3.999929904937744},
     {-0.011584296822547913, -0.12771081924438477, 0.1326301097869873, 0.5,
      0.6953541040420532, 1.0829640626907349, 1.0379517078399658,
      1.0003349781036377}},
};

void CheckAgainstTorch(DType dtype, const Expected& e, double tol) {
  SCOPED_TRACE(DTypeName(dtype));
  Tensor x = Tensor::FromVector(kX).value().To(dtype).value();
  ASSERT_TRUE(x.set_requires_grad(true).ok());
  absl::StatusOr<Tensor> y = Gelu(x, e.approximate);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->dtype(), dtype);
  ASSERT_TRUE(Sum(*y).value().Backward().ok());
  std::vector<double> yv =
      y->To(DType::kF64).value().ToVector<double>().value();
  std::vector<double> gv =
      x.grad().To(DType::kF64).value().ToVector<double>().value();
  for (size_t i = 0; i < kX.size(); ++i) {
    EXPECT_NEAR(yv[i], e.y[i], tol * (1 + std::abs(e.y[i]))) << "x=" << kX[i];
    EXPECT_NEAR(gv[i], e.grad[i], tol * (1 + std::abs(e.grad[i])))
        << "x=" << kX[i];
  }
}

TEST(GeluTest, MatchesPyTorch) {
  for (const Expected& e : kF64) CheckAgainstTorch(DType::kF64, e, 1e-15);
  // f32: a few ulps (PyTorch's vectorised erf/tanh against the C library).
  for (const Expected& e : kF32) CheckAgainstTorch(DType::kF32, e, 4e-7);
}

// f32 against f64 on the same values, forward and backward, both forms:
// within an ulp or two of the f64 result rounded (the tanh form's f32
// kernel is tensor/cpu/avx2/gelu_avx2.h's where the CPU has AVX2 and FMA). 1003
// values (not a multiple of a vector: the tail) over [-12, 12], zero and
// values past tanh's saturation.
TEST(GeluTest, F32MatchesF64AcrossTheRange) {
  std::vector<double> xs;
  for (int i = 0; i < 1000; ++i) xs.push_back(-12.0 + 24.0 * i / 999.0);
  xs.push_back(0.0);
  xs.push_back(1e-7);
  xs.push_back(-40.0);
  for (double& x : xs) x = static_cast<float>(x);
  for (GeluApproximation form :
       {GeluApproximation::kTanh, GeluApproximation::kNone}) {
    std::vector<std::vector<double>> got[2];
    for (int which = 0; which < 2; ++which) {
      Tensor x = Tensor::FromVector(xs)
                     .value()
                     .To(which == 0 ? DType::kF32 : DType::kF64)
                     .value();
      ASSERT_TRUE(x.set_requires_grad(true).ok());
      Tensor y = Gelu(x, form).value();
      Tensor w = Tensor::FromVector(xs).value().To(x.dtype()).value();
      ASSERT_TRUE(Sum(Mul(y, w).value()).value().Backward().ok());
      got[which] = {
          y.To(DType::kF64).value().ToVector<double>().value(),
          x.grad().To(DType::kF64).value().ToVector<double>().value()};
    }
    for (int k = 0; k < 2; ++k) {
      for (size_t i = 0; i < xs.size(); ++i) {
        EXPECT_NEAR(got[0][k][i], got[1][k][i],
                    3e-7 * (1 + std::abs(got[1][k][i])))
            << (k == 0 ? "y" : "gx") << " x=" << xs[i];
      }
    }
  }
}

TEST(GeluTest, LowPrecisionComputesInFloat) {
  Tensor x = Tensor::FromVector(kX).value().To(DType::kBF16).value();
  Tensor y = Gelu(x, GeluApproximation::kTanh).value();
  EXPECT_EQ(y.dtype(), DType::kBF16);
  Tensor wide = Gelu(x.To(DType::kF32).value(), GeluApproximation::kTanh)
                    .value()
                    .To(DType::kBF16)
                    .value();
  EXPECT_EQ(y.To(DType::kF32).value().ToVector<float>().value(),
            wide.To(DType::kF32).value().ToVector<float>().value());
}

TEST(GeluTest, GradCheck) {
  std::mt19937 rng(11);
  for (GeluApproximation a :
       {GeluApproximation::kNone, GeluApproximation::kTanh}) {
    Tensor x = RandomTensor({4, 5}, rng, -4, 4);
    absl::Status s = GradCheck(
        [a](const std::vector<Tensor>& in) { return Gelu(in[0], a); }, {x});
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(GeluTest, CheckedOnceForEveryDevice) {
  absl::StatusOr<Tensor> bad = Gelu(Tensor::Ones({2}, DType::kI64).value());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("Gelu: `x` is i64[2]"));
  EXPECT_EQ(Gelu(Tensor()).status().code(), absl::StatusCode::kInvalidArgument);
  // Its rows: a CPU kernel for forward and backward, found by name.
  EXPECT_THAT(internal::DescribeKernelTable(),
              ::testing::IsSupersetOf(
                  {HasSubstr("Gelu: cpu"), HasSubstr("GeluBackward: cpu")}));
}

}  // namespace
}  // namespace tandem
