// Every CUDA op against its CPU twin, forward and backward, on random
// inputs, in f32, f64, f16 and bf16 (f16/bf16 against the CPU's f32 on the
// same rounded inputs); plus copies, casts, in-place ops and the errors.
// Skips without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tensor/cuda/cuda.h"
#include "tensor/cuda/test_util.h"
#include "tensor/generator.h"
#include "tensor/ops.h"
#include "tensor/ops/batch_norm.h"
#include "tensor/tensor.h"

namespace tandem {
namespace {

using ::tandem::cuda_test::ExpectBitwiseEqual;
using ::tandem::cuda_test::ExpectClose;
using ::tandem::cuda_test::kGpu;
using ::tandem::cuda_test::Random;
using ::tandem::cuda_test::ToCuda;
using ::tandem::cuda_test::ToHost;
using ::tandem::cuda_test::Values;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Relative tolerance per dtype: f64 and f32 are limited by summation order
// (cuBLAS vs OpenBLAS, tree vs sequential sums) and CUDA's transcendentals;
// f16/bf16 by rounding every stored intermediate.
double Rtol(DType d) {
  switch (d) {
    case DType::kF64:
      return 1e-10;
    case DType::kF32:
      return 2e-5;
    case DType::kF16:
      return 1e-2;
    default:
      return 4e-2;
  }
}

// The CPU computes f16/bf16 cases in f32.
DType RefType(DType d) { return d == DType::kF64 ? DType::kF64 : DType::kF32; }

struct Arg {
  Tensor master;  // f64 values (or i64 labels), CPU
  bool grad = true;
};

Arg F(Shape shape, uint32_t seed, double lo = -2, double hi = 2,
      bool grad = true) {
  return {Random(shape, DType::kF64, seed, lo, hi), grad};
}
Arg Labels(std::vector<int64_t> v) {
  return {Tensor::FromVector(v).value(), false};
}

using OpFn = std::function<absl::StatusOr<Tensor>(const std::vector<Tensor>&)>;

// Runs `op` on CPU and CUDA copies of `args` (floating ones rounded to
// `dtype` first), compares outputs, then gradients of Sum(y * w) for random
// w; twice, so the second pass accumulates into existing gradients.
void CheckOp(const std::string& what, DType dtype, const std::vector<Arg>& args,
             const OpFn& op) {
  SCOPED_TRACE(what + " in " + DTypeName(dtype));
  std::vector<Tensor> ref, dev;
  for (const Arg& a : args) {
    if (!IsFloatingPoint(a.master.dtype())) {
      ref.push_back(a.master);
      dev.push_back(ToCuda(a.master));
      continue;
    }
    Tensor rounded = a.master.To(dtype).value();
    Tensor r = rounded.To(RefType(dtype)).value();
    Tensor d = ToCuda(rounded);
    if (a.grad) {
      ASSERT_TRUE(r.set_requires_grad(true).ok());
      ASSERT_TRUE(d.set_requires_grad(true).ok());
    }
    ref.push_back(r);
    dev.push_back(d);
  }
  Tensor w_master;
  for (int pass = 0; pass < 2; ++pass) {
    absl::StatusOr<Tensor> yr = op(ref);
    ASSERT_TRUE(yr.ok()) << yr.status();
    absl::StatusOr<Tensor> yd = op(dev);
    ASSERT_TRUE(yd.ok()) << yd.status();
    ASSERT_EQ(yd->device(), kGpu);
    ASSERT_EQ(yd->dtype(), IsFloatingPoint(yr->dtype()) ? dtype : yr->dtype());
    ExpectClose(*yd, *yr, Rtol(dtype), what + " forward");
    if (!yr->requires_grad()) return;
    ASSERT_TRUE(yd->requires_grad());
    if (!w_master.defined()) w_master = Random(yr->shape(), DType::kF64, 99);
    Tensor wr = w_master.To(dtype).value().To(RefType(dtype)).value();
    Tensor wd = ToCuda(w_master.To(dtype).value());
    Tensor loss_r = Sum(Mul(*yr, wr).value()).value();
    Tensor loss_d = Sum(Mul(*yd, wd).value()).value();
    ASSERT_TRUE(loss_r.Backward().ok());
    absl::Status s = loss_d.Backward();
    ASSERT_TRUE(s.ok()) << s;
    for (size_t i = 0; i < args.size(); ++i) {
      if (!args[i].grad || !IsFloatingPoint(args[i].master.dtype())) continue;
      ASSERT_TRUE(dev[i].has_grad()) << "input " << i;
      ASSERT_EQ(dev[i].grad().device(), kGpu);
      ExpectClose(dev[i].grad(), ref[i].grad(), Rtol(dtype),
                  what + " grad of input " + std::to_string(i) + " pass " +
                      std::to_string(pass));
    }
  }
}

class OpsCudaTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { TANDEM_REQUIRE_CUDA(); }
  DType dt() const { return GetParam(); }
};

TEST_P(OpsCudaTest, MatMul) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      CheckOp("MatMul", dt(),
              {F(ta ? Shape{4, 3} : Shape{3, 4}, 1),
               F(tb ? Shape{5, 4} : Shape{4, 5}, 2)},
              [ta, tb](const std::vector<Tensor>& in) {
                return MatMul(in[0], in[1], ta, tb);
              });
    }
  }
  // One side without grad; a larger product.
  CheckOp("MatMul", dt(), {F({33, 70}, 3), F({70, 17}, 4, -2, 2, false)},
          [](const std::vector<Tensor>& in) { return MatMul(in[0], in[1]); });
}

TEST_P(OpsCudaTest, Linear) {
  CheckOp("Linear", dt(), {F({6, 4}, 5), F({5, 4}, 6), F({5}, 7)},
          [](const std::vector<Tensor>& in) {
            return Linear(in[0], in[1], in[2]);
          });
  CheckOp("Linear without bias", dt(), {F({6, 4}, 8), F({5, 4}, 9)},
          [](const std::vector<Tensor>& in) {
            return Linear(in[0], in[1], Tensor());
          });
  // The backward formula keeps only what it reads: a frozen layer (no dW,
  // no db), and an input without grad (no dx).
  CheckOp(
      "Linear frozen", dt(),
      {F({6, 4}, 10), F({5, 4}, 11, -2, 2, false), F({5}, 12, -2, 2, false)},
      [](const std::vector<Tensor>& in) {
        return Linear(in[0], in[1], in[2]);
      });
  CheckOp("Linear, x without grad", dt(),
          {F({6, 4}, 13, -2, 2, false), F({5, 4}, 14), F({5}, 15)},
          [](const std::vector<Tensor>& in) {
            return Linear(in[0], in[1], in[2]);
          });
}

TEST_P(OpsCudaTest, BinaryWithBroadcasting) {
  using Fn = absl::StatusOr<Tensor> (*)(const Tensor&, const Tensor&);
  const std::vector<std::pair<const char*, Fn>> ops = {
      {"Add", &Add}, {"Sub", &Sub}, {"Mul", &Mul}, {"Div", &Div}};
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 4}, {3, 4}}, {{2, 3, 4}, {3, 4}}, {{4}, {2, 4}},    {{3, 4}, {1}},
      {{3, 4}, {}},     {{1, 1}, {3, 4}},    {{2, 3, 4}, {4}},
  };
  uint32_t seed = 10;
  for (const auto& [name, fn] : ops) {
    for (const auto& [sa, sb] : shapes) {
      const std::string what =
          std::string(name) + ShapeToString(sa) + ShapeToString(sb);
      // Denominators stay away from zero.
      CheckOp(what, dt(), {F(sa, seed++), F(sb, seed++, 0.5, 2)},
              [fn](const std::vector<Tensor>& in) { return fn(in[0], in[1]); });
    }
    CheckOp(std::string(name) + " b without grad", dt(),
            {F({3, 4}, seed++), F({4}, seed++, 0.5, 2, false)},
            [fn](const std::vector<Tensor>& in) { return fn(in[0], in[1]); });
  }
}

TEST_P(OpsCudaTest, ScalarAndUnary) {
  const std::vector<std::pair<const char*, OpFn>> ops = {
      {"AddScalar", [](auto& in) { return Add(in[0], 1.5); }},
      {"SubScalar", [](auto& in) { return Sub(in[0], 0.25); }},
      {"MulScalar", [](auto& in) { return Mul(in[0], -3.0); }},
      {"DivScalar", [](auto& in) { return Div(in[0], 7.0); }},
      {"Neg", [](auto& in) { return Neg(in[0]); }},
      {"Relu", [](auto& in) { return Relu(in[0]); }},
      {"Sigmoid", [](auto& in) { return Sigmoid(in[0]); }},
      {"Tanh", [](auto& in) { return Tanh(in[0]); }},
      {"Exp", [](auto& in) { return Exp(in[0]); }},
  };
  uint32_t seed = 40;
  for (const auto& [name, fn] : ops) {
    CheckOp(name, dt(), {F({5, 7}, seed++, -4, 4)}, fn);
  }
  CheckOp("Log", dt(), {F({5, 7}, seed++, 0.1, 4)},
          [](auto& in) { return Log(in[0]); });
}

// The worked example of docs/adding_an_op.md: both forms, forward and
// GeluBackward, against the CPU kernels.
TEST_P(OpsCudaTest, Gelu) {
  CheckOp("Gelu", dt(), {F({5, 7}, 120, -4, 4)},
          [](auto& in) { return Gelu(in[0], GeluApproximation::kNone); });
  CheckOp("Gelu tanh", dt(), {F({5, 7}, 121, -4, 4)},
          [](auto& in) { return Gelu(in[0], GeluApproximation::kTanh); });
}

// ---- BatchNorm (norm): training and eval, [N, C, H, W] and [N, C],
// forward and gradients of x, weight and bias against the CPU; f16/bf16
// inputs take f32 parameters (no affine here, as CheckOp rounds every
// floating argument to the dtype).
TEST_P(OpsCudaTest, BatchNorm) {
  const bool low = dt() == DType::kF16 || dt() == DType::kBF16;
  const DType param = low ? DType::kF32 : dt();
  for (bool training : {true, false}) {
    OpFn op = [training, param](const std::vector<Tensor>& in) {
      const Device d = in[0].device();
      Tensor rm = Tensor::Full({in[0].dim(1)}, 0.25, param, d).value();
      Tensor rv = Tensor::Full({in[0].dim(1)}, 1.5, param, d).value();
      return BatchNorm(in[0], in.size() > 1 ? in[1] : Tensor(),
                       in.size() > 2 ? in[2] : Tensor(), rm, rv, training, 0.1,
                       1e-5);
    };
    const std::string what = training ? "BatchNorm train" : "BatchNorm eval";
    if (low) {
      CheckOp(what, dt(), {F({4, 3, 5, 5}, 130)}, op);
    } else {
      CheckOp(what, dt(),
              {F({4, 3, 5, 5}, 130), F({3}, 131, 0.5, 2), F({3}, 132)}, op);
    }
    CheckOp(what + " [N, C]", dt(), {F({6, 3}, 133)}, op);
  }
}

// The running statistics and SyncBatchNorm's pieces (statistics of two
// groups gathered) against the CPU.
TEST(CudaBatchNormTest, RunningStatisticsAndPiecesMatchTheCpu) {
  TANDEM_REQUIRE_CUDA();
  for (DType dtype : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(DTypeName(dtype));
    Tensor x = Random({5, 4, 3, 3}, dtype, 140);
    Tensor rm = Tensor::Zeros({4}, dtype).value();
    Tensor rv = Tensor::Ones({4}, dtype).value();
    Tensor rm_d = ToCuda(rm), rv_d = ToCuda(rv);
    for (int step = 0; step < 2; ++step) {
      ASSERT_TRUE(
          BatchNorm(x, Tensor(), Tensor(), rm, rv, true, 0.1, 1e-5).ok());
      ASSERT_TRUE(
          BatchNorm(ToCuda(x), Tensor(), Tensor(), rm_d, rv_d, true, 0.1, 1e-5)
              .ok());
    }
    ExpectClose(rm_d, rm, Rtol(dtype), "running_mean");
    ExpectClose(rv_d, rv, Rtol(dtype), "running_var");
    BatchNormStats s = BatchNormStatsOf(x).value();
    BatchNormStats s_d = BatchNormStatsOf(ToCuda(x)).value();
    ExpectClose(s_d.mean, s.mean, Rtol(dtype), "stats mean");
    ExpectClose(s_d.var, s.var, Rtol(dtype), "stats var");
    // Two groups: this batch's statistics twice, counts 45 and 45.
    Tensor means = Random({2, 4}, dtype, 141);
    Tensor vars = Random({2, 4}, dtype, 142, 0.5, 2);
    Tensor counts = Tensor::Full({2}, 45, dtype).value();
    BatchNormSaved g =
        BatchNormGatherStats(means, vars, counts, rm, rv, 0.1, 1e-5).value();
    BatchNormSaved g_d =
        BatchNormGatherStats(ToCuda(means), ToCuda(vars), ToCuda(counts), rm_d,
                             rv_d, 0.1, 1e-5)
            .value();
    ExpectClose(g_d.mean, g.mean, Rtol(dtype), "gathered mean");
    ExpectClose(g_d.invstd, g.invstd, Rtol(dtype), "gathered invstd");
    ExpectClose(rv_d, rv, Rtol(dtype), "running_var after gather");
    Tensor dy = Random({5, 4, 3, 3}, dtype, 143);
    BatchNormGradSums r = BatchNormBackwardReduce(dy, x, g.mean).value();
    BatchNormGradSums r_d =
        BatchNormBackwardReduce(ToCuda(dy), ToCuda(x), g_d.mean).value();
    ExpectClose(r_d.sum_dy, r.sum_dy, Rtol(dtype), "sum_dy");
    ExpectClose(r_d.sum_dy_xmu, r.sum_dy_xmu, Rtol(dtype), "sum_dy_xmu");
  }
}
// ---- End of BatchNorm.

// ---- LayerNorm (norm): affine over one and two trailing dims, without
// affine, forward and gradients of x, weight and bias against the CPU
// (f16/bf16 parameters are computed in f32 too).
TEST_P(OpsCudaTest, LayerNorm) {
  CheckOp("LayerNorm affine", dt(),
          {F({6, 33}, 150), F({33}, 151, 0.5, 2), F({33}, 152)},
          [](auto& in) { return LayerNorm(in[0], {33}, in[1], in[2]); });
  CheckOp("LayerNorm two dims", dt(),
          {F({2, 3, 4, 5}, 153), F({4, 5}, 154, 0.5, 2), F({4, 5}, 155)},
          [](auto& in) {
            return LayerNorm(in[0], {4, 5}, in[1], in[2]);
          });
  CheckOp("LayerNorm no affine, wide row", dt(), {F({3, 700}, 156, -3, 5)},
          [](auto& in) { return LayerNorm(in[0], {700}, Tensor(), Tensor()); });
}
// ---- End of LayerNorm.

TEST_P(OpsCudaTest, SoftmaxAlongAnyDim) {
  uint32_t seed = 60;
  for (bool log : {false, true}) {
    for (int64_t dim : {-1, 0, 1}) {
      CheckOp(std::string(log ? "LogSoftmax" : "Softmax") + " dim " +
                  std::to_string(dim),
              dt(), {F({3, 4, 5}, seed++, -3, 3)}, [log, dim](auto& in) {
                return log ? LogSoftmax(in[0], dim) : Softmax(in[0], dim);
              });
    }
  }
  CheckOp("Softmax wide", dt(), {F({4, 300}, seed++, -3, 3)},
          [](auto& in) { return Softmax(in[0]); });
}

TEST_P(OpsCudaTest, Reductions) {
  CheckOp("Sum", dt(), {F({3, 4, 5}, 70)}, [](auto& in) { return Sum(in[0]); });
  CheckOp("Mean", dt(), {F({3, 4, 5}, 71)},
          [](auto& in) { return Mean(in[0]); });
  CheckOp("Sum large", dt(), {F({100000}, 72, 0, 1)},
          [](auto& in) { return Sum(in[0]); });
  CheckOp("Mean large", dt(), {F({100000}, 77, 0, 1)},
          [](auto& in) { return Mean(in[0]); });
  for (int64_t dim : {0, 1, -1}) {
    for (bool keep : {false, true}) {
      const std::string suffix =
          " dim " + std::to_string(dim) + (keep ? " keepdim" : "");
      CheckOp("Sum" + suffix, dt(), {F({3, 4, 5}, 73)},
              [dim, keep](auto& in) { return Sum(in[0], dim, keep); });
      CheckOp("Mean" + suffix, dt(), {F({3, 4, 5}, 74)},
              [dim, keep](auto& in) { return Mean(in[0], dim, keep); });
    }
  }
  // Empty inputs: a sum of nothing is 0, a mean NaN.
  CheckOp("Sum of nothing", dt(), {F({0, 3}, 75)},
          [](auto& in) { return Sum(in[0]); });
  CheckOp("Mean of nothing", dt(), {F({0, 3}, 76, -2, 2, false)},
          [](auto& in) { return Mean(in[0]); });
}

TEST_P(OpsCudaTest, Conv2d) {
  struct Case {
    const char* what;
    Shape x, w;
    Conv2dOptions o;
    bool bias;
    bool x_grad = true;
  };
  const std::vector<Case> cases = {
      {"3x3 pad 1", {2, 3, 7, 6}, {4, 3, 3, 3}, {{1, 1}, {1, 1}}, true},
      {"3x3 stride (2, 1) pad (0, 1)",
       {3, 2, 8, 7},
       {5, 2, 3, 3},
       {{2, 1}, {0, 1}},
       true},
      {"2x3 stride 2 no bias",
       {2, 3, 6, 9},
       {4, 3, 2, 3},
       {{2, 2}, {0, 0}},
       false},
      {"pointwise", {3, 6, 5, 4}, {4, 6, 1, 1}, {{1, 1}, {0, 0}}, true},
      // A first layer: x needs no gradient, so Conv2dBackward gets no dx.
      {"3x3 pad 1, x without grad",
       {2, 3, 7, 6},
       {4, 3, 3, 3},
       {{1, 1}, {1, 1}},
       true,
       false},
  };
  uint32_t seed = 80;
  for (const Case& c : cases) {
    std::vector<Arg> args = {F(c.x, seed++, -2, 2, c.x_grad),
                             F(c.w, seed++, -0.5, 0.5)};
    if (c.bias) args.push_back(F({c.w[0]}, seed++));
    const Conv2dOptions o = c.o;
    const bool bias = c.bias;
    CheckOp(std::string("Conv2d ") + c.what, dt(), args, [o, bias](auto& in) {
      return Conv2d(in[0], in[1], bias ? in[2] : Tensor(), o);
    });
  }
}

TEST_P(OpsCudaTest, MaxPool2d) {
  CheckOp("MaxPool2d 2x2", dt(), {F({2, 3, 6, 6}, 90)},
          [](auto& in) { return MaxPool2d(in[0]); });
  // Overlapping windows: an input can win several of them.
  CheckOp("MaxPool2d 3x3 stride 2", dt(), {F({2, 2, 7, 7}, 91)}, [](auto& in) {
    return MaxPool2d(in[0], {.kernel = {3, 3}, .stride = {2, 2}});
  });
  CheckOp("MaxPool2d 2x3 stride (1, 2)", dt(), {F({1, 2, 5, 8}, 92)},
          [](auto& in) {
            return MaxPool2d(in[0], {.kernel = {2, 3}, .stride = {1, 2}});
          });
}

// Pooling with padding, averages and adaptive windows (tensor/ops/pool.cc):
// the CUDA kernels against the CPU's, forward and backward.
TEST_P(OpsCudaTest, PoolingPaddedAverageAdaptive) {
  CheckOp("MaxPool2d 3x3 stride 2 padding 1", dt(), {F({2, 3, 9, 8}, 93)},
          [](auto& in) {
            return MaxPool2d(
                in[0], {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
          });
  CheckOp("AvgPool2d 3x3 stride 2 padding 1", dt(), {F({2, 3, 9, 8}, 94)},
          [](auto& in) {
            return AvgPool2d(
                in[0], {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
          });
  CheckOp("AvgPool2d 3x2 ceil, padding excluded", dt(), {F({1, 2, 7, 6}, 95)},
          [](auto& in) {
            return AvgPool2d(in[0], {.kernel = {3, 2},
                                     .stride = {2, 3},
                                     .padding = {1, 1},
                                     .count_include_pad = false,
                                     .ceil_mode = true});
          });
  CheckOp("AdaptiveAvgPool2d (1, 1)", dt(), {F({4, 5, 7, 7}, 96)},
          [](auto& in) {
            return AdaptiveAvgPool2d(in[0], {1, 1});
          });
  CheckOp("AdaptiveAvgPool2d (3, 4) overlapping", dt(), {F({2, 2, 5, 7}, 97)},
          [](auto& in) {
            return AdaptiveAvgPool2d(in[0], {3, 4});
          });
}

TEST_P(OpsCudaTest, Losses) {
  CheckOp("CrossEntropy", dt(),
          {F({5, 4}, 100, -3, 3), Labels({0, 3, 1, 2, 3})},
          [](auto& in) { return CrossEntropy(in[0], in[1]); });
  CheckOp("CrossEntropy wide", dt(),
          {F({3, 1000}, 101, -3, 3), Labels({999, 0, 500})},
          [](auto& in) { return CrossEntropy(in[0], in[1]); });
  CheckOp("Mse", dt(), {F({3, 4}, 102), F({3, 4}, 103)},
          [](auto& in) { return Mse(in[0], in[1]); });
}

TEST_P(OpsCudaTest, ViewsAndCopiesCarryGradients) {
  CheckOp("View", dt(), {F({24}, 110)}, [](auto& in) {
    return in[0].View(2, {4, 5});
  });
  CheckOp("Flatten", dt(), {F({2, 3, 4}, 111)},
          [](auto& in) { return Flatten(in[0], 1); });
  CheckOp("Clone", dt(), {F({2, 3}, 112)},
          [](auto& in) { return in[0].Clone(); });
  // A small MLP: Linear -> Relu -> Linear -> CrossEntropy.
  CheckOp("MLP", dt(),
          {F({8, 4}, 113), F({16, 4}, 114, -0.5, 0.5), F({16}, 115),
           F({3, 16}, 116, -0.5, 0.5), F({3}, 117),
           Labels({0, 1, 2, 1, 0, 2, 2, 1})},
          [](auto& in) -> absl::StatusOr<Tensor> {
            absl::StatusOr<Tensor> h = Linear(in[0], in[1], in[2]);
            if (!h.ok()) return h;
            h = Relu(*h);
            if (!h.ok()) return h;
            h = Linear(*h, in[3], in[4]);
            if (!h.ok()) return h;
            return CrossEntropy(*h, in[5]);
          });
}

TEST_P(OpsCudaTest, ArgmaxIsExact) {
  for (int64_t dim : {0, 1, -1}) {
    Tensor x = Random({4, 5, 6}, dt(), 120 + dim);
    Tensor r = Argmax(x.To(RefType(dt())).value(), dim).value();
    Tensor d = Argmax(ToCuda(x), dim).value();
    EXPECT_EQ(d.dtype(), DType::kI64);
    EXPECT_EQ(Values(d), Values(r)) << "dim " << dim;
  }
}

TEST_P(OpsCudaTest, InPlaceOpsMatchTheCpu) {
  Tensor a = Random({7, 3}, dt(), 130);
  Tensor b = Random({21}, dt(), 131);
  Tensor ra = a.To(RefType(dt())).value();
  Tensor rb = b.To(RefType(dt())).value();
  Tensor da = ToCuda(a);
  Tensor db = ToCuda(b);
  ASSERT_TRUE(AddInPlace(da, db, 0.5).ok());
  ASSERT_TRUE(AddInPlace(ra, rb, 0.5).ok());
  ASSERT_TRUE(AddInPlace(da, db).ok());
  ASSERT_TRUE(AddInPlace(ra, rb).ok());
  ASSERT_TRUE(ScaleInPlace(da, -1.25).ok());
  ASSERT_TRUE(ScaleInPlace(ra, -1.25).ok());
  ExpectClose(da, ra, Rtol(dt()), "AddInPlace/ScaleInPlace");
  ASSERT_TRUE(FillInPlace(da, 0.1).ok());
  ExpectBitwiseEqual(da, Tensor::Full({7, 3}, 0.1, dt()).value(), "Fill");
  ExpectBitwiseEqual(Tensor::Ones({2, 2}, dt(), kGpu).value(),
                     Tensor::Ones({2, 2}, dt()).value(), "Ones");
  ExpectBitwiseEqual(Tensor::Zeros({0}, dt(), kGpu).value(),
                     Tensor::Zeros({0}, dt()).value(), "Zeros of nothing");
}

// ---- GPT ops (helper gptops): Embedding, Dropout, CrossEntropy options.
TEST_P(OpsCudaTest, Embedding) {
  // Repeated rows: the backward adds several rows of g into one row.
  CheckOp("Embedding i64", dt(), {Labels({3, 0, 3, 5, 1, 3}), F({6, 5}, 160)},
          [](auto& in) { return Embedding(in[0], in[1]); });
  CheckOp("Embedding i32 [2, 3]", dt(),
          {{Tensor::FromVector(std::vector<int32_t>{4, 4, 0, 2, 1, 4}, {2, 3})
                .value(),
            false},
           F({5, 7}, 161)},
          [](auto& in) { return Embedding(in[0], in[1]); });
}

// The mask is drawn on the host from the generator: a fresh Generator(7)
// on each side gives the same mask, so CUDA equals the CPU.
TEST_P(OpsCudaTest, Dropout) {
  CheckOp("Dropout", dt(), {F({6, 9}, 162)}, [](auto& in) {
    Generator gen(7);
    return Dropout(in[0], 0.35, true, gen);
  });
}

TEST_P(OpsCudaTest, CrossEntropyIgnoreIndexAndSum) {
  CheckOp("CrossEntropy ignore -100", dt(),
          {F({6, 5}, 163, -3, 3), Labels({1, -100, 4, 0, -100, 2})},
          [](auto& in) { return CrossEntropy(in[0], in[1]); });
  CheckOp("CrossEntropy ignore 3, sum", dt(),
          {F({6, 5}, 164, -3, 3), Labels({3, 0, 3, 4, 1, 3})}, [](auto& in) {
            return CrossEntropy(in[0], in[1], {3, LossReduction::kSum});
          });
}

TEST(CudaGptOpsTest, CrossEntropyAllIgnoredIsNan) {
  TANDEM_REQUIRE_CUDA();
  Tensor logits = Tensor::Zeros({3, 4}, DType::kF32, kGpu).value();
  ASSERT_TRUE(logits.set_requires_grad(true).ok());
  Tensor labels = ToCuda(Tensor::Full({3}, -100, DType::kI64).value());
  Tensor loss = CrossEntropy(logits, labels).value();
  EXPECT_TRUE(std::isnan(ToHost(loss).ToVector<float>().value()[0]));
  ASSERT_TRUE(loss.Backward().ok());
  for (float v : ToHost(logits.grad()).ToVector<float>().value()) {
    EXPECT_EQ(v, 0.0f);
  }
}

// Causal and full, with and without attention dropout (the mask is drawn
// on the host from a fresh Generator(11) on each side).
TEST_P(OpsCudaTest, ScaledDotProductAttention) {
  for (bool causal : {true, false}) {
    for (double p : {0.0, 0.2}) {
      CheckOp(
          std::string("ScaledDotProductAttention causal ") +
              (causal ? "1" : "0") + " p " + std::to_string(p),
          dt(),
          {F({2, 3, 7, 4}, 165), F({2, 3, 7, 4}, 166), F({2, 3, 7, 4}, 167)},
          [causal, p](auto& in) {
            Generator gen(11);
            return ScaledDotProductAttention(in[0], in[1], in[2], causal, p,
                                             &gen);
          });
    }
  }
}

TEST(CudaGptOpsTest, EmbeddingIndexOutOfRangeNamedLikeTheCpu) {
  TANDEM_REQUIRE_CUDA();
  Tensor w = Tensor::Zeros({4, 2}, DType::kF32, kGpu).value();
  absl::StatusOr<Tensor> r = Embedding(
      ToCuda(Tensor::FromVector(std::vector<int64_t>{1, 9}).value()), w);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("indices[1] = 9 is not in [0, 4)"));
}
// ---- end GPT ops.

// ---- Permute (gpt): GPT's head moves and others, forward and gradient
// (the inverse permutation) against the CPU.
TEST_P(OpsCudaTest, Permute) {
  CheckOp("Permute heads [B, T, H, hd] -> [B, H, T, hd]", dt(),
          {F({2, 5, 3, 4}, 170)}, [](auto& in) {
            return Permute(in[0], {0, 2, 1, 3});
          });
  CheckOp("Permute rank 5, inner dim moved", dt(), {F({2, 3, 1, 4, 5}, 171)},
          [](auto& in) {
            return Permute(in[0], {4, 2, 0, 3, 1});
          });
  CheckOp("Permute transpose", dt(), {F({7, 9}, 172)}, [](auto& in) {
    return Permute(in[0], {1, 0});
  });
}

// Every dtype moves as bytes: the CUDA result is the CPU's bit for bit, for
// arbitrary bit patterns (NaN payloads included), ranks 0 to 7, size-1 and
// merged dims, and empty tensors.
TEST(CudaPermuteTest, EveryDTypeBitForBitLikeTheCpu) {
  TANDEM_REQUIRE_CUDA();
  struct Case {
    Shape shape;
    std::vector<int64_t> dims;
  };
  const std::vector<Case> cases = {
      {{}, {}},
      {{6}, {0}},
      {{3, 5}, {1, 0}},
      {{2, 3, 4, 5}, {0, 2, 1, 3}},
      {{2, 3, 4, 5}, {3, 2, 1, 0}},
      {{2, 1, 3, 1, 4}, {4, 1, 0, 3, 2}},
      {{2, 3, 2, 3, 2, 3, 2}, {6, 0, 5, 1, 4, 2, 3}},
      {{2, 0, 3}, {2, 0, 1}},
  };
  uint32_t state = 12345;
  for (DType dt : kEveryDType) {
    for (const Case& c : cases) {
      int64_t numel = 1;
      for (int64_t d : c.shape) numel *= d;
      std::vector<uint8_t> bytes(static_cast<size_t>(numel * DTypeSize(dt)));
      for (uint8_t& b : bytes) {
        state = state * 1664525u + 1013904223u;
        b = static_cast<uint8_t>(state >> 24);
      }
      Tensor x = Tensor::FromBuffer(bytes.data(), numel, dt, c.shape).value();
      Tensor want = Permute(x, c.dims).value();
      absl::StatusOr<Tensor> got = Permute(ToCuda(x), c.dims);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->device(), kGpu);
      ExpectBitwiseEqual(*got, want,
                         std::string(DTypeName(dt)) + " rank " +
                             std::to_string(c.shape.size()));
    }
  }
}

// More unmergeable dims than the kernel's plan holds: a status that names
// the limit and what to do, never a wrong result.
TEST(CudaPermuteTest, TooManyUnmergeableDimsIsAStatus) {
  TANDEM_REQUIRE_CUDA();
  Shape shape(26, 2);
  std::vector<int64_t> reversed(26);
  for (int64_t k = 0; k < 26; ++k) reversed[k] = 25 - k;
  Tensor x = Tensor::Zeros(shape, DType::kU8, kGpu).value();
  absl::StatusOr<Tensor> r = Permute(x, reversed);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(r.status().message(), HasSubstr("at most 25"));
  // The same rank with mergeable dims (the identity) runs.
  std::vector<int64_t> identity(26);
  for (int64_t k = 0; k < 26; ++k) identity[k] = k;
  EXPECT_TRUE(Permute(x, identity).ok());
}
// ---- End of Permute.

INSTANTIATE_TEST_SUITE_P(AllFloats, OpsCudaTest,
                         ::testing::Values(DType::kF32, DType::kF64,
                                           DType::kF16, DType::kBF16),
                         [](const auto& info) {
                           return std::string(DTypeName(info.param));
                         });

// ---- Copies, casts, errors (dtype-independent).

TEST(CudaCopyTest, RoundTripsAreExact) {
  TANDEM_REQUIRE_CUDA();
  for (DType dt : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16,
                   DType::kI64, DType::kI32}) {
    Tensor x = Random({3, 17}, DType::kF64, 140, -1000, 1000).To(dt).value();
    Tensor d = ToCuda(x);
    EXPECT_EQ(d.device(), kGpu);
    ExpectBitwiseEqual(ToHost(d), x,
                       std::string("round trip ") + DTypeName(dt));
    // Device to device (Clone) and CopyFrom in both directions.
    ExpectBitwiseEqual(d.Clone().value(), x, "Clone on the device");
    Tensor back = Tensor::Zeros({3, 17}, dt).value();
    ASSERT_TRUE(back.CopyFrom(d).ok());
    ExpectBitwiseEqual(back, x, "CopyFrom device");
    Tensor d2 = Tensor::Zeros({3, 17}, dt, kGpu).value();
    ASSERT_TRUE(d2.CopyFrom(x).ok());
    ExpectBitwiseEqual(d2, x, "CopyFrom host");
    // A view at an offset copies only its elements.
    Tensor view = d.View(5, {2, 3}).value();
    ExpectBitwiseEqual(ToHost(view), x.View(5, {2, 3}).value(), "view");
  }
  Tensor one = Tensor::Full({}, 2.75, DType::kF32, kGpu).value();
  EXPECT_EQ(one.Item().value(), 2.75);
}

TEST(CudaCopyTest, CastsMatchTheCpuBitForBit) {
  TANDEM_REQUIRE_CUDA();
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> special = {
      0.0,    -0.0,    1.0 / 3,    -2.5, 65504,        65519.99,
      65520,  1e-8,    6e-8,       3e38, -3e38,        1e300,
      inf,    -inf,    nan,        -nan, 2147483647.5, -2147483649.0,
      9.3e18, -9.3e18, 1.00390625, 0.5,  -0.5};
  Tensor base = Tensor::FromVector(special).value();
  const std::vector<DType> all = {DType::kF32,  DType::kF64, DType::kF16,
                                  DType::kBF16, DType::kI64, DType::kI32};
  for (DType from : all) {
    Tensor src = base.To(from).value();
    Tensor dsrc = ToCuda(src);
    for (DType to : all) {
      ExpectBitwiseEqual(dsrc.To(to).value(), src.To(to).value(),
                         std::string(DTypeName(from)) + " -> " + DTypeName(to));
    }
  }
}

TEST(CudaErrorTest, ArgumentErrorsAreStatuses) {
  TANDEM_REQUIRE_CUDA();
  Tensor d = Tensor::Ones({2, 3}, DType::kF32, kGpu).value();
  Tensor h = Tensor::Ones({2, 3}).value();
  absl::StatusOr<Tensor> mixed = Add(d, h);
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mixed.status().message(), HasSubstr("cpu"));
  EXPECT_THAT(mixed.status().message(), HasSubstr("cuda:0"));
  absl::StatusOr<Tensor> bad_shape =
      Add(d, Tensor::Ones({4}, DType::kF32, kGpu).value());
  ASSERT_FALSE(bad_shape.ok());
  EXPECT_THAT(bad_shape.status().message(), HasSubstr("not broadcastable"));
  Tensor ints = Tensor::Ones({2, 3}, DType::kI64, kGpu).value();
  EXPECT_FALSE(Relu(ints).ok());
  EXPECT_FALSE(MatMul(d, d).ok());  // inner dims differ
  // A label out of range: found on the device, reported like the CPU.
  Tensor logits = Tensor::Zeros({3, 4}, DType::kF32, kGpu).value();
  Tensor labels =
      ToCuda(Tensor::FromVector(std::vector<int64_t>{1, 7, -1}).value());
  absl::StatusOr<Tensor> ce = CrossEntropy(logits, labels);
  ASSERT_FALSE(ce.ok());
  EXPECT_EQ(ce.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ce.status().message(), HasSubstr("label at index 1 is 7"));
  // A device that does not exist.
  const int count = cuda::DeviceCount();
  absl::StatusOr<Tensor> missing =
      Tensor::Zeros({2}, DType::kF32, Device::CUDA(count));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("does not exist"));
}

TEST(CudaDeterminismTest, SameInputsSameBits) {
  TANDEM_REQUIRE_CUDA();
  Tensor x = ToCuda(Random({2, 3, 9, 9}, DType::kF32, 150));
  Tensor w = ToCuda(Random({4, 3, 3, 3}, DType::kF32, 151));
  ASSERT_TRUE(x.set_requires_grad(true).ok());
  ASSERT_TRUE(w.set_requires_grad(true).ok());
  std::vector<Tensor> first;
  for (int run = 0; run < 2; ++run) {
    x.ClearGrad();
    w.ClearGrad();
    Tensor y = Conv2d(x, w, Tensor(), {.padding = {1, 1}}).value();
    Tensor loss = Mean(MaxPool2d(y).value()).value();
    ASSERT_TRUE(loss.Backward().ok());
    std::vector<Tensor> got = {ToHost(loss), ToHost(x.grad()),
                               ToHost(w.grad())};
    if (run == 0) {
      first = got;
    } else {
      for (size_t i = 0; i < got.size(); ++i) {
        ExpectBitwiseEqual(got[i], first[i], "run-to-run " + std::to_string(i));
      }
    }
  }
}

}  // namespace
}  // namespace tandem
