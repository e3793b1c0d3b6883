#include "tensor/optim/grad_scaler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "base/status_macros.h"
#include "tensor/ops.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"

namespace tandem::optim {
namespace {

using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Rig {
  Tensor w = Tensor::FromVector<float>({1.0f, 2.0f}, {2}).value();
  Sgd sgd;
  Rig() : sgd(Make(w)) {}
  static Sgd Make(Tensor& w) {
    EXPECT_TRUE(w.set_requires_grad(true).ok());
    return Sgd::Create({w}, /*lr=*/0.5).value();
  }
  // loss = sum(w * (1, 1)): dw = (1, 1); scaled: (scale, scale).
  absl::Status Backward(GradScaler& scaler, float poison = 0) {
    sgd.ZeroGrad();
    TANDEM_ASSIGN_OR_RETURN(Tensor loss, Sum(w));
    TANDEM_ASSIGN_OR_RETURN(Tensor scaled, scaler.Scale(loss));
    absl::Status s = scaled.Backward();
    if (!s.ok()) return s;
    if (poison != 0) w.grad().data<float>()[1] = poison;
    return absl::OkStatus();
  }
};

TEST(GradScalerTest, PyTorchDefaults) {
  GradScalerOptions o;
  EXPECT_EQ(o.init_scale, 65536.0);
  EXPECT_EQ(o.growth_factor, 2.0);
  EXPECT_EQ(o.backoff_factor, 0.5);
  EXPECT_EQ(o.growth_interval, 2000);
  GradScaler s = GradScaler::Create().value();
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(GradScalerTest, UnscaleStepAndSkip) {
  Rig t;
  GradScaler scaler = GradScaler::Create().value();
  ASSERT_TRUE(t.Backward(scaler).ok());
  EXPECT_EQ(t.w.grad().ToVector<float>().value(),
            (std::vector<float>{65536, 65536}));
  ASSERT_TRUE(scaler.Unscale(t.sgd).ok());
  EXPECT_EQ(t.w.grad().ToVector<float>().value(), (std::vector<float>{1, 1}));
  EXPECT_TRUE(scaler.Step(t.sgd).value());  // stepped: w -= 0.5 * 1
  EXPECT_EQ(t.w.ToVector<float>().value(), (std::vector<float>{0.5f, 1.5f}));
  ASSERT_TRUE(scaler.Update().ok());
  // An inf gradient: Step skips, weights unchanged, scale halves.
  ASSERT_TRUE(t.Backward(scaler, kInf).ok());
  EXPECT_FALSE(scaler.Step(t.sgd).value());
  EXPECT_TRUE(scaler.found_inf());
  EXPECT_EQ(t.w.ToVector<float>().value(), (std::vector<float>{0.5f, 1.5f}));
  ASSERT_TRUE(scaler.Update().ok());
  EXPECT_EQ(scaler.scale(), 32768.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(GradScalerTest, ScaleSequenceFollowsPyTorchsRule) {
  // A scripted sequence with growth_interval 3: the rule of
  // _amp_update_scale_ (backoff on inf and reset; grow after 3 finite).
  Rig t;
  GradScaler scaler =
      GradScaler::Create({.init_scale = 8.0, .growth_interval = 3}).value();
  const std::vector<bool> inf = {false, false, false, true,  false,
                                 true,  true,  false, false, false};
  std::vector<double> scales;
  std::vector<int64_t> trackers;
  double expected = 8.0;
  int64_t tracker = 0;
  for (bool i : inf) {
    ASSERT_TRUE(t.Backward(scaler, i ? std::nanf("") : 0).ok());
    ASSERT_TRUE(scaler.Step(t.sgd).ok());
    ASSERT_TRUE(scaler.Update().ok());
    if (i) {
      expected *= 0.5;
      tracker = 0;
    } else if (++tracker == 3) {
      expected *= 2.0;
      tracker = 0;
    }
    EXPECT_EQ(scaler.scale(), expected);
    EXPECT_EQ(scaler.growth_tracker(), tracker);
    scales.push_back(scaler.scale());
  }
  EXPECT_EQ(scales, (std::vector<double>{8, 8, 16, 8, 8, 4, 2, 2, 2, 4}));
}

TEST(GradScalerTest, MisuseIsFailedPrecondition) {
  Rig t;
  GradScaler scaler = GradScaler::Create().value();
  // Step without Scale.
  absl::StatusOr<bool> step = scaler.Step(t.sgd);
  EXPECT_EQ(step.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(step.status().message(), HasSubstr("without a Scale(loss)"));
  // Update with no inf check.
  ASSERT_TRUE(t.Backward(scaler).ok());
  EXPECT_EQ(scaler.Update().code(), absl::StatusCode::kFailedPrecondition);
  // Unscale twice.
  ASSERT_TRUE(scaler.Unscale(t.sgd).ok());
  absl::Status twice = scaler.Unscale(t.sgd);
  EXPECT_EQ(twice.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(twice.message(), HasSubstr("already been called"));
  // Gradients were unscaled exactly once.
  EXPECT_EQ(t.w.grad().ToVector<float>().value(), (std::vector<float>{1, 1}));
  ASSERT_TRUE(scaler.Step(t.sgd).ok());
  EXPECT_EQ(scaler.Step(t.sgd).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(scaler.Update().ok());
}

TEST(GradScalerTest, RefusesNonF32Parameters) {
  Tensor w = Tensor::FromVector<double>({1.0}, {1}).value();
  ASSERT_TRUE(w.set_requires_grad(true).ok());
  Sgd sgd = Sgd::Create({w}, 0.1).value();
  GradScaler scaler = GradScaler::Create().value();
  Tensor loss = Sum(w).value();
  ASSERT_TRUE(scaler.Scale(loss).value().Backward().ok());
  absl::StatusOr<bool> step = scaler.Step(sgd);
  EXPECT_EQ(step.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(step.status().message(), HasSubstr("f64"));
  EXPECT_EQ(w.ToVector<double>().value(), (std::vector<double>{1.0}));
}

TEST(GradScalerTest, DisabledIsAPassThrough) {
  Rig t;
  GradScaler scaler = GradScaler::Create({.enabled = false}).value();
  ASSERT_TRUE(t.Backward(scaler).ok());
  EXPECT_EQ(t.w.grad().ToVector<float>().value(), (std::vector<float>{1, 1}));
  EXPECT_TRUE(scaler.Step(t.sgd).value());
  ASSERT_TRUE(scaler.Update().ok());
  EXPECT_EQ(t.w.ToVector<float>().value(), (std::vector<float>{0.5f, 1.5f}));
  EXPECT_EQ(scaler.scale(), 65536.0);
}

TEST(GradScalerTest, CombinerDecidesForEveryRank) {
  // Another rank found an inf: the combiner says so, this rank skips too.
  Rig t;
  GradScaler scaler = GradScaler::Create().value();
  bool seen = true;
  scaler.set_found_inf_combiner([&](bool local) -> absl::StatusOr<bool> {
    seen = local;
    return true;
  });
  ASSERT_TRUE(t.Backward(scaler).ok());
  EXPECT_FALSE(scaler.Step(t.sgd).value());
  EXPECT_FALSE(seen);
  ASSERT_TRUE(scaler.Update().ok());
  EXPECT_EQ(scaler.scale(), 32768.0);
  EXPECT_EQ(t.w.ToVector<float>().value(), (std::vector<float>{1, 2}));
}

TEST(GradScalerTest, StateSaveAndLoad) {
  GradScaler a =
      GradScaler::Create({.init_scale = 4.0, .growth_interval = 5}).value();
  ASSERT_TRUE(a.LoadStateDict({.scale = 1024.0, .growth_tracker = 3}).ok());
  GradScalerState s = a.StateDict();
  EXPECT_EQ(s.scale, 1024.0);
  EXPECT_EQ(s.growth_tracker, 3);
  GradScaler b = GradScaler::Create().value();
  ASSERT_TRUE(b.LoadStateDict(s).ok());
  EXPECT_EQ(b.scale(), 1024.0);
  EXPECT_EQ(b.growth_tracker(), 3);
  EXPECT_EQ(b.LoadStateDict({.scale = -1}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GradScaler::Create({.backoff_factor = 1.5}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::optim
