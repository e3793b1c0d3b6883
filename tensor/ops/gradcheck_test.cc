// Every differentiable op's backward against central finite differences in
// f64, on shapes that include size-1 and zero-size dims.
#include "tensor/testing/gradcheck.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem {
namespace {

using In = std::vector<Tensor>;

void CheckGrads(const GradCheckFn& f, const In& inputs) {
  absl::Status s = GradCheck(f, inputs);
  EXPECT_TRUE(s.ok()) << s;
}

// Variadic so lambdas with commas in their captures pass through.
#define EXPECT_GRADS_OK(...) \
  do {                       \
    SCOPED_TRACE(__LINE__);  \
    CheckGrads(__VA_ARGS__); \
  } while (0)

// Sizes used for each dim: empty, one, and a couple of "normal" ones.
constexpr int64_t kSizes[] = {0, 1, 2, 3};

TEST(GradCheckTest, DetectsAWrongGradient) {
  // A deliberately wrong backward must be caught.
  std::mt19937 rng(0);
  Tensor x = RandomTensor({3}, rng);
  absl::Status s = GradCheck(
      [](const In& in) -> absl::StatusOr<Tensor> {
        // Forward 2x, but built so backward says 3x.
        Tensor y = Mul(in[0], 3.0).value();
        Tensor c = Mul(in[0].Detach(), -1.0).value();  // constant
        return Add(y, c);
      },
      {x});
  EXPECT_FALSE(s.ok());
}

TEST(OpsGradTest, MatMulAllTransposes) {
  std::mt19937 rng(1);
  for (int64_t m : kSizes)
    for (int64_t k : kSizes)
      for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{4}})
        for (bool ta : {false, true})
          for (bool tb : {false, true}) {
            Tensor a = RandomTensor(ta ? Shape{k, m} : Shape{m, k}, rng);
            Tensor b = RandomTensor(tb ? Shape{n, k} : Shape{k, n}, rng);
            EXPECT_GRADS_OK(
                [ta, tb](const In& in) { return MatMul(in[0], in[1], ta, tb); },
                (In{a, b}));
          }
}

TEST(OpsGradTest, Linear) {
  std::mt19937 rng(2);
  for (int64_t batch : kSizes)
    for (int64_t in : kSizes)
      for (int64_t out : kSizes) {
        Tensor x = RandomTensor({batch, in}, rng);
        Tensor w = RandomTensor({out, in}, rng);
        Tensor b = RandomTensor({out}, rng);
        EXPECT_GRADS_OK([](const In& v) { return Linear(v[0], v[1], v[2]); },
                        (In{x, w, b}));
        EXPECT_GRADS_OK(
            [](const In& v) { return Linear(v[0], v[1], Tensor()); },
            (In{x, w}));
        // A frozen weight: only x and b get gradients.
        Tensor frozen = RandomTensor({out, in}, rng, -1, 1, false);
        EXPECT_GRADS_OK([](const In& v) { return Linear(v[0], v[1], v[2]); },
                        (In{x, frozen, b}));
      }
}

TEST(OpsGradTest, LinearIntoExistingGradients) {
  // beta = 1 path: gradients already exist before backward.
  std::mt19937 rng(3);
  Tensor x = RandomTensor({4, 3}, rng);
  Tensor w = RandomTensor({2, 3}, rng);
  Tensor b = RandomTensor({2}, rng);
  auto f = [](const In& v) { return Linear(v[0], v[1], v[2]); };
  ASSERT_TRUE(GradCheck(f, {x, w, b}).ok());
  // GradCheck clears gradients first; check accumulation separately.
  Tensor loss = Sum(Linear(x, w, b).value()).value();
  w.ClearGrad();
  ASSERT_TRUE(loss.Backward(BackwardOptions{.retain_graph = true}).ok());
  Tensor once = w.grad().Clone().value();
  ASSERT_TRUE(loss.Backward().ok());
  for (int64_t i = 0; i < w.numel(); ++i) {
    EXPECT_DOUBLE_EQ(w.grad().data<double>()[i], 2 * once.data<double>()[i]);
  }
}

TEST(OpsGradTest, BinaryWithBroadcasting) {
  std::mt19937 rng(4);
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3}, {2, 3}},    {{2, 3}, {3}},       {{3}, {2, 3}},
      {{2, 3}, {}},        {{}, {2, 3}},        {{2, 3}, {1}},
      {{1, 4}, {1, 1}},    {{0, 3}, {3}},       {{2, 0}, {0}},
      {{0}, {}},           {{2, 1, 3}, {1, 3}}, {{1}, {1}},
      {{4, 2, 3}, {2, 3}}, {{1, 1}, {2, 1, 3}}};
  using BinaryFn = absl::StatusOr<Tensor> (*)(const Tensor&, const Tensor&);
  const std::vector<BinaryFn> ops = {&Add, &Sub, &Mul, &Div};
  for (const auto& [sa, sb] : shapes) {
    for (BinaryFn op : ops) {
      Tensor a = RandomTensor(sa, rng);
      Tensor b = RandomTensor(sb, rng, 0.5, 2.0);  // away from 0 for Div
      EXPECT_GRADS_OK([op](const In& v) { return op(v[0], v[1]); }, (In{a, b}));
      // Only one side requiring grad.
      Tensor c = RandomTensor(sb, rng, 0.5, 2.0, /*requires_grad=*/false);
      EXPECT_GRADS_OK([op](const In& v) { return op(v[0], v[1]); }, (In{a, c}));
    }
  }
}

TEST(OpsGradTest, ScalarAndUnary) {
  std::mt19937 rng(5);
  for (const Shape& shape :
       {Shape{}, Shape{1}, Shape{0}, Shape{2, 3}, Shape{3, 0, 2}}) {
    Tensor x = RandomTensor(shape, rng);
    Tensor pos = RandomTensor(shape, rng, 0.2, 3.0);
    EXPECT_GRADS_OK([](const In& v) { return Add(v[0], 1.5); }, (In{x}));
    EXPECT_GRADS_OK([](const In& v) { return Sub(v[0], 1.5); }, (In{x}));
    EXPECT_GRADS_OK([](const In& v) { return Mul(v[0], -2.5); }, (In{x}));
    EXPECT_GRADS_OK([](const In& v) { return Div(v[0], 4.0); }, (In{x}));
    EXPECT_GRADS_OK([](const In& v) { return Neg(v[0]); }, (In{x}));
    EXPECT_GRADS_OK([](const In& v) { return Relu(v[0]); }, (In{x}));
    EXPECT_GRADS_OK([](const In& v) { return Sigmoid(v[0]); }, (In{x}));
    EXPECT_GRADS_OK([](const In& v) { return Tanh(v[0]); }, (In{x}));
    EXPECT_GRADS_OK([](const In& v) { return Exp(v[0]); }, (In{x}));
    EXPECT_GRADS_OK([](const In& v) { return Log(v[0]); }, (In{pos}));
    EXPECT_GRADS_OK([](const In& v) { return v[0].Clone(); }, (In{x}));
  }
}

TEST(OpsGradTest, SoftmaxAndLogSoftmax) {
  std::mt19937 rng(6);
  for (const Shape& shape : {Shape{1}, Shape{5}, Shape{2, 3}, Shape{3, 1},
                             Shape{0, 4}, Shape{2, 0}, Shape{2, 3, 4}}) {
    Tensor x = RandomTensor(shape, rng, -3, 3);
    for (int64_t dim = -static_cast<int64_t>(shape.size());
         dim < static_cast<int64_t>(shape.size()); ++dim) {
      EXPECT_GRADS_OK([dim](const In& v) { return Softmax(v[0], dim); },
                      (In{x}));
      EXPECT_GRADS_OK([dim](const In& v) { return LogSoftmax(v[0], dim); },
                      (In{x}));
    }
  }
}

TEST(OpsGradTest, Reductions) {
  std::mt19937 rng(7);
  for (const Shape& shape : {Shape{}, Shape{1}, Shape{4}, Shape{2, 3},
                             Shape{0, 3}, Shape{3, 0}, Shape{2, 1, 3}}) {
    Tensor x = RandomTensor(shape, rng);
    EXPECT_GRADS_OK([](const In& v) { return Sum(v[0]); }, (In{x}));
    if (x.numel() > 0) {  // the mean of nothing is NaN
      EXPECT_GRADS_OK([](const In& v) { return Mean(v[0]); }, (In{x}));
    }
    for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) {
      for (bool keep : {false, true}) {
        EXPECT_GRADS_OK(
            [dim, keep](const In& v) { return Sum(v[0], dim, keep); }, (In{x}));
        if (shape[dim] > 0) {
          EXPECT_GRADS_OK(
              [dim, keep](const In& v) { return Mean(v[0], dim, keep); },
              (In{x}));
        }
      }
    }
  }
}

TEST(OpsGradTest, ShapeOps) {
  std::mt19937 rng(8);
  Tensor x = RandomTensor({2, 3, 4}, rng);
  EXPECT_GRADS_OK([](const In& v) { return Reshape(v[0], {4, -1}); }, (In{x}));
  EXPECT_GRADS_OK([](const In& v) { return Flatten(v[0], 1); }, (In{x}));
  EXPECT_GRADS_OK(
      [](const In& v) -> absl::StatusOr<Tensor> {
        // Two overlapping views of one tensor, combined.
        absl::StatusOr<Tensor> a = v[0].View(3, {2, 5});
        absl::StatusOr<Tensor> b = v[0].View(6, {2, 5});
        if (!a.ok()) return a;
        return Mul(*a, *b);
      },
      (In{x}));
  Tensor e = RandomTensor({0, 2}, rng);
  EXPECT_GRADS_OK([](const In& v) { return Reshape(v[0], {2, 0}); }, (In{e}));
  EXPECT_GRADS_OK([](const In& v) { return v[0].View(0, {0}); }, (In{x}));
}

TEST(OpsGradTest, Conv2d) {
  std::mt19937 rng(9);
  struct Case {
    Shape x, w;
    int64_t sh, sw, ph, pw;
  };
  const std::vector<Case> cases = {
      {{2, 3, 5, 4}, {2, 3, 3, 2}, 1, 1, 0, 0},
      {{1, 2, 6, 6}, {3, 2, 3, 3}, 2, 2, 1, 1},
      {{2, 2, 4, 5}, {3, 2, 2, 3}, 1, 2, 1, 0},
      {{2, 3, 3, 3}, {4, 3, 1, 1}, 1, 1, 0, 0},  // pointwise fast path
      {{1, 1, 1, 1}, {1, 1, 1, 1}, 1, 1, 0, 0},
      {{1, 1, 2, 2}, {2, 1, 3, 3}, 1, 1, 1, 1},
      {{0, 2, 4, 4}, {3, 2, 3, 3}, 1, 1, 0, 0},  // empty batch
      {{2, 0, 3, 3}, {2, 0, 2, 2}, 1, 1, 0, 0},  // no input channels
      {{2, 2, 3, 3}, {0, 2, 2, 2}, 1, 1, 0, 0},  // no output channels
  };
  for (const Case& c : cases) {
    Tensor x = RandomTensor(c.x, rng);
    Tensor w = RandomTensor(c.w, rng);
    Tensor b = RandomTensor({c.w[0]}, rng);
    Conv2dOptions opt{.stride = {c.sh, c.sw}, .padding = {c.ph, c.pw}};
    EXPECT_GRADS_OK(
        [opt](const In& v) { return Conv2d(v[0], v[1], v[2], opt); },
        (In{x, w, b}));
    EXPECT_GRADS_OK(
        [opt](const In& v) { return Conv2d(v[0], v[1], Tensor(), opt); },
        (In{x, w}));
  }
}

TEST(OpsGradTest, MaxPool2d) {
  std::mt19937 rng(10);
  struct Case {
    Shape x;
    MaxPool2dOptions opt;
  };
  const std::vector<Case> cases = {
      {{2, 3, 4, 4}, {}},
      {{1, 2, 5, 5}, {.kernel = {3, 3}, .stride = {1, 1}}},  // overlapping
      {{1, 1, 5, 4}, {.kernel = {2, 1}, .stride = {2, 2}}},
      {{1, 1, 1, 1}, {.kernel = {1, 1}}},
      {{0, 2, 4, 4}, {}},
      {{2, 0, 4, 4}, {}},
  };
  for (const Case& c : cases) {
    Tensor x = RandomTensor(c.x, rng);
    EXPECT_GRADS_OK([opt = c.opt](const In& v) { return MaxPool2d(v[0], opt); },
                    (In{x}));
  }
}

TEST(OpsGradTest, Losses) {
  std::mt19937 rng(11);
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{5}}) {
    for (int64_t c : {int64_t{1}, int64_t{2}, int64_t{4}}) {
      Tensor logits = RandomTensor({n, c}, rng, -3, 3);
      std::vector<int64_t> lv(n);
      std::uniform_int_distribution<int64_t> pick(0, c - 1);
      for (auto& l : lv) l = pick(rng);
      Tensor labels = Tensor::FromVector(lv).value();
      EXPECT_GRADS_OK(
          [labels](const In& v) { return CrossEntropy(v[0], labels); },
          (In{logits}));
    }
  }
  for (const Shape& shape : {Shape{1}, Shape{3}, Shape{2, 3}}) {
    Tensor p = RandomTensor(shape, rng);
    Tensor t = RandomTensor(shape, rng);
    EXPECT_GRADS_OK([](const In& v) { return Mse(v[0], v[1]); }, (In{p, t}));
  }
}

TEST(OpsGradTest, SmallNetworkWithSharedWeights) {
  // Linear -> Tanh -> Linear (same first weight reused) -> CrossEntropy.
  std::mt19937 rng(12);
  Tensor x = RandomTensor({4, 3}, rng, -1, 1, /*requires_grad=*/false);
  Tensor w1 = RandomTensor({3, 3}, rng);
  Tensor b1 = RandomTensor({3}, rng);
  Tensor w2 = RandomTensor({2, 3}, rng);
  Tensor labels = Tensor::FromVector(std::vector<int64_t>{0, 1, 1, 0}).value();
  EXPECT_GRADS_OK(
      [x, labels](const In& v) -> absl::StatusOr<Tensor> {
        absl::StatusOr<Tensor> h = Linear(x, v[0], v[1]);
        if (!h.ok()) return h;
        h = Tanh(*h);
        if (!h.ok()) return h;
        h = Linear(*h, v[0], v[1]);  // shared
        if (!h.ok()) return h;
        h = Sigmoid(*h);
        if (!h.ok()) return h;
        h = Linear(*h, v[2], Tensor());
        if (!h.ok()) return h;
        return CrossEntropy(*h, labels);
      },
      (In{w1, b1, w2}));
}

}  // namespace
}  // namespace tandem
