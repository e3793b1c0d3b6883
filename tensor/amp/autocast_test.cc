// Autocast: the policy at dispatch, f32 master gradients, the cast cache,
// nesting, the disabled guard, thread-locality and bad dtypes.
#include "tensor/amp/autocast.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "tensor/amp/policy.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem::amp {
namespace {

using ::testing::HasSubstr;

Tensor Make(Shape shape, std::vector<float> values, bool grad = false) {
  Tensor t = Tensor::FromVector<float>(values, shape).value();
  if (grad) {
    EXPECT_TRUE(t.set_requires_grad(true).ok());
  }
  return t;
}

std::vector<float> AsF32(const Tensor& t) {
  return t.To(DType::kF32).value().ToVector<float>().value();
}

float RoundBf16(float v) { return static_cast<float>(BFloat16(v)); }

// One bf16 ulp at |v|: 2^(exponent - 7).
float Bf16Ulp(float v) {
  int exp = 0;
  std::frexp(v == 0 ? 1e-30f : v, &exp);
  return std::ldexp(1.0f, exp - 8);
}

// x [2, 3], w [2, 3], b [2] with values that are not bf16-exact.
struct LinearCase {
  Tensor x = Make({2, 3}, {0.1f, -0.7f, 1.3f, 2.9f, 0.33f, -1.1f});
  Tensor w = Make({2, 3}, {0.21f, 0.5f, -0.37f, 1.01f, -2.2f, 0.05f}, true);
  Tensor b = Make({2}, {0.015f, -0.3f}, true);
};

TEST(AutocastTest, LinearRunsInBf16WithF32Accumulation) {
  LinearCase c;
  Autocast autocast(DeviceType::kCPU, DType::kBF16);
  ASSERT_TRUE(autocast.status().ok());
  absl::StatusOr<Tensor> y = Linear(c.x, c.w, c.b);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->dtype(), DType::kBF16);
  // Reference: bf16 operands, exact products, f32-or-better sum, one
  // rounding. oneDNN's summation order may differ: within 1 bf16 ulp.
  const std::vector<float> x = c.x.ToVector<float>().value();
  const std::vector<float> w = c.w.ToVector<float>().value();
  const std::vector<float> b = c.b.ToVector<float>().value();
  const std::vector<float> got = AsF32(*y);
  for (int r = 0; r < 2; ++r) {
    for (int o = 0; o < 2; ++o) {
      double acc = RoundBf16(b[o]);
      for (int i = 0; i < 3; ++i) {
        acc += double(RoundBf16(x[r * 3 + i])) * RoundBf16(w[o * 3 + i]);
      }
      const float ref = static_cast<float>(acc);
      EXPECT_NEAR(got[r * 2 + o], RoundBf16(ref), Bf16Ulp(ref))
          << "row " << r << " col " << o;
    }
  }
}

TEST(AutocastTest, GradientsReachF32MasterParameters) {
  LinearCase c;
  Tensor loss;
  {
    Autocast autocast(DeviceType::kCPU, DType::kBF16);
    Tensor y = Linear(c.x, c.w, c.b).value();
    loss = Sum(y).value();
    EXPECT_EQ(loss.dtype(), DType::kF32);  // sum is on the f32 list
  }
  ASSERT_TRUE(loss.Backward().ok());
  ASSERT_TRUE(c.w.has_grad());
  EXPECT_EQ(c.w.grad().dtype(), DType::kF32);
  EXPECT_EQ(c.b.grad().dtype(), DType::kF32);
  // d sum / dW[o, i] = sum_r x[r, i] (bf16-rounded), dW computed in bf16.
  const std::vector<float> x = c.x.ToVector<float>().value();
  const std::vector<float> gw = c.w.grad().ToVector<float>().value();
  for (int o = 0; o < 2; ++o) {
    for (int i = 0; i < 3; ++i) {
      const float ref = RoundBf16(x[i]) + RoundBf16(x[3 + i]);
      EXPECT_NEAR(gw[o * 3 + i], ref, Bf16Ulp(ref));
    }
  }
  // db = number of rows, exactly.
  EXPECT_EQ(c.b.grad().ToVector<float>().value(),
            (std::vector<float>{2.f, 2.f}));
}

TEST(AutocastTest, PolicyTableAtDispatch) {
  Tensor a = Make({2}, {1.5f, -2.25f});
  Autocast autocast(DeviceType::kCPU, DType::kBF16);
  Tensor low = a.To(DType::kBF16).value();
  EXPECT_EQ(Relu(low)->dtype(), DType::kBF16);   // input dtype
  EXPECT_EQ(Add(low, a)->dtype(), DType::kF32);  // promote to widest
  EXPECT_EQ(Add(low, low)->dtype(), DType::kBF16);
  EXPECT_EQ(Mse(low, a)->dtype(), DType::kF32);  // f32 list
  EXPECT_EQ(Softmax(low)->dtype(), DType::kF32);
  EXPECT_EQ(MatMul(Make({1, 2}, {1, 2}), Make({2, 1}, {3, 4}))->dtype(),
            DType::kBF16);
  EXPECT_EQ(PolicyFor(AmpOp::kLinear), CastPolicy::kLowerPrecision);
  EXPECT_EQ(PolicyFor(AmpOp::kMse), CastPolicy::kF32);
  EXPECT_EQ(PolicyFor(AmpOp::kAdd), CastPolicy::kPromote);
  // f64 is left alone by the lower-precision list, as in PyTorch.
  Tensor d = Tensor::FromVector<double>({1, 2}, {1, 2}).value();
  Tensor e = Tensor::FromVector<double>({3, 4}, {2, 1}).value();
  EXPECT_EQ(MatMul(d, e)->dtype(), DType::kF64);
}

TEST(AutocastTest, NestingAndTheDisabledGuard) {
  LinearCase c;
  EXPECT_FALSE(IsAutocastEnabled(DeviceType::kCPU));
  {
    Autocast outer(DeviceType::kCPU, DType::kBF16);
    EXPECT_EQ(Linear(c.x, c.w, c.b)->dtype(), DType::kBF16);
    {
      Autocast off(DeviceType::kCPU, DType::kBF16, /*enabled=*/false);
      EXPECT_FALSE(IsAutocastEnabled(DeviceType::kCPU));
      EXPECT_EQ(Linear(c.x, c.w, c.b)->dtype(), DType::kF32);
      {
        Autocast inner(DeviceType::kCPU, DType::kF16);
        EXPECT_EQ(Linear(c.x, c.w, c.b)->dtype(), DType::kF16);
      }
      EXPECT_EQ(Linear(c.x, c.w, c.b)->dtype(), DType::kF32);
    }
    EXPECT_EQ(Linear(c.x, c.w, c.b)->dtype(), DType::kBF16);
    // A CUDA region does not switch the CPU's off.
    Autocast cuda(DeviceType::kCUDA, DType::kF16);
    EXPECT_EQ(Linear(c.x, c.w, c.b)->dtype(), DType::kBF16);
  }
  EXPECT_FALSE(IsAutocastEnabled(DeviceType::kCPU));
  EXPECT_EQ(Linear(c.x, c.w, c.b)->dtype(), DType::kF32);
}

TEST(AutocastTest, RegionsAreThreadLocal) {
  LinearCase c;
  Autocast autocast(DeviceType::kCPU, DType::kBF16);
  // Another thread (a simulated rank) sees no region while this one is
  // open, and its own region does not leak back here.
  DType other_plain = DType::kI64, other_f16 = DType::kI64;
  bool other_enabled = true;
  std::thread other([&] {
    other_enabled = IsAutocastEnabled(DeviceType::kCPU);
    Tensor x = c.x.Detach(), w = c.w.Detach(), b = c.b.Detach();
    other_plain = Linear(x, w, b)->dtype();
    Autocast own(DeviceType::kCPU, DType::kF16);
    other_f16 = Linear(x, w, b)->dtype();
  });
  other.join();
  EXPECT_FALSE(other_enabled);
  EXPECT_EQ(other_plain, DType::kF32);
  EXPECT_EQ(other_f16, DType::kF16);
  EXPECT_EQ(Linear(c.x, c.w, c.b)->dtype(), DType::kBF16);
}

TEST(AutocastTest, CastCacheCastsEachParameterOncePerRegion) {
  LinearCase c;
  Tensor loss;
  {
    Autocast autocast(DeviceType::kCPU, DType::kBF16);
    Tensor y1 = Linear(c.x, c.w, c.b).value();
    Tensor y2 = Linear(c.x, c.w, c.b).value();
    EXPECT_EQ(CastCacheSize(), 2);  // w and b; x is not a parameter
    loss = Add(Sum(y1).value(), Sum(y2).value()).value();
  }
  EXPECT_EQ(CastCacheSize(), 0);  // cleared with the outermost region
  ASSERT_TRUE(loss.Backward().ok());
  // Both uses accumulate into the master gradient: db = 2 uses * 2 rows.
  EXPECT_EQ(c.b.grad().ToVector<float>().value(),
            (std::vector<float>{4.f, 4.f}));
}

TEST(AutocastTest, BadDeviceOrDTypeIsInvalidArgument) {
  for (DType bad : {DType::kI64, DType::kI32, DType::kF32, DType::kF64}) {
    Autocast autocast(DeviceType::kCPU, bad);
    EXPECT_EQ(autocast.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(autocast.status().message(), HasSubstr("cpu"));
    EXPECT_THAT(autocast.status().message(), HasSubstr(DTypeName(bad)));
    EXPECT_FALSE(autocast.enabled());
    EXPECT_FALSE(IsAutocastEnabled(DeviceType::kCPU));  // inert
  }
}

TEST(AutocastTest, LowPrecisionOutsideAutocast) {
  // bf16 operands run natively; other ops compute in float and round.
  Tensor a = Make({2, 2}, {1, 2, 3, 4}).To(DType::kBF16).value();
  Tensor m = MatMul(a, a).value();
  EXPECT_EQ(m.dtype(), DType::kBF16);
  EXPECT_EQ(AsF32(m), (std::vector<float>{7, 10, 15, 22}));
  Tensor h = Make({2}, {1, 2}).To(DType::kF16).value();
  Tensor e = Exp(h).value();
  EXPECT_EQ(e.dtype(), DType::kF16);
  EXPECT_EQ(AsF32(e)[1], static_cast<float>(Half(std::exp(2.0f))));
  // f32 with f64 is still an error (no implicit promotion outside AMP).
  Tensor d = Tensor::FromVector<double>({1, 2}, {2}).value();
  EXPECT_FALSE(Add(Make({2}, {1, 2}), d).ok());
}

TEST(AutocastTest, MatMulBf16BackwardMatchesF32OnExactValues) {
  // Small integers are exact in bf16, so every product and sum is exact.
  Tensor a = Make({2, 3}, {1, 2, 3, 4, 5, 6}, true);
  Tensor b = Make({3, 2}, {1, -1, 2, 0, -2, 1}, true);
  Tensor loss;
  {
    Autocast autocast(DeviceType::kCPU, DType::kBF16);
    loss = Sum(MatMul(a, b).value()).value();
  }
  ASSERT_TRUE(loss.Backward().ok());
  // dA = 1 · B^T: row sums of B; dB = A^T · 1: column sums of A.
  EXPECT_EQ(a.grad().ToVector<float>().value(),
            (std::vector<float>{0, 2, -1, 0, 2, -1}));
  EXPECT_EQ(b.grad().ToVector<float>().value(),
            (std::vector<float>{5, 5, 7, 7, 9, 9}));
}

TEST(AutocastTest, Conv2dRunsInBf16AndGradientsReachF32) {
  // x [1, 1, 3, 3], w [2, 1, 2, 2], b [2]: output [1, 2, 2, 2].
  Tensor x = Make({1, 1, 3, 3},
                  {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f});
  Tensor w = Make({2, 1, 2, 2},
                  {0.11f, -0.3f, 0.7f, 1.3f, -0.9f, 0.05f, 0.33f, 2.1f}, true);
  Tensor b = Make({2}, {0.01f, -0.2f}, true);
  Tensor loss;
  {
    Autocast autocast(DeviceType::kCPU, DType::kBF16);
    Tensor y = Conv2d(x, w, b).value();
    EXPECT_EQ(y.dtype(), DType::kBF16);
    const std::vector<float> got = AsF32(y);
    const std::vector<float> xs = x.ToVector<float>().value();
    const std::vector<float> ws = w.ToVector<float>().value();
    const std::vector<float> bs = b.ToVector<float>().value();
    for (int o = 0; o < 2; ++o) {
      for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 2; ++j) {
          double acc = RoundBf16(bs[o]);
          for (int di = 0; di < 2; ++di) {
            for (int dj = 0; dj < 2; ++dj) {
              acc += double(RoundBf16(xs[(i + di) * 3 + j + dj])) *
                     RoundBf16(ws[o * 4 + di * 2 + dj]);
            }
          }
          const float ref = static_cast<float>(acc);
          EXPECT_NEAR(got[o * 4 + i * 2 + j], RoundBf16(ref), Bf16Ulp(ref));
        }
      }
    }
    loss = Sum(y).value();
  }
  ASSERT_TRUE(loss.Backward().ok());
  EXPECT_EQ(w.grad().dtype(), DType::kF32);
  // db = output positions per channel, exactly.
  EXPECT_EQ(b.grad().ToVector<float>().value(), (std::vector<float>{4, 4}));
}

}  // namespace
}  // namespace tandem::amp
