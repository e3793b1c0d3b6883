// Forward values and error messages of tensor/ops.h. Gradients are checked
// against finite differences in gradcheck_test.cc.
#include "tensor/ops.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "tensor/tensor.h"

namespace tandem {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

Tensor F32(std::vector<float> v, Shape shape) {
  return Tensor::FromVector(v, std::move(shape)).value();
}
Tensor F64(std::vector<double> v, Shape shape) {
  return Tensor::FromVector(v, std::move(shape)).value();
}
std::vector<float> V(const absl::StatusOr<Tensor>& t) {
  return t.value().ToVector<float>().value();
}
std::vector<double> V64(const absl::StatusOr<Tensor>& t) {
  return t.value().ToVector<double>().value();
}
Tensor Random64(Shape shape, std::mt19937& rng) {
  Tensor t = Tensor::Empty(shape, DType::kF64).value();
  std::uniform_real_distribution<double> d(-2, 2);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = d(rng);
  return t;
}
// Asserts `s` failed and its message has every substring.
void ExpectError(const absl::Status& s, std::vector<std::string> parts) {
  ASSERT_FALSE(s.ok());
  for (const auto& p : parts) EXPECT_THAT(s.message(), HasSubstr(p));
}

TEST(MatMulTest, Values) {
  Tensor a = F32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = F32({7, 8, 9, 10, 11, 12}, {3, 2});
  EXPECT_THAT(V(MatMul(a, b)), ElementsAre(58, 64, 139, 154));
  // a^T [3,2] · a [2,3]
  EXPECT_THAT(V(MatMul(a, a, true, false)),
              ElementsAre(17, 22, 27, 22, 29, 36, 27, 36, 45));
  // a · a^T
  EXPECT_THAT(V(MatMul(a, a, false, true)), ElementsAre(14, 32, 32, 77));
  // b^T · a^T = (a b)^T
  EXPECT_THAT(V(MatMul(b, a, true, true)), ElementsAre(58, 139, 64, 154));
}

TEST(MatMulTest, EmptyDimensions) {
  Tensor a = Tensor::Zeros({2, 0}).value();
  Tensor b = Tensor::Zeros({0, 3}).value();
  EXPECT_THAT(V(MatMul(a, b)), ElementsAre(0, 0, 0, 0, 0, 0));
  EXPECT_EQ(MatMul(b, Tensor::Zeros({3, 0}).value()).value().shape(),
            (Shape{0, 0}));
}

TEST(MatMulTest, Errors) {
  ExpectError(
      MatMul(Tensor::Zeros({2, 3}).value(), Tensor::Zeros({4, 2}).value())
          .status(),
      {"f32[2, 3]", "f32[4, 2]", "3 columns", "4 rows"});
  ExpectError(MatMul(Tensor::Zeros({2, 3}).value(),
                     Tensor::Zeros({3, 2}, DType::kF64).value())
                  .status(),
              {"dtype mismatch", "f32[2, 3]", "f64[3, 2]"});
  ExpectError(MatMul(Tensor::Zeros({3}).value(), Tensor::Zeros({3, 2}).value())
                  .status(),
              {"2-d", "f32[3]"});
  ExpectError(MatMul(Tensor::Zeros({2, 2}, DType::kI64).value(),
                     Tensor::Zeros({2, 2}, DType::kI64).value())
                  .status(),
              {"i64[2, 2]", "f32 and f64"});
  ExpectError(MatMul(Tensor(), Tensor::Zeros({2, 2}).value()).status(),
              {"undefined"});
}

TEST(LinearTest, MatchesMatMulPlusBias) {
  std::mt19937 rng(1);
  Tensor x = Random64({5, 4}, rng), w = Random64({3, 4}, rng),
         b = Random64({3}, rng);
  std::vector<double> y = V64(Linear(x, w, b));
  std::vector<double> ref = V64(Add(MatMul(x, w, false, true).value(), b));
  EXPECT_THAT(y, Pointwise(DoubleNear(1e-12), ref));
  EXPECT_THAT(V64(Linear(x, w, Tensor())),
              Pointwise(DoubleNear(1e-12), V64(MatMul(x, w, false, true))));
}

TEST(LinearTest, BothForwardLayoutsAroundTheBatchThreshold) {
  // In f32, up to 256 rows Linear computes y^T = W x^T and transposes it;
  // above, and always in f64, it computes x W^T directly (matmul.cc).
  // Every path must give the product plus bias, with and without bias, on
  // shapes whose sides are not tile-sized: f64 against MatMul + Add, f32
  // against the f64 result of the same (f32-representable) inputs.
  std::mt19937 rng(7);
  for (int64_t batch : {1, 31, 33, 256, 257}) {
    Tensor x = Random64({batch, 37}, rng), w = Random64({45, 37}, rng),
           b = Random64({45}, rng);
    x = x.To(DType::kF32).value().To(DType::kF64).value();
    w = w.To(DType::kF32).value().To(DType::kF64).value();
    b = b.To(DType::kF32).value().To(DType::kF64).value();
    const std::vector<double> ref =
        V64(Add(MatMul(x, w, false, true).value(), b));
    const std::vector<double> ref_no_bias = V64(MatMul(x, w, false, true));
    EXPECT_THAT(V64(Linear(x, w, b)), Pointwise(DoubleNear(1e-12), ref))
        << "f64, batch " << batch;
    EXPECT_THAT(V64(Linear(x, w, Tensor())),
                Pointwise(DoubleNear(1e-12), ref_no_bias))
        << "f64, batch " << batch;
    const Tensor x32 = x.To(DType::kF32).value(),
                 w32 = w.To(DType::kF32).value(),
                 b32 = b.To(DType::kF32).value();
    EXPECT_THAT(V64(Linear(x32, w32, b32).value().To(DType::kF64)),
                Pointwise(DoubleNear(2e-3), ref))
        << "f32, batch " << batch;
    EXPECT_THAT(V64(Linear(x32, w32, Tensor()).value().To(DType::kF64)),
                Pointwise(DoubleNear(2e-3), ref_no_bias))
        << "f32, batch " << batch;
  }
}

TEST(LinearTest, Errors) {
  Tensor x = Tensor::Zeros({2, 4}).value();
  ExpectError(Linear(x, Tensor::Zeros({3, 5}).value(), Tensor()).status(),
              {"f32[2, 4]", "f32[3, 5]", "4 features"});
  ExpectError(
      Linear(x, Tensor::Zeros({3, 4}).value(), Tensor::Zeros({4}).value())
          .status(),
      {"bias f32[4]", "[3]"});
}

TEST(ElementwiseTest, BroadcastingValues) {
  Tensor a = F32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor row = F32({10, 20, 30}, {3});
  EXPECT_THAT(V(Add(a, row)), ElementsAre(11, 22, 33, 14, 25, 36));
  EXPECT_THAT(V(Add(row, a)), ElementsAre(11, 22, 33, 14, 25, 36));
  EXPECT_THAT(V(Sub(a, row)), ElementsAre(-9, -18, -27, -6, -15, -24));
  EXPECT_THAT(V(Sub(row, a)), ElementsAre(9, 18, 27, 6, 15, 24));
  EXPECT_THAT(V(Mul(a, a)), ElementsAre(1, 4, 9, 16, 25, 36));
  EXPECT_THAT(V(Div(row, F32({2}, {1}))), ElementsAre(5, 10, 15));
  EXPECT_THAT(V(Mul(a, Tensor::Scalar(2).value())),
              ElementsAre(2, 4, 6, 8, 10, 12));
  EXPECT_THAT(V(Div(Tensor::Scalar(6).value(), F32({1, 2, 3}, {3}))),
              ElementsAre(6, 3, 2));
  EXPECT_THAT(V(Add(a, 1.0)), ElementsAre(2, 3, 4, 5, 6, 7));
  EXPECT_THAT(V(Sub(a, 1.0)), ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_THAT(V(Mul(a, -1.0)), ElementsAre(-1, -2, -3, -4, -5, -6));
  EXPECT_THAT(V(Div(a, 2.0)), ElementsAre(0.5, 1, 1.5, 2, 2.5, 3));
  EXPECT_THAT(V(Neg(row)), ElementsAre(-10, -20, -30));
  // [N, C, H, W] op [H, W]
  Tensor img = Tensor::Ones({2, 1, 2, 2}).value();
  EXPECT_THAT(V(Mul(img, F32({1, 2, 3, 4}, {2, 2}))),
              ElementsAre(1, 2, 3, 4, 1, 2, 3, 4));
  // Empty operands.
  EXPECT_EQ(Add(Tensor::Zeros({0, 3}).value(), row).value().shape(),
            (Shape{0, 3}));
}

TEST(ElementwiseTest, Errors) {
  ExpectError(
      Add(Tensor::Zeros({2, 3}).value(), Tensor::Zeros({2}).value()).status(),
      {"[2, 3]", "[2]", "not broadcastable"});
  ExpectError(
      Mul(Tensor::Zeros({2}).value(), Tensor::Zeros({2}, DType::kF64).value())
          .status(),
      {"dtype mismatch", "f32[2]", "f64[2]"});
  ExpectError(Relu(Tensor::Zeros({2}, DType::kI64).value()).status(),
              {"Relu", "i64[2]"});
}

TEST(ElementwiseTest, UnaryValues) {
  Tensor x = F64({-2, -0.5, 0, 0.5, 2}, {5});
  EXPECT_THAT(V64(Relu(x)), ElementsAre(0, 0, 0, 0.5, 2));
  std::vector<double> s = V64(Sigmoid(x));
  for (int i = 0; i < 5; ++i) {
    const double v = x.data<double>()[i];
    EXPECT_NEAR(s[i], 1 / (1 + std::exp(-v)), 1e-15);
  }
  EXPECT_THAT(V64(Tanh(x)), ElementsAre(std::tanh(-2.0), std::tanh(-0.5), 0,
                                        std::tanh(0.5), std::tanh(2.0)));
  EXPECT_THAT(V64(Exp(F64({0, 1}, {2}))), ElementsAre(1, std::exp(1.0)));
  EXPECT_THAT(V64(Log(F64({1, 4}, {2}))), ElementsAre(0, std::log(4.0)));
  // Sigmoid never overflows.
  EXPECT_THAT(V(Sigmoid(F32({-1000, 1000}, {2}))), ElementsAre(0, 1));
  // Relu keeps NaN, like torch.relu.
  EXPECT_TRUE(std::isnan(V(Relu(F32({NAN}, {1})))[0]));
}

TEST(SoftmaxTest, ValuesAndStability) {
  Tensor x = F64({1, 2, 3, 1000, 1001, 1002}, {2, 3});
  std::vector<double> y = V64(Softmax(x));
  const double z = std::exp(-2.0) + std::exp(-1.0) + 1;
  std::vector<double> want = {std::exp(-2.0) / z, std::exp(-1.0) / z, 1 / z};
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(y[r * 3 + c], want[c], 1e-15);
  }
  std::vector<double> ly = V64(LogSoftmax(x));
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(ly[r * 3 + c], std::log(want[c]), 1e-13);
    }
  }
  // Along dim 0 of [2, 3]: columns.
  std::vector<double> c0 = V64(Softmax(F64({0, 0, 0, 0, 0, 0}, {2, 3}), 0));
  EXPECT_THAT(c0, ElementsAre(0.5, 0.5, 0.5, 0.5, 0.5, 0.5));
  ExpectError(Softmax(x, 2).status(), {"dim 2", "f64[2, 3]"});
  EXPECT_EQ(Softmax(Tensor::Zeros({3, 0}).value()).value().numel(), 0);
}

TEST(ReduceTest, SumMeanValues) {
  Tensor x = F32({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(Sum(x).value().Item().value(), 21);
  EXPECT_EQ(Sum(x).value().ndim(), 0);
  EXPECT_EQ(Mean(x).value().Item().value(), 3.5);
  EXPECT_THAT(V(Sum(x, 0)), ElementsAre(5, 7, 9));
  EXPECT_THAT(V(Sum(x, -1)), ElementsAre(6, 15));
  EXPECT_THAT(V(Mean(x, 1)), ElementsAre(2, 5));
  EXPECT_EQ(Sum(x, 1, true).value().shape(), (Shape{2, 1}));
  EXPECT_EQ(Sum(Tensor::Zeros({0}).value()).value().Item().value(), 0);
  EXPECT_TRUE(
      std::isnan(Mean(Tensor::Zeros({0}).value()).value().Item().value()));
  EXPECT_THAT(V(Sum(Tensor::Zeros({2, 0}).value(), 1)), ElementsAre(0, 0));
  ExpectError(Sum(x, 3).status(), {"dim 3", "f32[2, 3]"});
}

TEST(ReduceTest, Argmax) {
  Tensor x = F32({1, 5, 5, 7, 0, -1}, {2, 3});
  EXPECT_THAT(Argmax(x).value().ToVector<int64_t>().value(), ElementsAre(1, 0));
  EXPECT_THAT(Argmax(x, 0).value().ToVector<int64_t>().value(),
              ElementsAre(1, 0, 0));
  EXPECT_THAT(Argmax(F32({1, NAN, 3}, {3})).value().ToVector<int64_t>().value(),
              ElementsAre(1));
  Tensor ints = Tensor::FromVector(std::vector<int64_t>{3, 9, 2}).value();
  EXPECT_EQ(Argmax(ints).value().Item().value(), 1);
  ExpectError(Argmax(Tensor::Zeros({2, 0}).value()).status(),
              {"empty", "f32[2, 0]"});
  Tensor w = F32({1, 2}, {2});
  ASSERT_TRUE(w.set_requires_grad(true).ok());
  EXPECT_FALSE(Argmax(w).value().requires_grad());
}

TEST(ShapeOpsTest, ReshapeAndFlattenAreViews) {
  Tensor x = Tensor::Zeros({2, 3, 4}).value();
  Tensor f = Flatten(x, 1).value();
  EXPECT_EQ(f.shape(), (Shape{2, 12}));
  EXPECT_EQ(f.raw_data(), x.raw_data());
  EXPECT_EQ(Flatten(x).value().shape(), (Shape{24}));
  EXPECT_EQ(Flatten(x, 0, 1).value().shape(), (Shape{6, 4}));
  EXPECT_EQ(Flatten(Tensor::Scalar(1).value()).value().shape(), (Shape{1}));
  EXPECT_EQ(Reshape(x, {4, -1}).value().shape(), (Shape{4, 6}));
  ExpectError(Reshape(x, {5, 5}).status(), {"[5, 5]", "25", "f32[2, 3, 4]"});
  ExpectError(Flatten(x, 2, 1).status(), {"start_dim"});
  EXPECT_EQ(Reshape(Tensor::Zeros({0, 3}).value(), {3, 0}).value().numel(), 0);
}

// Direct convolution, for checking the im2col + GEMM path.
std::vector<double> NaiveConv(const Tensor& x, const Tensor& w, const Tensor& b,
                              int64_t s, int64_t p) {
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t o = w.dim(0), kh = w.dim(2), kw = w.dim(3);
  const int64_t oh = (h + 2 * p - kh) / s + 1, ow = (wd + 2 * p - kw) / s + 1;
  std::vector<double> out;
  const double* px = x.data<double>();
  const double* pw = w.data<double>();
  for (int64_t in = 0; in < n; ++in)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = b.defined() ? b.data<double>()[oc] : 0;
          for (int64_t ic = 0; ic < c; ++ic)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t bb = 0; bb < kw; ++bb) {
                const int64_t r = i * s - p + a, q = j * s - p + bb;
                if (r < 0 || r >= h || q < 0 || q >= wd) continue;
                acc += px[((in * c + ic) * h + r) * wd + q] *
                       pw[((oc * c + ic) * kh + a) * kw + bb];
              }
          out.push_back(acc);
        }
  return out;
}

TEST(Conv2dTest, MatchesDirectConvolution) {
  std::mt19937 rng(3);
  struct Case {
    Shape x, w;
    int64_t stride, pad;
    bool bias;
  };
  for (const Case& c : {Case{{2, 3, 5, 6}, {4, 3, 3, 3}, 1, 0, true},
                        Case{{1, 2, 7, 7}, {3, 2, 3, 2}, 2, 1, true},
                        Case{{2, 3, 4, 4}, {5, 3, 1, 1}, 1, 0, false},
                        Case{{1, 1, 3, 3}, {1, 1, 3, 3}, 1, 2, true}}) {
    Tensor x = Random64(c.x, rng), w = Random64(c.w, rng);
    Tensor b = c.bias ? Random64({c.w[0]}, rng) : Tensor();
    Conv2dOptions opt{.stride = {c.stride, c.stride},
                      .padding = {c.pad, c.pad}};
    Tensor y = Conv2d(x, w, b, opt).value();
    EXPECT_THAT(
        y.ToVector<double>().value(),
        Pointwise(DoubleNear(1e-12), NaiveConv(x, w, b, c.stride, c.pad)));
  }
}

TEST(Conv2dTest, ShapesAndErrors) {
  Tensor x = Tensor::Zeros({2, 3, 8, 8}).value();
  Tensor w = Tensor::Zeros({4, 3, 3, 3}).value();
  EXPECT_EQ(Conv2d(x, w, Tensor(), {.stride = {2, 2}, .padding = {1, 1}})
                .value()
                .shape(),
            (Shape{2, 4, 4, 4}));
  ExpectError(Conv2d(x, Tensor::Zeros({4, 2, 3, 3}).value(), Tensor()).status(),
              {"3 channels", "f32[4, 2, 3, 3]"});
  ExpectError(Conv2d(Tensor::Zeros({1, 3, 2, 2}).value(), w, Tensor()).status(),
              {"does not fit", "f32[1, 3, 2, 2]"});
  ExpectError(Conv2d(x, w, Tensor::Zeros({3}).value()).status(),
              {"bias f32[3]", "[4]"});
  ExpectError(Conv2d(x, w, Tensor(), {.stride = {0, 1}}).status(), {"stride"});
  ExpectError(Conv2d(Tensor::Zeros({3, 8, 8}).value(), w, Tensor()).status(),
              {"[N, C, H, W]", "f32[3, 8, 8]"});
  // Empty batch and zero input channels.
  EXPECT_EQ(
      Conv2d(Tensor::Zeros({0, 3, 8, 8}).value(), w, Tensor()).value().shape(),
      (Shape{0, 4, 6, 6}));
  Tensor b = F32({1, 2}, {2});
  EXPECT_THAT(V(Conv2d(Tensor::Zeros({1, 0, 1, 1}).value(),
                       Tensor::Zeros({2, 0, 1, 1}).value(), b)),
              ElementsAre(1, 2));
}

TEST(MaxPool2dTest, Values) {
  Tensor x = F32({1, 2, 3, 4,  //
                  5, 6, 7, 8,  //
                  9, 1, 2, 3,  //
                  4, 5, 6, 7},
                 {1, 1, 4, 4});
  EXPECT_THAT(V(MaxPool2d(x)), ElementsAre(6, 8, 9, 7));
  EXPECT_THAT(V(MaxPool2d(x, {.kernel = {3, 3}, .stride = {1, 1}})),
              ElementsAre(9, 8, 9, 8));
  EXPECT_EQ(MaxPool2d(Tensor::Zeros({2, 3, 5, 5}).value()).value().shape(),
            (Shape{2, 3, 2, 2}));
  ExpectError(MaxPool2d(Tensor::Zeros({1, 1, 1, 1}).value()).status(),
              {"does not fit", "f32[1, 1, 1, 1]"});
}

TEST(LossTest, CrossEntropyValue) {
  Tensor logits = F64({1, 2, 3, 0, 0, 0}, {2, 3});
  Tensor labels = Tensor::FromVector(std::vector<int64_t>{2, 0}).value();
  const double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  const double want = ((lse0 - 3) + std::log(3.0)) / 2;
  EXPECT_NEAR(CrossEntropy(logits, labels).value().Item().value(), want, 1e-15);
  // Large logits stay finite.
  Tensor big = F32({1000, 0}, {1, 2});
  EXPECT_NEAR(
      CrossEntropy(big, Tensor::FromVector(std::vector<int64_t>{0}).value())
          .value()
          .Item()
          .value(),
      0, 1e-6);
  EXPECT_TRUE(std::isnan(CrossEntropy(Tensor::Zeros({0, 3}).value(),
                                      Tensor::Zeros({0}, DType::kI64).value())
                             .value()
                             .Item()
                             .value()));
}

TEST(LossTest, CrossEntropyErrors) {
  Tensor logits = Tensor::Zeros({3, 5}).value();
  ExpectError(CrossEntropy(logits, Tensor::Zeros({3}).value()).status(),
              {"i64", "f32[3]", "float labels"});
  ExpectError(
      CrossEntropy(logits,
                   Tensor::FromVector(std::vector<int64_t>{0, 4, 7}).value())
          .status(),
      {"index 2", "is 7", "5 classes"});
  ExpectError(
      CrossEntropy(logits,
                   Tensor::FromVector(std::vector<int64_t>{0, -1, 1}).value())
          .status(),
      {"index 1", "is -1"});
  ExpectError(
      CrossEntropy(logits, Tensor::Zeros({4}, DType::kI64).value()).status(),
      {"i64[4]", "[3]"});
  ExpectError(CrossEntropy(Tensor::Zeros({3}).value(),
                           Tensor::Zeros({3}, DType::kI64).value())
                  .status(),
              {"[N, C]", "f32[3]"});
}

TEST(LossTest, Mse) {
  Tensor p = F64({1, 2, 3}, {3});
  Tensor t = F64({1, 0, 0}, {3});
  EXPECT_EQ(Mse(p, t).value().Item().value(), 13.0 / 3);
  ExpectError(Mse(p, F64({1, 2}, {2})).status(), {"f64[3]", "f64[2]"});
}

TEST(InPlaceTest, AddScaleFill) {
  Tensor d = F32({1, 2, 3}, {3});
  ASSERT_TRUE(AddInPlace(d, F32({1, 1, 1}, {3}), 2.0).ok());
  EXPECT_THAT(V(d), ElementsAre(3, 4, 5));
  ASSERT_TRUE(ScaleInPlace(d, 0.5).ok());
  EXPECT_THAT(V(d), ElementsAre(1.5, 2, 2.5));
  ASSERT_TRUE(FillInPlace(d, 7).ok());
  EXPECT_THAT(V(d), ElementsAre(7, 7, 7));
  ExpectError(AddInPlace(d, F32({1, 1}, {2})), {"f32[3]", "f32[2]"});
  ExpectError(AddInPlace(d, F64({1, 1, 1}, {3})), {"dtype mismatch"});
  // In-place ops never record autograd.
  Tensor w = F32({1}, {1});
  ASSERT_TRUE(w.set_requires_grad(true).ok());
  ASSERT_TRUE(ScaleInPlace(w, 2).ok());
  EXPECT_TRUE(w.is_leaf());
}

}  // namespace
}  // namespace tandem
