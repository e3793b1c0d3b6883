// CausalSelfAttentionQkv (tensor/ops/attention_qkv.cc) against the
// composition it replaces (Reshape, Permute, ScaledDotProductAttention,
// Permute, Reshape): output and qkv's gradient, f32 (where the CPU has
// AVX2 + FMA: the in-place kernels) to 1e-6 of the largest magnitude
// (the two differ only by which GEMM kernel rounds q k^T), f64 (always the
// composition) bit for bit; with dropout from the same seed; GradCheck;
// the argument checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "base/status_macros.h"
#include "tensor/generator.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "tensor/testing/gradcheck.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

std::vector<double> F64(const Tensor& t) {
  Tensor d = t.Detach().To(DType::kF64).value();
  return std::vector<double>(d.data<double>(), d.data<double>() + d.numel());
}

// The unfused reference, written out here as GPT-2's attention spells it.
absl::StatusOr<Tensor> Reference(const Tensor& qkv, int64_t nh, double p,
                                 Generator* gen) {
  const int64_t b = qkv.dim(0), t = qkv.dim(1), c = qkv.dim(2) / 3;
  const int64_t hd = c / nh;
  TANDEM_ASSIGN_OR_RETURN(Tensor x, Reshape(qkv, {b, t, 3, nh, hd}));
  TANDEM_ASSIGN_OR_RETURN(x, Permute(x, {2, 0, 3, 1, 4}));
  const int64_t n = b * nh * t * hd;
  TANDEM_ASSIGN_OR_RETURN(Tensor q, x.View(0, {b, nh, t, hd}));
  TANDEM_ASSIGN_OR_RETURN(Tensor k, x.View(n, {b, nh, t, hd}));
  TANDEM_ASSIGN_OR_RETURN(Tensor v, x.View(2 * n, {b, nh, t, hd}));
  TANDEM_ASSIGN_OR_RETURN(Tensor y,
                          ScaledDotProductAttention(q, k, v, true, p, gen));
  TANDEM_ASSIGN_OR_RETURN(y, Permute(y, {0, 2, 1, 3}));
  return Reshape(y, {b, t, c});
}

struct Result {
  std::vector<double> y, gqkv;
};

// y and d(sum(y * w))/dqkv through `fused` or the reference.
Result RunAttention(bool fused, const Tensor& qkv_in, const Tensor& w,
                    int64_t nh, double p) {
  Tensor qkv = qkv_in.Detach();
  EXPECT_TRUE(qkv.set_requires_grad(true).ok());
  Generator gen(17);
  absl::StatusOr<Tensor> y = fused ? CausalSelfAttentionQkv(qkv, nh, p, &gen)
                                   : Reference(qkv, nh, p, &gen);
  EXPECT_TRUE(y.ok()) << y.status();
  if (!y.ok()) return {};
  EXPECT_EQ(y->shape(), (Shape{qkv.dim(0), qkv.dim(1), qkv.dim(2) / 3}));
  EXPECT_TRUE(Sum(Mul(*y, w).value()).value().Backward().ok());
  return {F64(*y), F64(qkv.grad())};
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want,
                double rtol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  ASSERT_GT(scale, 0) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], rtol * scale) << what << "[" << i << "]";
  }
}

// Shapes: sequence lengths off the 64-row block and the vector width (37,
// 70), a head size not a multiple of a vector (3), GPT's head size 64, and
// several batches and heads, so a wrong head or batch offset, row pitch or
// causal block in the in-place kernels moves whole values.
TEST(CausalSelfAttentionQkvTest, MatchesTheComposition) {
  struct Case {
    int64_t b, t, nh, hd;
  };
  const Case cases[] = {{2, 37, 3, 8}, {1, 70, 2, 64}, {2, 9, 4, 3}};
  std::mt19937 rng(3);
  for (const Case& c : cases) {
    for (double p : {0.0, 0.25}) {
      SCOPED_TRACE(::testing::Message()
                   << "B " << c.b << " T " << c.t << " H " << c.nh << " hd "
                   << c.hd << " p " << p);
      const int64_t width = c.nh * c.hd;
      Tensor qkv = RandomTensor({c.b, c.t, 3 * width}, rng, -2, 2, false);
      Tensor w = RandomTensor({c.b, c.t, width}, rng, -1, 1, false);
      // f64: the composition on both sides, bit for bit.
      Result a = RunAttention(true, qkv, w, c.nh, p),
             b = RunAttention(false, qkv, w, c.nh, p);
      EXPECT_EQ(a.y, b.y);
      EXPECT_EQ(a.gqkv, b.gqkv);
      // f32: the in-place kernels (on AVX2 + FMA) against the composition.
      Tensor qkv32 = qkv.To(DType::kF32).value();
      Tensor w32 = w.To(DType::kF32).value();
      a = RunAttention(true, qkv32, w32, c.nh, p);
      b = RunAttention(false, qkv32, w32, c.nh, p);
      ExpectNear(a.y, b.y, 1e-6, "y");
      ExpectNear(a.gqkv, b.gqkv, 1e-6, "gqkv");
      // Dropout really dropped: p > 0 differs from p = 0.
      if (p > 0) {
        Result none = RunAttention(true, qkv32, w32, c.nh, 0.0);
        EXPECT_NE(a.y, none.y);
      }
    }
  }
}

TEST(CausalSelfAttentionQkvTest, GradCheck) {
  std::mt19937 rng(29);
  Tensor qkv = RandomTensor({2, 5, 12}, rng);
  absl::Status s = GradCheck(
      [](const std::vector<Tensor>& in) {
        Generator gen(8);  // the same dropout mask every evaluation
        return CausalSelfAttentionQkv(in[0], 2, 0.25, &gen);
      },
      {qkv});
  EXPECT_TRUE(s.ok()) << s;
}

TEST(CausalSelfAttentionQkvTest, RefusesBadArguments) {
  Tensor qkv = Tensor::Zeros({1, 4, 12}).value();
  absl::StatusOr<Tensor> y = CausalSelfAttentionQkv(qkv, 5);
  EXPECT_THAT(y.status().message(), HasSubstr("n_head must be >= 1"));
  y = CausalSelfAttentionQkv(Tensor::Zeros({1, 4, 10}).value(), 2);
  EXPECT_THAT(y.status().message(), HasSubstr("[B, T, 3C]"));
  y = CausalSelfAttentionQkv(qkv, 2, 0.5, nullptr);
  EXPECT_THAT(y.status().message(), HasSubstr("no generator"));
  Generator gen(1);
  y = CausalSelfAttentionQkv(qkv, 2, 1.0, &gen);
  EXPECT_THAT(y.status().message(), HasSubstr("dropout_p must be in [0, 1)"));
  y = CausalSelfAttentionQkv(Tensor::Zeros({4, 12}).value(), 2);
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
  y = CausalSelfAttentionQkv(Tensor::Zeros({1, 4, 12}, DType::kI64).value(), 2);
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
  // bf16 goes through the composition (attention computed in f32).
  y = CausalSelfAttentionQkv(Tensor::Zeros({1, 4, 12}, DType::kBF16).value(),
                             2);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->dtype(), DType::kBF16);
}

}  // namespace
}  // namespace tandem
