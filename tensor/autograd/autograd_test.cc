#include "tensor/autograd/autograd.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "tensor/cpu/blas.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Tensor Param(std::vector<float> values, Shape shape) {
  Tensor t = Tensor::FromVector(values, std::move(shape)).value();
  EXPECT_TRUE(t.set_requires_grad(true).ok());
  return t;
}

std::vector<float> Values(const Tensor& t) {
  return t.ToVector<float>().value();
}

TEST(AutogradTest, ChainRule) {
  Tensor w = Param({1, 2, 3}, {3});
  Tensor y = Mul(w, w).value();                    // w^2
  Tensor loss = Sum(Mul(y, 3.0).value()).value();  // 3 sum w^2
  EXPECT_FALSE(y.is_leaf());
  EXPECT_EQ(y.grad_fn_name(), "Mul");
  ASSERT_TRUE(loss.Backward().ok());
  EXPECT_THAT(Values(w.grad()), ElementsAre(6, 12, 18));
}

TEST(AutogradTest, GradientsAccumulateAcrossBackwards) {
  Tensor w = Param({1, -1}, {2});
  for (int i = 0; i < 2; ++i) {
    Tensor loss = Sum(Mul(w, 2.0).value()).value();
    ASSERT_TRUE(loss.Backward().ok());
  }
  EXPECT_THAT(Values(w.grad()), ElementsAre(4, 4));
  w.ZeroGrad();
  EXPECT_THAT(Values(w.grad()), ElementsAre(0, 0));
  w.ClearGrad();
  EXPECT_FALSE(w.has_grad());
}

TEST(AutogradTest, DiamondAndRepeatedInputs) {
  Tensor x = Param({2}, {1});
  Tensor a = Mul(x, 2.0).value();                // 2x
  Tensor b = Mul(x, 3.0).value();                // 3x
  Tensor c = Mul(a, b).value();                  // 6x^2
  Tensor d = Add(c, Mul(x, x).value()).value();  // 7x^2
  ASSERT_TRUE(Sum(d).value().Backward().ok());
  EXPECT_THAT(Values(x.grad()), ElementsAre(28));  // 14x
}

// The seed passed to Backward is read, never written, even when the engine
// accumulates several contributions for the root's inputs.
TEST(AutogradTest, SeedIsNotModified) {
  Tensor x = Param({1, 2}, {2});
  Tensor p = Mul(x, 2.0).value();
  Tensor r = Add(p, p).value();  // both edges into p carry the seed
  Tensor seed = Tensor::FromVector(std::vector<float>{1, 10}).value();
  ASSERT_TRUE(r.Backward(seed).ok());
  EXPECT_THAT(Values(seed), ElementsAre(1, 10));
  EXPECT_THAT(Values(x.grad()), ElementsAre(4, 40));
}

// A leaf's first gradient must not alias the tensor another leaf received.
TEST(AutogradTest, LeafGradientsDoNotAlias) {
  Tensor a = Param({1}, {1});
  Tensor b = Param({2}, {1});
  ASSERT_TRUE(Sum(Add(a, b).value()).value().Backward().ok());
  EXPECT_FALSE(a.grad().SharesStorageWith(b.grad()));
  ASSERT_TRUE(Sum(Add(a, b).value()).value().Backward().ok());
  EXPECT_THAT(Values(a.grad()), ElementsAre(2));
  EXPECT_THAT(Values(b.grad()), ElementsAre(2));
}

TEST(AutogradTest, AccumulatesInPlaceIntoAViewOfAFlatBucket) {
  Tensor w = Param({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Param({0, 0}, {2});
  Tensor bucket = Tensor::Full({12}, 100.0).value();
  Tensor w_slot = bucket.View(1, {2, 3}).value();
  Tensor b_slot = bucket.View(8, {2}).value();
  ASSERT_TRUE(w_slot.CopyFrom(Tensor::Zeros({2, 3}).value()).ok());
  ASSERT_TRUE(b_slot.CopyFrom(Tensor::Zeros({2}).value()).ok());
  ASSERT_TRUE(w.set_grad(w_slot).ok());
  ASSERT_TRUE(b.set_grad(b_slot).ok());

  Tensor x = Tensor::FromVector(std::vector<float>{1, 2, 3}, {1, 3}).value();
  for (int step = 0; step < 2; ++step) {
    Tensor loss = Sum(Linear(x, w, b).value()).value();
    ASSERT_TRUE(loss.Backward().ok());
  }
  // dW = g^T x with g = ones: every row is x; two backwards double it.
  EXPECT_THAT(Values(bucket),
              ElementsAre(100, 2, 4, 6, 2, 4, 6, 100, 2, 2, 100, 100));
  EXPECT_TRUE(w.grad().SharesStorageWith(bucket));
  EXPECT_EQ(w.grad().storage_offset(), 1);
  // zero_grad(set_to_none=False) keeps the aliasing.
  w.ZeroGrad();
  EXPECT_EQ(bucket.data<float>()[1], 0);
  EXPECT_EQ(bucket.data<float>()[7], 100);
}

TEST(AutogradTest, SetGradChecksShapeAndDtype) {
  Tensor w = Param({1, 2}, {2});
  absl::Status s = w.set_grad(Tensor::Zeros({3}).value());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("f32[3]"));
  EXPECT_THAT(s.message(), HasSubstr("f32[2]"));
  EXPECT_FALSE(w.set_grad(Tensor::Zeros({2}, DType::kF64).value()).ok());
  EXPECT_TRUE(w.set_grad(Tensor()).ok());
}

TEST(AutogradTest, HookFiresOnceWithTheFinalGradient) {
  Tensor x = Param({1, 2}, {2});
  std::vector<std::vector<float>> seen;
  ASSERT_TRUE(x.AddPostAccumulateGradHook([&](Tensor& p) {
                 seen.push_back(Values(p.grad()));
               }).ok());
  // x feeds three ops at different depths; the hook must wait for all.
  Tensor a = Mul(x, 2.0).value();
  Tensor b = Mul(Mul(x, x).value(), 1.0).value();
  Tensor c = Add(Add(a, b).value(), x).value();
  ASSERT_TRUE(Sum(c).value().Backward().ok());
  ASSERT_EQ(seen.size(), 1u);
  // d/dx (2x + x^2 + x) = 3 + 2x.
  EXPECT_THAT(seen[0], ElementsAre(5, 7));
  // c's graph was released by that Backward: a second one is an error.
  EXPECT_FALSE(Sum(c).value().Backward().ok());
  EXPECT_EQ(seen.size(), 1u);
}

TEST(AutogradTest, HooksFireInTheOrderLeavesBecomeFinal) {
  Tensor x = Tensor::FromVector(std::vector<float>{1, 2}, {1, 2}).value();
  Tensor w1 = Param({1, 0, 0, 1}, {2, 2});
  Tensor b1 = Param({0, 0}, {2});
  Tensor w2 = Param({1, 1}, {1, 2});
  Tensor b2 = Param({0}, {1});
  std::vector<std::string> order;
  for (auto [t, name] : {std::pair{w1, "w1"}, std::pair{b1, "b1"},
                         std::pair{w2, "w2"}, std::pair{b2, "b2"}}) {
    std::string n = name;
    ASSERT_TRUE(t.AddPostAccumulateGradHook([&order, n](Tensor& p) {
                   EXPECT_TRUE(p.has_grad());
                   order.push_back(n);
                 }).ok());
  }
  Tensor h = Relu(Linear(x, w1, b1).value()).value();
  Tensor loss = Sum(Linear(h, w2, b2).value()).value();
  ASSERT_TRUE(loss.Backward().ok());
  EXPECT_THAT(order, ElementsAre("w2", "b2", "w1", "b1"));
}

TEST(AutogradTest, HookCanBeRemovedAndIsRejectedOnNonLeaves) {
  Tensor x = Param({1}, {1});
  int calls = 0;
  HookHandle h = x.AddPostAccumulateGradHook([&](Tensor&) { ++calls; }).value();
  ASSERT_TRUE(Sum(x).value().Backward().ok());
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(x.RemovePostAccumulateGradHook(h));
  EXPECT_FALSE(x.RemovePostAccumulateGradHook(h));
  ASSERT_TRUE(Sum(x).value().Backward().ok());
  EXPECT_EQ(calls, 1);

  Tensor y = Mul(x, 2.0).value();
  absl::StatusOr<HookHandle> bad = y.AddPostAccumulateGradHook([](Tensor&) {});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("MulScalar"));
  Tensor c = Tensor::Zeros({1}).value();
  EXPECT_FALSE(c.AddPostAccumulateGradHook([](Tensor&) {}).ok());
}

TEST(AutogradTest, HookOnRootLeaf) {
  Tensor x = Param({3}, {1});
  int calls = 0;
  ASSERT_TRUE(x.AddPostAccumulateGradHook([&](Tensor&) { ++calls; }).ok());
  ASSERT_TRUE(x.Backward().ok());
  EXPECT_EQ(calls, 1);
  EXPECT_THAT(Values(x.grad()), ElementsAre(1));
}

TEST(AutogradTest, NoGradGuardStopsRecordingAndNests) {
  Tensor w = Param({1}, {1});
  EXPECT_TRUE(IsGradEnabled());
  {
    NoGradGuard outer;
    EXPECT_FALSE(IsGradEnabled());
    {
      NoGradGuard inner;
      EXPECT_FALSE(IsGradEnabled());
    }
    EXPECT_FALSE(IsGradEnabled());
    Tensor y = Mul(w, 2.0).value();
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.is_leaf());
    absl::Status s = y.Backward();
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.message(), HasSubstr("does not require grad"));
  }
  EXPECT_TRUE(IsGradEnabled());
  EXPECT_TRUE(Mul(w, 2.0).value().requires_grad());
}

TEST(AutogradTest, GradModeIsThreadLocal) {
  NoGradGuard no_grad;
  bool other_thread_enabled = false;
  std::thread t([&] { other_thread_enabled = IsGradEnabled(); });
  t.join();
  EXPECT_TRUE(other_thread_enabled);
  EXPECT_FALSE(IsGradEnabled());
}

TEST(AutogradTest, BackwardOnNonScalarNeedsAGradient) {
  Tensor w = Param({1, 2, 3, 4}, {2, 2});
  Tensor y = Mul(w, 3.0).value();
  absl::Status s = y.Backward();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("[2, 2]"));
  s = y.Backward(Tensor::Ones({4}).value());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("f32[4]"));
  EXPECT_THAT(s.message(), HasSubstr("f32[2, 2]"));
  ASSERT_TRUE(y.Backward(Tensor::Full({2, 2}, 2.0).value()).ok());
  EXPECT_THAT(Values(w.grad()), ElementsAre(6, 6, 6, 6));
}

TEST(AutogradTest, GraphIsReleasedUnlessRetained) {
  Tensor w = Param({1, 2}, {2});
  Tensor loss = Sum(Mul(w, w).value()).value();
  ASSERT_TRUE(loss.Backward(BackwardOptions{.retain_graph = true}).ok());
  ASSERT_TRUE(loss.Backward().ok());
  EXPECT_THAT(Values(w.grad()), ElementsAre(4, 8));
  absl::Status s = loss.Backward();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("retain_graph"));
}

TEST(AutogradTest, RequiresGradRules) {
  Tensor i = Tensor::Zeros({2}, DType::kI64).value();
  absl::Status s = i.set_requires_grad(true);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("i64"));
  Tensor w = Param({1}, {1});
  Tensor y = Mul(w, 2.0).value();
  EXPECT_TRUE(y.set_requires_grad(true).ok());
  EXPECT_FALSE(y.set_requires_grad(false).ok());
  EXPECT_TRUE(w.set_requires_grad(false).ok());
  EXPECT_FALSE(Mul(w, 2.0).value().requires_grad());
}

TEST(AutogradTest, ViewGradientLandsInTheRightPlace) {
  Tensor flat = Param({1, 2, 3, 4, 5}, {5});
  Tensor v = flat.View(1, {2, 2}).value();
  EXPECT_EQ(v.grad_fn_name(), "View");
  ASSERT_TRUE(Sum(Mul(v, v).value()).value().Backward().ok());
  EXPECT_THAT(Values(flat.grad()), ElementsAre(0, 4, 6, 8, 10));
}

TEST(AutogradTest, CloneAndToAreDifferentiable) {
  Tensor x = Param({1, 2}, {2});
  Tensor d = x.To(DType::kF64).value();
  EXPECT_EQ(d.grad_fn_name(), "To");
  Tensor c = x.Clone().value();
  ASSERT_TRUE(Sum(Mul(d, 2.0).value()).value().Backward().ok());
  ASSERT_TRUE(Sum(c).value().Backward().ok());
  EXPECT_EQ(x.grad().dtype(), DType::kF32);
  EXPECT_THAT(Values(x.grad()), ElementsAre(3, 3));
}

// Each thread owns its model and graph, as simulated ranks do; run under
// --config=tsan to check there is no shared mutable state.
TEST(AutogradTest, IndependentGraphsOnThreads) {
  constexpr int kThreads = 4;
  std::vector<std::vector<float>> grads(kThreads);
  std::vector<int> hook_calls(kThreads, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < kThreads; ++r) {
    threads.emplace_back([r, &grads, &hook_calls] {
      Tensor w = Param({1, 2, 3, 4}, {2, 2});
      Tensor b = Param({0, 0}, {2});
      (void)w.AddPostAccumulateGradHook([&, r](Tensor&) { ++hook_calls[r]; });
      Tensor x = Tensor::Full({3, 2}, r + 1.0).value();
      for (int step = 0; step < 20; ++step) {
        Tensor loss = Mean(Relu(Linear(x, w, b).value()).value()).value();
        if (!loss.Backward().ok()) return;
      }
      grads[r] = Values(w.grad());
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kThreads; ++r) {
    EXPECT_EQ(hook_calls[r], 20);
    // d mean(xW^T+b)/dW = (r+1)/2 per element (all pre-activations > 0).
    const float want = 20 * (r + 1) / 2.0f;
    EXPECT_THAT(grads[r], ElementsAre(want, want, want, want));
  }
}

// ---- Tensor::MarkGradZero: a gradient that reads as zero without being
// written. The backward's first write overwrites the stale memory (kernels
// get GradSink::Buffer::accumulate == false), later contributions add, any
// read through grad() sees zeros, and installing or dropping a gradient
// drops the mark.

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// `count` values from `seed`: small integers (every sum of a few hundred
// products is exact in f32, whatever the kernel's order) or reals.
std::vector<float> Draw(int64_t count, uint64_t seed, bool integers) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> ints(-2, 2);
  std::uniform_real_distribution<float> reals(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = integers ? static_cast<float>(ints(rng)) : reals(rng);
  return v;
}

// Linear's parameters [out, in] and [out], and a batch of rows.
struct LinearCase {
  Tensor w, b, x;
};
LinearCase MakeCase(int64_t rows, int64_t in, int64_t out, bool integers) {
  return {Param(Draw(out * in, 1, integers), {out, in}),
          Param(Draw(out, 2, integers), {out}),
          Tensor::FromVector(Draw(rows * in, 3, integers), {rows, in}).value()};
}

// sum(y * y) of y = x wᵀ + b: the weight gradient is 2 yᵀ x, a GEMM.
absl::Status Backward(const LinearCase& c) {
  TANDEM_ASSIGN_OR_RETURN(Tensor y, Linear(c.x, c.w, c.b));
  TANDEM_ASSIGN_OR_RETURN(Tensor loss, Sum(Mul(y, y).value()));
  return loss.Backward();
}

// 64 x 256 -> 256 takes cpu::Gemm's packed weight-gradient path under
// kFastest (K = 64 rows, beta 0); 5 x 7 -> 3 the libraries'.
TEST(MarkGradZeroTest, OverwritesStaleMemoryWithTheExactGradient) {
  for (const auto& [rows, in, out] :
       {std::tuple<int64_t, int64_t, int64_t>{64, 256, 256}, {5, 7, 3}}) {
    const LinearCase fresh = MakeCase(rows, in, out, /*integers=*/true);
    ASSERT_TRUE(Backward(fresh).ok());
    const std::vector<float> dw = Values(fresh.w.grad());
    const std::vector<float> db = Values(fresh.b.grad());

    const LinearCase marked = MakeCase(rows, in, out, /*integers=*/true);
    Tensor w_buffer = Tensor::Full({out, in}, kNaN).value();
    Tensor b_buffer = Tensor::Full({out}, kNaN).value();
    ASSERT_TRUE(marked.w.set_grad(w_buffer).ok());
    ASSERT_TRUE(marked.b.set_grad(b_buffer).ok());
    marked.w.MarkGradZero();
    marked.b.MarkGradZero();
    ASSERT_TRUE(Backward(marked).ok());
    EXPECT_EQ(Values(w_buffer), dw) << rows;  // written in place, no NaN
    EXPECT_EQ(Values(b_buffer), db) << rows;
    EXPECT_TRUE(marked.w.grad().SharesStorageWith(w_buffer));
    EXPECT_TRUE(marked.w.GradIsViewOf(w_buffer));
    EXPECT_FALSE(marked.w.GradIsViewOf(b_buffer));
    EXPECT_FALSE(fresh.w.GradIsViewOf(w_buffer));

    // A second backward accumulates as usual.
    ASSERT_TRUE(Backward(marked).ok());
    std::vector<float> twice = dw;
    for (float& v : twice) v *= 2;
    EXPECT_EQ(Values(marked.w.grad()), twice) << rows;

    // Read before any backward wrote it: zeros, in the buffer itself.
    marked.w.MarkGradZero();
    // Asking whether it is the buffer does not read (fill) it.
    EXPECT_TRUE(marked.w.GradIsViewOf(w_buffer));
    EXPECT_EQ(Values(w_buffer), twice) << rows;
    EXPECT_THAT(Values(marked.w.grad()), Each(0.f));
    EXPECT_THAT(Values(w_buffer), Each(0.f));
    ASSERT_TRUE(Backward(marked).ok());
    marked.b.MarkGradZero();  // b still holds three backwards' worth
    ASSERT_TRUE(Backward(marked).ok());
    EXPECT_EQ(Values(marked.w.grad()), twice) << rows;  // 0 + dw + dw
    EXPECT_EQ(Values(marked.b.grad()), db) << rows;
  }
}

// PyTorch's bits (KernelChoice::kPyTorch) on real values: marking then
// backward gives the bits of ZeroGrad then backward.
TEST(MarkGradZeroTest, SameBitsAsZeroGradUnderPyTorchKernels) {
  cpu::SetKernelChoice(cpu::KernelChoice::kPyTorch);
  const LinearCase filled = MakeCase(64, 256, 256, /*integers=*/false);
  const LinearCase marked = MakeCase(64, 256, 256, /*integers=*/false);
  for (int step = 0; step < 2; ++step) {
    filled.w.ZeroGrad();
    filled.b.ZeroGrad();
    marked.w.MarkGradZero();
    marked.b.MarkGradZero();
    ASSERT_TRUE(Backward(filled).ok());
    ASSERT_TRUE(Backward(marked).ok());
  }
  cpu::SetKernelChoice(cpu::KernelChoice::kFastest);
  for (const auto& [f, m] :
       {std::pair{filled.w, marked.w}, {filled.b, marked.b}}) {
    const std::vector<float> fv = Values(f.grad()), mv = Values(m.grad());
    ASSERT_EQ(fv.size(), mv.size());
    EXPECT_EQ(std::memcmp(fv.data(), mv.data(), fv.size() * sizeof(float)), 0);
  }
}

// Gradients that reach the leaf through GradSink::Add (no kernel writing in
// place), and a leaf that is the root itself.
TEST(MarkGradZeroTest, AddedContributionsAndTheRootSeed) {
  Tensor w = Param({1, -1}, {2});
  ASSERT_TRUE(w.set_grad(Tensor::Full({2}, kNaN).value()).ok());
  w.MarkGradZero();
  ASSERT_TRUE(Sum(Mul(w, 2.0).value()).value().Backward().ok());
  EXPECT_THAT(Values(w.grad()), ElementsAre(2, 2));
  ASSERT_TRUE(Sum(Mul(w, 2.0).value()).value().Backward().ok());
  EXPECT_THAT(Values(w.grad()), ElementsAre(4, 4));

  ASSERT_TRUE(w.set_grad(Tensor::Full({2}, kNaN).value()).ok());
  w.MarkGradZero();
  const Tensor seed = Tensor::FromVector(std::vector<float>{1, 10}).value();
  ASSERT_TRUE(w.Backward(seed).ok());
  EXPECT_THAT(Values(w.grad()), ElementsAre(1, 10));
}

TEST(MarkGradZeroTest, SetGradZeroGradAndClearGradDropTheMark) {
  Tensor w = Param({1, -1}, {2});
  w.MarkGradZero();  // no gradient yet: nothing to mark
  EXPECT_FALSE(w.has_grad());
  auto backward = [&] {
    ASSERT_TRUE(Sum(Mul(w, 2.0).value()).value().Backward().ok());
  };
  backward();
  w.MarkGradZero();
  ASSERT_TRUE(w.set_grad(Tensor::Full({2}, 5.0).value()).ok());
  backward();  // onto the installed 5s
  EXPECT_THAT(Values(w.grad()), ElementsAre(7, 7));
  w.MarkGradZero();
  w.ZeroGrad();
  backward();
  EXPECT_THAT(Values(w.grad()), ElementsAre(2, 2));
  w.MarkGradZero();
  w.ClearGrad();
  EXPECT_FALSE(w.has_grad());
  backward();
  EXPECT_THAT(Values(w.grad()), ElementsAre(2, 2));
}

// A gradient that is a view into a flat bucket (DDP's layout): the marked
// view is overwritten, its neighbours are not touched.
TEST(MarkGradZeroTest, BucketViewsAreOverwrittenInPlace) {
  Tensor w = Param({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Param({0, 0}, {2});
  Tensor bucket = Tensor::Full({12}, 100.0).value();
  ASSERT_TRUE(w.set_grad(bucket.View(1, {2, 3}).value()).ok());
  ASSERT_TRUE(b.set_grad(bucket.View(8, {2}).value()).ok());
  w.MarkGradZero();
  b.MarkGradZero();
  Tensor x = Tensor::FromVector(std::vector<float>{1, 2, 3}, {1, 3}).value();
  for (int backward = 0; backward < 2; ++backward) {
    ASSERT_TRUE(Sum(Linear(x, w, b).value()).value().Backward().ok());
  }
  // dW = gᵀ x with g = ones: every row is x, twice; db = 1, twice.
  EXPECT_THAT(Values(bucket),
              ElementsAre(100, 2, 4, 6, 2, 4, 6, 100, 2, 2, 100, 100));
  EXPECT_TRUE(w.grad().SharesStorageWith(bucket));
  EXPECT_EQ(w.grad().storage_offset(), 1);
}

}  // namespace
}  // namespace tandem
