// Strategy's full state (checkpoints): saved in one shard mode and
// world size, loaded in any other. On simulated ranks, Sgd with momentum and
// AdamW:
//   - the full optimizer state of zero1, zero2 and fsdp equals what DDP's
//     unsharded optimizer exports, bit for bit (the modes train the same
//     weights bit for bit, and Sgd and AdamW are elementwise);
//   - saved at 4 ranks and loaded at 2 and 3 (every mode into every mode),
//     the state reads back bit for bit;
//   - training on from a state saved at 4 ranks gives a straight 4-rank
//     run's weights bit for bit when resumed at 4 ranks in another mode, and
//     within 1e-5 (relative) at 2 and 3 ranks: there each rank averages a
//     larger share of the same global batch, so the gradient's rounding
//     differs (the sum is reassociated), a few ulps per step;
//   - a state that does not fit the model is an InvalidArgument naming the
//     entry and the parameter;
//   - local (no communication) trains DDP's one-rank weights and optimizer
//     state bit for bit, and refuses a world of two; fsdp refuses a model
//     that is not an nn::Sequential.
#include "train/parallel/strategy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
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
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kGlobalBatch = 12;  // divides by 2, 3 and 4

absl::StatusOr<std::unique_ptr<nn::Sequential>> Mlp() {
  Generator gen(7);
  auto model = std::make_unique<nn::Sequential>();
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(5, 7, gen)));
  TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(7, 3, gen)));
  return model;
}

enum class Opt { kSgd, kAdamW };

ShardOptimizerFactory Factory(Opt opt) {
  return [opt](std::vector<Tensor> params)
             -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
    if (opt == Opt::kSgd) {
      TANDEM_ASSIGN_OR_RETURN(
          optim::Sgd sgd,
          optim::Sgd::Create(std::move(params), 0.05, {.momentum = 0.9}));
      return std::make_unique<optim::Sgd>(std::move(sgd));
    }
    TANDEM_ASSIGN_OR_RETURN(
        optim::AdamW adam,
        optim::AdamW::Create(std::move(params), {.lr = 0.01}));
    return std::make_unique<optim::AdamW>(std::move(adam));
  };
}

// This rank's rows of step `step`'s global batch.
absl::StatusOr<Tensor> Batch(int step, int rank, int world) {
  Generator gen(500 + step);
  std::vector<float> all(kGlobalBatch * 5);
  gen.Uniform(all.data(), static_cast<int64_t>(all.size()), -1.f, 1.f);
  const int64_t rows = kGlobalBatch / world;
  std::vector<float> mine(all.begin() + rank * rows * 5,
                          all.begin() + (rank + 1) * rows * 5);
  return Tensor::FromVector(mine, {rows, 5});
}

absl::Status TrainSteps(Strategy& t, int first, int count, int rank,
                        int world) {
  for (int step = first; step < first + count; ++step) {
    t.ZeroGrad();
    TANDEM_ASSIGN_OR_RETURN(Tensor x, Batch(step, rank, world));
    TANDEM_ASSIGN_OR_RETURN(Tensor y, t.Forward(x));
    TANDEM_ASSIGN_OR_RETURN(Tensor sq, Mul(y, y));
    TANDEM_ASSIGN_OR_RETURN(Tensor loss, Mean(sq));
    TANDEM_RETURN_IF_ERROR(t.Backward(loss));
    TANDEM_RETURN_IF_ERROR(t.Step());
  }
  return absl::OkStatus();
}

// A full state as plain values, for comparisons.
struct Saved {
  std::vector<std::pair<std::string, std::vector<double>>> model;
  std::vector<std::pair<std::string, std::vector<double>>> optimizer;
  nn::StateDict model_tensors;
  std::vector<optim::StateEntry> optimizer_tensors;
};

absl::StatusOr<std::vector<double>> Values(const Tensor& t) {
  if (t.dtype() == DType::kI64) {
    TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> v, t.ToVector<int64_t>());
    return std::vector<double>(v.begin(), v.end());
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<float> v, t.ToVector<float>());
  return std::vector<double>(v.begin(), v.end());
}

absl::StatusOr<Saved> Capture(Strategy& t) {
  Saved s;
  TANDEM_ASSIGN_OR_RETURN(s.model_tensors, t.FullModelState());
  TANDEM_ASSIGN_OR_RETURN(s.optimizer_tensors, t.FullOptimizerState());
  for (const nn::NamedTensor& e : s.model_tensors) {
    TANDEM_ASSIGN_OR_RETURN(std::vector<double> v, Values(e.tensor));
    s.model.push_back({e.name, v});
  }
  for (const optim::StateEntry& e : s.optimizer_tensors) {
    TANDEM_ASSIGN_OR_RETURN(std::vector<double> v, Values(e.tensor));
    s.optimizer.push_back({e.name, v});
  }
  std::sort(s.optimizer.begin(), s.optimizer.end());
  return s;
}

// On `world` ranks in `mode`: loads `from` (if set), trains `count` steps
// from step `first`, and returns rank 0's full state.
absl::StatusOr<Saved> RunMode(ShardMode mode, int world, Opt opt,
                              const Saved* from, int first, int count) {
  Saved out;
  sim::RunResult r =
      sim::Run(world, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
        TANDEM_ASSIGN_OR_RETURN(
            auto t, Strategy::Create(mode, *model, comm, Factory(opt)));
        if (from != nullptr) {
          TANDEM_RETURN_IF_ERROR(
              t->LoadFullOptimizerState(from->optimizer_tensors));
          TANDEM_RETURN_IF_ERROR(t->LoadFullModelState(from->model_tensors));
        }
        TANDEM_RETURN_IF_ERROR(TrainSteps(*t, first, count, rank, world));
        TANDEM_ASSIGN_OR_RETURN(Saved s, Capture(*t));
        if (rank == 0) out = std::move(s);
        return absl::OkStatus();
      });
  TANDEM_RETURN_IF_ERROR(r.status());
  return out;
}

constexpr ShardMode kModes[] = {ShardMode::kNone, ShardMode::kZero1,
                                ShardMode::kZero2, ShardMode::kFsdp};

class FullStateTest : public ::testing::TestWithParam<Opt> {};

TEST_P(FullStateTest, EveryModesFullStateIsDdpsBitForBit) {
  for (int world : {1, 3, 4}) {
    absl::StatusOr<Saved> ddp =
        RunMode(ShardMode::kNone, world, GetParam(), nullptr, 0, 3);
    ASSERT_TRUE(ddp.ok()) << ddp.status();
    ASSERT_FALSE(ddp->optimizer.empty());
    for (ShardMode mode : kModes) {
      absl::StatusOr<Saved> s = RunMode(mode, world, GetParam(), nullptr, 0, 3);
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_EQ(s->model, ddp->model) << ShardModeName(mode) << " " << world;
      EXPECT_EQ(s->optimizer, ddp->optimizer)
          << ShardModeName(mode) << " " << world;
    }
  }
}

TEST_P(FullStateTest, SavedAtFourLoadsAtTwoAndThreeInEveryMode) {
  for (ShardMode save_mode : kModes) {
    absl::StatusOr<Saved> saved =
        RunMode(save_mode, 4, GetParam(), nullptr, 0, 2);
    ASSERT_TRUE(saved.ok()) << saved.status();
    absl::StatusOr<Saved> straight =
        RunMode(save_mode, 4, GetParam(), nullptr, 0, 4);
    ASSERT_TRUE(straight.ok()) << straight.status();
    for (ShardMode load_mode : kModes) {
      for (int world : {2, 3, 4}) {
        const std::string where =
            absl::StrCat(ShardModeName(save_mode), "@4 -> ",
                         ShardModeName(load_mode), "@", world);
        // Loaded and read back untouched.
        absl::StatusOr<Saved> back =
            RunMode(load_mode, world, GetParam(), &*saved, 2, 0);
        ASSERT_TRUE(back.ok()) << where << ": " << back.status();
        EXPECT_EQ(back->model, saved->model) << where;
        EXPECT_EQ(back->optimizer, saved->optimizer) << where;
        // Trained on: two more steps.
        absl::StatusOr<Saved> resumed =
            RunMode(load_mode, world, GetParam(), &*saved, 2, 2);
        ASSERT_TRUE(resumed.ok()) << where << ": " << resumed.status();
        if (world == 4) {
          EXPECT_EQ(resumed->model, straight->model) << where;
          EXPECT_EQ(resumed->optimizer, straight->optimizer) << where;
          continue;
        }
        ASSERT_EQ(resumed->model.size(), straight->model.size());
        for (size_t i = 0; i < resumed->model.size(); ++i) {
          const std::vector<double>& a = resumed->model[i].second;
          const std::vector<double>& b = straight->model[i].second;
          ASSERT_EQ(a.size(), b.size());
          for (size_t k = 0; k < a.size(); ++k) {
            EXPECT_NEAR(a[k], b[k], 1e-5 * std::max(1.0, std::abs(b[k])))
                << where << " " << resumed->model[i].first << "[" << k << "]";
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, FullStateTest,
                         ::testing::Values(Opt::kSgd, Opt::kAdamW),
                         [](const auto& info) {
                           return info.param == Opt::kSgd ? "SgdMomentum"
                                                          : "AdamW";
                         });

TEST(FullStateTest, AStateOfAnotherModelIsAClearError) {
  absl::StatusOr<Saved> saved =
      RunMode(ShardMode::kNone, 1, Opt::kAdamW, nullptr, 0, 1);
  ASSERT_TRUE(saved.ok()) << saved.status();
  for (ShardMode mode : {ShardMode::kZero1, ShardMode::kFsdp}) {
    sim::RunResult r =
        sim::Run(2, [&](int, comm::Communicator& comm) -> absl::Status {
          TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
          TANDEM_ASSIGN_OR_RETURN(
              auto t,
              Strategy::Create(mode, *model, comm, Factory(Opt::kAdamW)));
          std::vector<optim::StateEntry> state = saved->optimizer_tensors;
          // "2.exp_avg" (parameter 2 is "2.weight", 3 x 7) made 7 x 3.
          for (optim::StateEntry& e : state) {
            if (e.name == "2.exp_avg") {
              TANDEM_ASSIGN_OR_RETURN(e.tensor, Tensor::Zeros({7, 3}));
            }
          }
          absl::Status s = t->LoadFullOptimizerState(state);
          EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
          EXPECT_THAT(s.message(),
                      HasSubstr("entry \"2.exp_avg\" is f32[7, 3] but "
                                "parameter 2 (\"2.weight\") is f32[3, 7]"));
          state = saved->optimizer_tensors;
          state.push_back({"9.exp_avg", state.back().tensor});
          s = t->LoadFullOptimizerState(state);
          EXPECT_THAT(s.message(),
                      HasSubstr("names parameter 9 but the model has 4"));
          state = saved->optimizer_tensors;
          state.push_back({"0.velocity", state.back().tensor});
          s = t->LoadFullOptimizerState(state);
          EXPECT_THAT(s.message(), HasSubstr("has the key \"velocity\""));
          // Nothing was loaded: the optimizer still has no state.
          TANDEM_ASSIGN_OR_RETURN(std::vector<optim::StateEntry> now,
                                  t->FullOptimizerState());
          EXPECT_TRUE(now.empty());
          return absl::OkStatus();
        });
    EXPECT_TRUE(r.status().ok()) << r.status();
  }
}

TEST_P(FullStateTest, LocalIsOneRankDdpBitForBit) {
  absl::StatusOr<Saved> ddp =
      RunMode(ShardMode::kNone, 1, GetParam(), nullptr, 0, 3);
  ASSERT_TRUE(ddp.ok()) << ddp.status();
  absl::StatusOr<Saved> local =
      RunMode(ShardMode::kLocal, 1, GetParam(), nullptr, 0, 3);
  ASSERT_TRUE(local.ok()) << local.status();
  ASSERT_FALSE(local->optimizer.empty());
  EXPECT_EQ(local->model, ddp->model);
  EXPECT_EQ(local->optimizer, ddp->optimizer);
  // Loaded from a state saved under DDP and trained on: DDP's weights.
  absl::StatusOr<Saved> saved =
      RunMode(ShardMode::kNone, 1, GetParam(), nullptr, 0, 2);
  ASSERT_TRUE(saved.ok()) << saved.status();
  absl::StatusOr<Saved> resumed =
      RunMode(ShardMode::kLocal, 1, GetParam(), &*saved, 2, 1);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->model, ddp->model);
  EXPECT_EQ(resumed->optimizer, ddp->optimizer);
}

TEST(StrategyTest, LocalNeedsOneRank) {
  sim::RunResult r =
      sim::Run(2, [&](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
        absl::StatusOr<std::unique_ptr<Strategy>> t = Strategy::Create(
            ShardMode::kLocal, *model, comm, Factory(Opt::kSgd));
        EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(t.status().message(),
                    HasSubstr("needs a world of one rank; found 2 ranks"));
        return absl::OkStatus();
      });
  EXPECT_TRUE(r.status().ok()) << r.status();
}

// A module that holds its layers instead of being an nn::Sequential.
class Wrapped : public nn::Module {
 public:
  absl::StatusOr<Tensor> Forward(const Tensor& input) override { return input; }
  std::string_view type_name() const override { return "Wrapped"; }
};

TEST(StrategyTest, FsdpNeedsASequential) {
  sim::RunResult r =
      sim::Run(2, [&](int, comm::Communicator& comm) -> absl::Status {
        Wrapped model;
        absl::StatusOr<std::unique_ptr<Strategy>> t =
            Strategy::Create(ShardMode::kFsdp, model, comm, Factory(Opt::kSgd));
        EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(t.status().message(),
                    HasSubstr("nn::Sequential; the model is a Wrapped"));
        return absl::OkStatus();
      });
  EXPECT_TRUE(r.status().ok()) << r.status();
}

// A module whose layers live in a Sequential registered as "body".
class Holder : public nn::Module {
 public:
  absl::Status Init() {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> body, Mlp());
    TANDEM_ASSIGN_OR_RETURN(body_, RegisterModule("body", std::move(body)));
    return absl::OkStatus();
  }
  absl::StatusOr<Tensor> Forward(const Tensor& input) override {
    return body_->Forward(input);
  }
  std::string_view type_name() const override { return "Holder"; }

 private:
  nn::Sequential* body_ = nullptr;  // owned by the Module base
};

// StrategyOptions reach the wrappers: FSDP's units and gathered dtype, DDP's
// comm hook (each field would be lost silently otherwise: the defaults
// work too).
TEST(StrategyTest, OptionsReachTheWrappers) {
  sim::RunResult r =
      sim::Run(2, [&](int, comm::Communicator& comm) -> absl::Status {
        Holder fsdp_model;
        TANDEM_RETURN_IF_ERROR(fsdp_model.Init());
        TANDEM_ASSIGN_OR_RETURN(
            auto fsdp, Strategy::Create(ShardMode::kFsdp, fsdp_model, comm,
                                        Factory(Opt::kSgd),
                                        {.fsdp_param_dtype = DType::kBF16,
                                         .fsdp_unit_layers = "body"}));
        std::vector<int64_t> layers;
        for (const FsdpUnitInfo& unit : fsdp->fsdp()->units()) {
          layers.push_back(unit.layer);
          EXPECT_EQ(unit.compute_dtype, DType::kBF16);
        }
        EXPECT_EQ(layers, (std::vector<int64_t>{0, 2}));  // the two Linears

        TANDEM_ASSIGN_OR_RETURN(auto ddp_model, Mlp());
        StrategyOptions bf16_hook;  // field by field: see StrategyOptions
        bf16_hook.comm_hook = DdpCommHook::kBf16Compress;
        TANDEM_ASSIGN_OR_RETURN(
            auto ddp, Strategy::Create(ShardMode::kZero1, *ddp_model, comm,
                                       Factory(Opt::kSgd), bf16_hook));
        EXPECT_EQ(ddp->ddp()->options().comm_hook, DdpCommHook::kBf16Compress);
        return absl::OkStatus();
      });
  EXPECT_TRUE(r.status().ok()) << r.status();
}

TEST(StrategyTest, ModeNames) {
  EXPECT_EQ(ShardModeName(ShardMode::kLocal), "local");
  // local is chosen by code, not by --shard.
  EXPECT_FALSE(ParseShardMode("local").ok());
  EXPECT_EQ(*ParseShardMode("ddp"), ShardMode::kNone);
  for (ShardMode mode : kModes) {
    absl::StatusOr<ShardMode> back = ParseShardMode(ShardModeName(mode));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, mode);
  }
}

}  // namespace
}  // namespace tandem::train
