// Param-group weight decay on flat shards (shard_weight_decay.h) through
// Strategy: nanoGPT's groups (decay on weights, none on biases) under
// zero1, zero2 and fsdp at 1, 2 and 3 ranks (shards that straddle a weight
// and a bias). With zero gradients AdamW's step is its decay alone, so each
// weight must come back exactly p * (1 - lr * wd) and each bias unchanged
// bit for bit: a bias decayed, or a weight not, fails. Also the groups the
// shards cannot follow (different lr) refused.
#include "train/parallel/sharded/shard_weight_decay.h"

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/ops.h"
#include "tensor/optim/adamw.h"
#include "tensor/optim/param_groups.h"
#include "tensor/tensor.h"
#include "train/parallel/strategy.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

constexpr double kLr = 0.1;
constexpr double kDecay = 0.5;

absl::StatusOr<std::unique_ptr<nn::Sequential>> Mlp() {
  Generator gen(7);
  auto model = std::make_unique<nn::Sequential>();
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(5, 7, gen)));
  TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(7, 3, gen)));
  return model;
}

// nanoGPT's two groups over the tensors given (decay on >= 2 dims); with
// `bias_lr`, the no-decay group gets a learning rate of its own.
ShardOptimizerFactory Groups(double bias_lr = kLr) {
  return [bias_lr](std::vector<Tensor> params)
             -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
    std::vector<optim::AdamWParamGroup> groups =
        optim::WeightDecayGroups(std::move(params), kDecay);
    groups[1].lr = bias_lr;
    TANDEM_ASSIGN_OR_RETURN(
        optim::AdamW adam,
        optim::AdamW::Create(std::move(groups), {.lr = kLr}));
    return std::make_unique<optim::AdamW>(std::move(adam));
  };
}

class ShardWeightDecayTest
    : public ::testing::TestWithParam<std::tuple<ShardMode, int>> {};

TEST_P(ShardWeightDecayTest, WeightsDecayBiasesDoNot) {
  const auto [mode, world] = GetParam();
  sim::RunResult r =
      sim::Run(world, [mode](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
        nn::StateDict before;
        TANDEM_ASSIGN_OR_RETURN(before, nn::CloneStateDict(model->StateDict()));
        TANDEM_ASSIGN_OR_RETURN(auto t,
                                Strategy::Create(mode, *model, comm, Groups()));
        t->ZeroGrad();
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Tensor::Ones({4, 5}));
        TANDEM_ASSIGN_OR_RETURN(Tensor y, t->Forward(x));
        TANDEM_ASSIGN_OR_RETURN(Tensor sum, Sum(y));
        TANDEM_ASSIGN_OR_RETURN(Tensor loss, Mul(sum, 0.0));  // zero gradients
        TANDEM_RETURN_IF_ERROR(t->Backward(loss));
        TANDEM_RETURN_IF_ERROR(t->Step());
        TANDEM_ASSIGN_OR_RETURN(nn::StateDict after, t->FullModelState());
        EXPECT_EQ(after.size(), before.size());
        const float factor = static_cast<float>(1 - kLr * kDecay);
        for (size_t k = 0; k < before.size() && k < after.size(); ++k) {
          TANDEM_ASSIGN_OR_RETURN(std::vector<float> want,
                                  before[k].tensor.ToVector<float>());
          const bool decayed = before[k].tensor.ndim() >= 2;
          if (decayed) {
            for (float& v : want) v *= factor;
          }
          TANDEM_ASSIGN_OR_RETURN(std::vector<float> got,
                                  after[k].tensor.ToVector<float>());
          EXPECT_EQ(got, want)
              << before[k].name << (decayed ? " (decayed)" : " (not decayed)");
        }
        // The checkpoint's groups are the model's two, as DDP's optimizer has.
        if (mode == ShardMode::kNone) return absl::OkStatus();
        const std::vector<optim::ParamGroupState> groups = t->FullParamGroups();
        EXPECT_EQ(groups.size(), 2u);
        if (groups.size() == 2) {
          EXPECT_EQ(groups[0].params, (std::vector<int64_t>{0, 1}));
          EXPECT_EQ(groups[0].options.at("weight_decay"), kDecay);
          EXPECT_EQ(groups[1].options.at("weight_decay"), 0.0);
        }
        return absl::OkStatus();
      });
  ASSERT_TRUE(r.status().ok()) << r.status();
}

INSTANTIATE_TEST_SUITE_P(
    Modes, ShardWeightDecayTest,
    ::testing::Combine(::testing::Values(ShardMode::kNone, ShardMode::kZero1,
                                         ShardMode::kZero2, ShardMode::kFsdp),
                       ::testing::Values(1, 2, 3)));

TEST(ShardWeightDecayRefusalTest, GroupsThatDifferInLrAreRefused) {
  sim::RunResult r = sim::Run(2, [](int, comm::Communicator& comm) {
    TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
    absl::StatusOr<std::unique_ptr<Strategy>> t = Strategy::Create(
        ShardMode::kZero2, *model, comm, Groups(/*bias_lr=*/0.5));
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(t.status().message(),
                HasSubstr("may differ only in weight_decay"));
    return absl::OkStatus();
  });
  ASSERT_TRUE(r.status().ok()) << r.status();
}

}  // namespace
}  // namespace tandem::train
