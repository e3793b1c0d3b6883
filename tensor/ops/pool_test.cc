// Pooling (tensor/ops/pool.cc): values and gradients of MaxPool2d,
// AvgPool2d and AdaptiveAvgPool2d against PyTorch 1.13, GradCheck in f64,
// the argument checks, and the kernel table's backward on simulated
// devices is the CPU's (tensor/sim_device).
//
// ops_pool_test_data.inc is the output of this script (/usr/bin/python3,
// torch 1.13), kept here so it can be regenerated:
//
//   import torch, torch.nn.functional as F
//   def x_of(dtype):
//       v = [((7 * i) % 11 - 5) / 4 + i / 64 for i in range(120)]
//       return torch.tensor(v, dtype=dtype).reshape(2, 2, 5,
//       6).requires_grad_()
//   cases = [
//     ('max_k3s2p1', lambda x: F.max_pool2d(x, 3, 2, 1)),
//     ('avg_k3s2p1', lambda x: F.avg_pool2d(x, 3, 2, 1)),
//     ('avg_k3s2p1_nopad_ceil', lambda x: F.avg_pool2d(x, 3, 2, 1,
//     ceil_mode=True, count_include_pad=False)),
//     ('avg_k2x3s1x2_ceil', lambda x: F.avg_pool2d(x, (2, 3), (1, 2), 0,
//     ceil_mode=True)),
//     ('adaptive_1x1', lambda x: F.adaptive_avg_pool2d(x, (1, 1))),
//     ('adaptive_3x4', lambda x: F.adaptive_avg_pool2d(x, (3, 4))),
//   ]
//   for dt, tag in ((torch.float64, 'F64'), (torch.float32, 'F32')):
//     print('const PoolExpected k%s[] = {' % tag)
//     for name, f in cases:
//       x = x_of(dt); y = f(x)
//       w = torch.arange(1, y.numel() + 1, dtype=dt).reshape(y.shape) / 8
//       (y * w).sum().backward()
//       fmt = lambda t: ', '.join(repr(float(v)) for v in t.detach().flatten())
//       print('    {"%s", {%s},\n     {%s},\n     {%s}},' % (name, ',
//       '.join(map(str, y.shape)), fmt(y), fmt(x.grad)))
//     print('};')
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "tensor/testing/gradcheck.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

struct PoolExpected {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<double> y, grad;
};
#include "tensor/ops/pool_test_data.inc"

std::function<absl::StatusOr<Tensor>(const Tensor&)> OpFor(
    const std::string& name) {
  if (name == "max_k3s2p1") {
    return [](const Tensor& x) {
      return MaxPool2d(x,
                       {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
    };
  }
  if (name == "avg_k3s2p1") {
    return [](const Tensor& x) {
      return AvgPool2d(x,
                       {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
    };
  }
  if (name == "avg_k3s2p1_nopad_ceil") {
    return [](const Tensor& x) {
      return AvgPool2d(x, {.kernel = {3, 3},
                           .stride = {2, 2},
                           .padding = {1, 1},
                           .count_include_pad = false,
                           .ceil_mode = true});
    };
  }
  if (name == "avg_k2x3s1x2_ceil") {
    return [](const Tensor& x) {
      return AvgPool2d(x,
                       {.kernel = {2, 3}, .stride = {1, 2}, .ceil_mode = true});
    };
  }
  if (name == "adaptive_1x1") {
    return [](const Tensor& x) { return AdaptiveAvgPool2d(x, {1, 1}); };
  }
  return [](const Tensor& x) { return AdaptiveAvgPool2d(x, {3, 4}); };
}

// The script's x: exact in f32 and f64, with ties.
Tensor Input(DType dtype) {
  std::vector<double> v(120);
  for (int i = 0; i < 120; ++i) v[i] = ((7 * i) % 11 - 5) / 4.0 + i / 64.0;
  return Tensor::FromVector(v, {2, 2, 5, 6}).value().To(dtype).value();
}

std::vector<double> Values(const Tensor& t) {
  return t.To(DType::kF64).value().ToVector<double>().value();
}

// y and d(sum(y * w))/dx, w = (1, 2, ...) / 8 as in the script.
void CheckCase(DType dtype, const PoolExpected& e, double tol) {
  SCOPED_TRACE(e.name + " " + std::string(DTypeName(dtype)));
  Tensor x = Input(dtype);
  ASSERT_TRUE(x.set_requires_grad(true).ok());
  absl::StatusOr<Tensor> y = OpFor(e.name)(x);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), Shape(e.shape));
  EXPECT_EQ(y->dtype(), dtype);
  std::vector<double> wv(y->numel());
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = (i + 1) / 8.0;
  Tensor w = Tensor::FromVector(wv, y->shape()).value().To(dtype).value();
  ASSERT_TRUE(Sum(Mul(*y, w).value()).value().Backward().ok());
  const std::vector<double> yv = Values(*y), gv = Values(x.grad());
  ASSERT_EQ(yv.size(), e.y.size());
  ASSERT_EQ(gv.size(), e.grad.size());
  for (size_t i = 0; i < yv.size(); ++i) {
    EXPECT_NEAR(yv[i], e.y[i], tol * (1 + std::abs(e.y[i]))) << "y " << i;
  }
  for (size_t i = 0; i < gv.size(); ++i) {
    EXPECT_NEAR(gv[i], e.grad[i], tol * (1 + std::abs(e.grad[i])))
        << "grad " << i;
  }
}

// f64: the same formulas, so equal to rounding (1e-12).
TEST(PoolTest, F64MatchesPyTorch) {
  for (const PoolExpected& e : kF64) CheckCase(DType::kF64, e, 1e-12);
}

// f32: the loops accumulate in float like PyTorch's CPU kernels; allowed
// one part in 2^22 (2 ulps near 1).
TEST(PoolTest, F32MatchesPyTorch) {
  for (const PoolExpected& e : kF32) CheckCase(DType::kF32, e, 2.4e-7);
}

// ResNet's stem pool: [1, 1, 112, 112] -> [1, 1, 56, 56] with padding, and
// -inf padding never wins even when every value is negative.
TEST(PoolTest, MaxPoolPaddingIsMinusInfinity) {
  Tensor x = Tensor::Full({1, 1, 4, 4}, -5.0).value();
  Tensor y =
      MaxPool2d(x, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}})
          .value();
  EXPECT_EQ(y.shape(), Shape({1, 1, 2, 2}));
  EXPECT_THAT(Values(y), ::testing::Each(-5.0));
  EXPECT_EQ(MaxPool2d(Tensor::Zeros({1, 1, 112, 112}).value(),
                      {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}})
                .value()
                .shape(),
            Shape({1, 1, 56, 56}));
}

// AvgPool2d's divisor with and without the padding; zero-padded windows.
TEST(PoolTest, AvgPoolDivisor) {
  Tensor x = Tensor::Full({1, 1, 2, 2}, 1.0, DType::kF64).value();
  // Every 3x3 window over the padded 4x4 input holds the 4 ones: divided by
  // the 9 positions, or by the 4 inside the input.
  AvgPool2dOptions o{.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}};
  EXPECT_THAT(Values(AvgPool2d(x, o).value()),
              ::testing::ElementsAre(4 / 9.0, 4 / 9.0, 4 / 9.0, 4 / 9.0));
  o.count_include_pad = false;
  EXPECT_THAT(Values(AvgPool2d(x, o).value()), ::testing::Each(1.0));
}

TEST(PoolTest, GradCheck) {
  std::mt19937 rng(7);
  const Tensor x = RandomTensor({2, 2, 5, 7}, rng, -2, 2);
  using In = std::vector<Tensor>;
  const std::vector<std::function<absl::StatusOr<Tensor>(const In&)>> ops = {
      [](const In& v) {
        return MaxPool2d(
            v[0], {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
      },
      [](const In& v) {
        return MaxPool2d(
            v[0], {.kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 0}});
      },
      [](const In& v) {
        return AvgPool2d(
            v[0], {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
      },
      [](const In& v) {
        return AvgPool2d(v[0], {.kernel = {3, 2},
                                .stride = {2, 3},
                                .padding = {1, 1},
                                .count_include_pad = false,
                                .ceil_mode = true});
      },
      [](const In& v) {
        return AdaptiveAvgPool2d(v[0], {1, 1});
      },
      [](const In& v) {
        return AdaptiveAvgPool2d(v[0], {3, 4});
      },
      [](const In& v) {
        return AdaptiveAvgPool2d(v[0], {7, 9});
      },  // overlap
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    SCOPED_TRACE(i);
    absl::Status s = GradCheck(ops[i], {x});
    EXPECT_TRUE(s.ok()) << s;
  }
}

void ExpectInvalid(const absl::StatusOr<Tensor>& r, const std::string& phrase) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr(phrase));
}

TEST(PoolTest, BadArgumentsAreNamed) {
  const Tensor x = Tensor::Zeros({1, 1, 5, 5}).value();
  ExpectInvalid(MaxPool2d(x, {.kernel = {3, 3}, .padding = {2, 2}}),
                "pad should be at most half of kernel size");
  ExpectInvalid(AvgPool2d(x, {.kernel = {3, 3}, .padding = {0, 2}}),
                "padding (0, 2)");
  ExpectInvalid(MaxPool2d(x, {.kernel = {3, 3}, .padding = {-1, 0}}),
                "padding (-1, 0) must be >= 0");
  ExpectInvalid(MaxPool2d(x, {.kernel = {0, 3}}), "kernel must be >= 1");
  ExpectInvalid(AvgPool2d(x, {.kernel = {2, 2}, .stride = {-1, 1}}),
                "stride must be >= 1");
  ExpectInvalid(MaxPool2d(x, {.kernel = {6, 6}}), "output size (0, 0)");
  ExpectInvalid(AvgPool2d(Tensor::Zeros({5, 5}).value()),
                "x must be [N, C, H, W]");
  ExpectInvalid(AdaptiveAvgPool2d(x, {-1, 1}), "output_size must be >= 0");
  ExpectInvalid(AdaptiveAvgPool2d(Tensor::Zeros({1, 1, 0, 3}).value(), {1, 1}),
                "H and W >= 1");
  const Tensor ints = Tensor::Zeros({1, 1, 4, 4}, DType::kI64).value();
  EXPECT_FALSE(MaxPool2d(ints).ok());
  EXPECT_FALSE(AvgPool2d(ints).ok());
  EXPECT_FALSE(AdaptiveAvgPool2d(ints, {1, 1}).ok());
}

// An empty output size (PyTorch allows it) and empty batches.
TEST(PoolTest, EmptySizes) {
  EXPECT_EQ(AdaptiveAvgPool2d(Tensor::Zeros({1, 2, 3, 3}).value(), {0, 2})
                .value()
                .shape(),
            Shape({1, 2, 0, 2}));
  EXPECT_EQ(AvgPool2d(Tensor::Zeros({0, 2, 4, 4}).value()).value().shape(),
            Shape({0, 2, 2, 2}));
}

}  // namespace
}  // namespace tandem
