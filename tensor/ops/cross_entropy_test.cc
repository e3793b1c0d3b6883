// CrossEntropy's options (tensor/ops/loss.cc): ignore_index and reduction
// mean/sum against PyTorch 1.13's F.cross_entropy (f64 to 1e-12, f32 bit
// for bit: the CPU f32 path is PyTorch's order), the all-ignored NaN, the
// two-argument form's defaults, GradCheck, and the argument checks.
//
// The numbers were printed by /usr/bin/python3 (torch 1.13):
//   vals = [((i * 37) % 23) / 8 - 1.5 for i in range(30)]
//   cases = [([1, -100, 4, 0, -100, 2], -100), ([3, 0, 3, 4, 1, 3], 3)]
//   for dt in [torch.float64, torch.float32]:
//     for labels, ig in cases:
//       for red in ['mean', 'sum']:
//         x = torch.tensor(vals, dtype=dt).reshape(6, 5).requires_grad_(True)
//         loss = F.cross_entropy(x, torch.tensor(labels), ignore_index=ig,
//                                reduction=red)
//         loss.backward(torch.tensor(1.5, dtype=dt))
//         print(loss.item(), x.grad.flatten().tolist())
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "tensor/testing/gradcheck.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

struct Case {
  std::vector<int64_t> labels;
  int64_t ignore_index;
  LossReduction reduction;
  double loss;
  std::vector<double> grad;  // of 1.5 * loss
};

const Case kF64[] = {
    {{1, -100, 4, 0, -100, 2},
     -100,
     LossReduction::kMean,
     2.0767178635973886,
     {0.016401182707111613,
      -0.2806177101039966,
      0.030641443289668543,
      0.17632933155140443,
      0.05724575255581196,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      0.016401182707111613,
      0.0943822898960034,
      0.030641443289668543,
      0.17632933155140443,
      -0.31775424744418806,
      -0.3585988172928884,
      0.0943822898960034,
      0.030641443289668543,
      0.17632933155140443,
      0.05724575255581196,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      0.029481775829023667,
      0.16965590607910064,
      -0.31992079148950353,
      0.017881600943077697,
      0.1029015086383015}},
    {{1, -100, 4, 0, -100, 2},
     -100,
     LossReduction::kSum,
     8.306871454389555,
     {0.06560473082844645,
      -1.1224708404159864,
      0.12256577315867417,
      0.7053173262056177,
      0.22898301022324785,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      0.06560473082844645,
      0.3775291595840136,
      0.12256577315867417,
      0.7053173262056177,
      -1.2710169897767523,
      -1.4343952691715536,
      0.3775291595840136,
      0.12256577315867417,
      0.7053173262056177,
      0.22898301022324785,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      0.11792710331609467,
      0.6786236243164026,
      -1.2796831659580141,
      0.07152640377231079,
      0.411606034553206}},
    {{3, 0, 3, 4, 1, 3},
     3,
     LossReduction::kMean,
     1.9340996256454455,
     {0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      -0.47813175639051786,
      0.1258430531946712,
      0.04085525771955806,
      0.23510577540187258,
      0.07632767007441595,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      0.02186824360948215,
      0.1258430531946712,
      0.04085525771955806,
      0.23510577540187258,
      -0.42367232992558407,
      0.03930903443869822,
      -0.2737921252278658,
      0.07343894468066196,
      0.02384213459077026,
      0.13720201151773534,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0}},
    {{3, 0, 3, 4, 1, 3},
     3,
     LossReduction::kSum,
     5.802298876936336,
     {0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      -1.4343952691715536,
      0.3775291595840136,
      0.12256577315867417,
      0.7053173262056177,
      0.22898301022324785,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      0.06560473082844645,
      0.3775291595840136,
      0.12256577315867417,
      0.7053173262056177,
      -1.2710169897767523,
      0.11792710331609467,
      -0.8213763756835974,
      0.22031683404198588,
      0.07152640377231079,
      0.411606034553206,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0}},
};
const Case kF32[] = {
    {{1, -100, 4, 0, -100, 2},
     -100,
     LossReduction::kMean,
     2.0767178535461426,
     {0.016401180997490883,
      -0.28061771392822266,
      0.03064144030213356,
      0.1763293445110321,
      0.05724574998021126,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      0.016401180997490883,
      0.09438228607177734,
      0.03064144030213356,
      0.1763293445110321,
      -0.31775423884391785,
      -0.35859882831573486,
      0.09438228607177734,
      0.03064144030213356,
      0.1763293445110321,
      0.05724574998021126,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      0.02948177419602871,
      0.1696559190750122,
      -0.31992077827453613,
      0.017881600186228752,
      0.10290150344371796}},
    {{1, -100, 4, 0, -100, 2},
     -100,
     LossReduction::kSum,
     8.30687141418457,
     {0.06560472398996353,
      -1.1224708557128906,
      0.12256576120853424,
      0.7053173780441284,
      0.22898299992084503,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      0.06560472398996353,
      0.3775291442871094,
      0.12256576120853424,
      0.7053173780441284,
      -1.2710169553756714,
      -1.4343953132629395,
      0.3775291442871094,
      0.12256576120853424,
      0.7053173780441284,
      0.22898299992084503,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      0.11792709678411484,
      0.6786236763000488,
      -1.2796831130981445,
      0.07152640074491501,
      0.4116060137748718}},
    {{3, 0, 3, 4, 1, 3},
     3,
     LossReduction::kMean,
     1.9340996742248535,
     {0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      -0.4781317710876465,
      0.12584304809570312,
      0.04085525497794151,
      0.23510578274726868,
      0.07632766664028168,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      0.02186824195086956,
      0.12584304809570312,
      0.04085525497794151,
      0.23510578274726868,
      -0.42367231845855713,
      0.03930903226137161,
      -0.2737921178340912,
      0.07343894243240356,
      0.023842133581638336,
      0.13720200955867767,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0}},
    {{3, 0, 3, 4, 1, 3},
     3,
     LossReduction::kSum,
     5.8022990226745605,
     {0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      -1.4343953132629395,
      0.3775291442871094,
      0.12256576120853424,
      0.7053173780441284,
      0.22898299992084503,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0,
      0.06560472398996353,
      0.3775291442871094,
      0.12256576120853424,
      0.7053173780441284,
      -1.2710169553756714,
      0.11792709678411484,
      -0.8213763236999512,
      0.2203168272972107,
      0.07152640074491501,
      0.4116060137748718,
      0.0,
      0.0,
      0.0,
      0.0,
      0.0}},
};

Tensor Logits(DType dtype) {
  std::vector<double> v(30);
  for (int i = 0; i < 30; ++i) v[i] = ((i * 37) % 23) / 8.0 - 1.5;
  return Tensor::FromVector(v, {6, 5}).value().To(dtype).value();
}

std::vector<double> F64(const Tensor& t) {
  return t.To(DType::kF64).value().ToVector<double>().value();
}

void Check(DType dtype, const Case& c, double tol) {
  SCOPED_TRACE(::testing::Message()
               << DTypeName(dtype) << " ignore_index " << c.ignore_index
               << (c.reduction == LossReduction::kMean ? " mean" : " sum"));
  Tensor x = Logits(dtype);
  ASSERT_TRUE(x.set_requires_grad(true).ok());
  Tensor labels = Tensor::FromVector(c.labels).value();
  absl::StatusOr<Tensor> loss =
      CrossEntropy(x, labels, {c.ignore_index, c.reduction});
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_EQ(loss->dtype(), dtype);
  ASSERT_TRUE(Mul(*loss, 1.5).value().Backward().ok());
  const double got = F64(*loss)[0];
  EXPECT_NEAR(got, c.loss, tol * std::abs(c.loss));
  const std::vector<double> g = F64(x.grad());
  ASSERT_EQ(g.size(), c.grad.size());
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_NEAR(g[i], c.grad[i], tol * std::abs(c.grad[i])) << i;
    if (c.grad[i] == 0) {
      EXPECT_EQ(g[i], 0.0) << i;  // ignored rows
    }
  }
}

TEST(CrossEntropyOptionsTest, MatchesPyTorch) {
  for (const Case& c : kF64) Check(DType::kF64, c, 1e-12);
  // f32 is PyTorch's own order (log_softmax, then nll_loss's cascade with
  // ignored rows skipped): equal bit for bit.
  for (const Case& c : kF32) Check(DType::kF32, c, 0);
}

TEST(CrossEntropyOptionsTest, TwoArgumentFormIgnoresMinus100AndAverages) {
  for (DType dtype : {DType::kF32, DType::kF64}) {
    Tensor labels = Tensor::FromVector(kF64[0].labels).value();
    EXPECT_EQ(F64(CrossEntropy(Logits(dtype), labels).value()),
              F64(CrossEntropy(Logits(dtype), labels, {}).value()));
  }
}

TEST(CrossEntropyOptionsTest, AllIgnoredIsNanWithZeroGradient) {
  for (DType dtype : {DType::kF32, DType::kF64}) {
    Tensor x = Logits(dtype);
    ASSERT_TRUE(x.set_requires_grad(true).ok());
    Tensor labels = Tensor::Full({6}, -100, DType::kI64).value();
    Tensor loss = CrossEntropy(x, labels).value();
    EXPECT_TRUE(std::isnan(F64(loss)[0]));  // torch: nan
    ASSERT_TRUE(loss.Backward().ok());
    for (double v : F64(x.grad())) EXPECT_EQ(v, 0.0);
    Tensor sum = CrossEntropy(x, labels, {-100, LossReduction::kSum}).value();
    EXPECT_EQ(F64(sum)[0], 0.0);
  }
}

TEST(CrossEntropyOptionsTest, GradCheck) {
  std::mt19937 rng(17);
  Tensor x = RandomTensor({5, 4}, rng, -2, 2);
  Tensor labels =
      Tensor::FromVector(std::vector<int64_t>{2, -1, 0, 3, -1}).value();
  for (LossReduction r : {LossReduction::kMean, LossReduction::kSum}) {
    absl::Status s = GradCheck(
        [&](const std::vector<Tensor>& in) {
          return CrossEntropy(in[0], labels, {-1, r});
        },
        {x});
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(CrossEntropyOptionsTest, OtherLabelsAreStillChecked) {
  Tensor x = Logits(DType::kF32);
  // -100 is ignored by default, -1 is not.
  absl::StatusOr<Tensor> bad = CrossEntropy(
      x,
      Tensor::FromVector(std::vector<int64_t>{0, -100, -1, 0, 0, 0}).value());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("label at index 2 is -1"));
  // With ignore_index 3, -100 is an ordinary (bad) label.
  bad = CrossEntropy(
      x, Tensor::FromVector(std::vector<int64_t>{0, -100, 3, 0, 0, 0}).value(),
      {3, LossReduction::kMean});
  EXPECT_THAT(bad.status().message(), HasSubstr("label at index 1 is -100"));
  bad = CrossEntropy(x, Tensor::Zeros({6}, DType::kI64).value(),
                     {-100, static_cast<LossReduction>(7)});
  EXPECT_THAT(bad.status().message(),
              HasSubstr("reduction must be kMean or kSum, got 7"));
}

}  // namespace
}  // namespace tandem
