// FullyShardedDataParallel against DDP with a full optimizer on every rank,
// on the simulated cluster: the same weights bit for bit after several steps
// of Sgd with momentum and of AdamW at world sizes 1, 2, 3, 4 and 8, on a
// model of three units (42, 48 and 21 elements: none divides by 4 or 8).
// Bitwise, because the arithmetic is the same: forward and backward run on
// the same parameter values, the gradient average is DDP's (pre-scaled sum
// or kAvg, summed in rank order; a reduce-scatter slice sums what the
// all-reduce sums), and Sgd and AdamW are elementwise. Also: the N -> M
// checkpoint, the bad inputs of the issue, and what lives between steps.
#include "train/parallel/sharded/fsdp.h"

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
#include "train/parallel/ddp/ddp.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

constexpr int kSteps = 3;
constexpr int64_t kNumel = 42 + 48 + 21;

absl::StatusOr<std::unique_ptr<nn::Sequential>> Mlp() {
  Generator gen(11);
  auto model = std::make_unique<nn::Sequential>();
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(5, 7, gen)));
  TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(7, 6, gen)));
  TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(6, 3, gen)));
  return model;
}

absl::StatusOr<Tensor> Features(int64_t rows, int64_t in, uint64_t seed) {
  Generator gen(seed);
  std::vector<float> values(rows * in);
  gen.Uniform(values.data(), rows * in, -1.f, 1.f);
  return Tensor::FromVector(values, {rows, in});
}

absl::StatusOr<Tensor> Loss(const Tensor& y) {
  TANDEM_ASSIGN_OR_RETURN(Tensor sq, Mul(y, y));
  return Mean(sq);
}

enum class Opt { kSgdMomentum, kAdamW };

absl::StatusOr<std::unique_ptr<optim::Optimizer>> MakeOptimizer(
    Opt opt, std::vector<Tensor> params) {
  if (opt == Opt::kSgdMomentum) {
    TANDEM_ASSIGN_OR_RETURN(
        optim::Sgd sgd,
        optim::Sgd::Create(std::move(params), 0.05,
                           {.momentum = 0.9, .weight_decay = 1e-3}));
    return std::make_unique<optim::Sgd>(std::move(sgd));
  }
  TANDEM_ASSIGN_OR_RETURN(
      optim::AdamW adam, optim::AdamW::Create(std::move(params), {.lr = 0.01}));
  return std::make_unique<optim::AdamW>(std::move(adam));
}

absl::StatusOr<std::vector<float>> Concat(const nn::StateDict& state) {
  std::vector<float> out;
  for (const nn::NamedTensor& e : state) {
    TANDEM_ASSIGN_OR_RETURN(std::vector<float> v, e.tensor.ToVector<float>());
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// kSteps steps on `world` ranks; every rank's final parameters.
absl::StatusOr<std::vector<std::vector<float>>> Train(int world, bool fsdp,
                                                      Opt opt,
                                                      bool prefetch = true) {
  std::vector<std::vector<float>> out(world);
  sim::RunResult result =
      sim::Run(world, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
        std::unique_ptr<DistributedDataParallel> ddp;
        std::unique_ptr<FullyShardedDataParallel> sharded;
        std::unique_ptr<optim::Optimizer> optimizer;
        if (fsdp) {
          TANDEM_ASSIGN_OR_RETURN(sharded,
                                  FullyShardedDataParallel::Create(
                                      *model, comm, {.prefetch = prefetch}));
          TANDEM_ASSIGN_OR_RETURN(
              optimizer, MakeOptimizer(opt, sharded->ShardParameters()));
        } else {
          TANDEM_ASSIGN_OR_RETURN(
              ddp, DistributedDataParallel::Create(*model, comm));
          TANDEM_ASSIGN_OR_RETURN(optimizer,
                                  MakeOptimizer(opt, model->Parameters()));
        }
        for (int step = 0; step < kSteps; ++step) {
          optimizer->ZeroGrad();
          TANDEM_ASSIGN_OR_RETURN(Tensor x,
                                  Features(4, 5, 1000 + 10 * step + rank));
          TANDEM_ASSIGN_OR_RETURN(Tensor y,
                                  fsdp ? sharded->Forward(x) : ddp->Forward(x));
          TANDEM_ASSIGN_OR_RETURN(Tensor loss, Loss(y));
          TANDEM_RETURN_IF_ERROR(fsdp ? sharded->Backward(loss)
                                      : ddp->Backward(loss));
          TANDEM_RETURN_IF_ERROR(optimizer->Step());
        }
        nn::StateDict state;
        if (fsdp) {
          TANDEM_ASSIGN_OR_RETURN(state, sharded->FullStateDict());
        } else {
          state = model->StateDict();
        }
        TANDEM_ASSIGN_OR_RETURN(out[rank], Concat(state));
        return absl::OkStatus();
      });
  TANDEM_RETURN_IF_ERROR(result.status());
  return out;
}

class FsdpEquivalenceTest
    : public ::testing::TestWithParam<std::tuple<int, Opt>> {};

TEST_P(FsdpEquivalenceTest, SameWeightsAsDdpBitForBit) {
  const auto [world, opt] = GetParam();
  absl::StatusOr<std::vector<std::vector<float>>> ddp =
      Train(world, /*fsdp=*/false, opt);
  ASSERT_TRUE(ddp.ok()) << ddp.status();
  absl::StatusOr<std::vector<std::vector<float>>> fsdp =
      Train(world, /*fsdp=*/true, opt);
  ASSERT_TRUE(fsdp.ok()) << fsdp.status();
  ASSERT_EQ((*ddp)[0].size(), static_cast<size_t>(kNumel));
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ((*fsdp)[r], (*ddp)[0]) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, FsdpEquivalenceTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                                            ::testing::Values(Opt::kSgdMomentum,
                                                              Opt::kAdamW)),
                         [](const auto& info) {
                           return absl::StrCat(
                               "world", std::get<0>(info.param),
                               std::get<1>(info.param) == Opt::kAdamW ? "_adamw"
                                                                      : "_sgd");
                         });

TEST(FsdpTest, RanksWithDifferentModelsFailByName) {
  sim::RunResult result =
      sim::Run(3, [](int rank, comm::Communicator& comm) -> absl::Status {
        Generator gen(11);
        nn::Sequential model;
        TANDEM_RETURN_IF_ERROR(
            model.Append(nn::Linear::Create(5, rank == 1 ? 8 : 7, gen)));
        return FullyShardedDataParallel::Create(model, comm).status();
      });
  ASSERT_TRUE(result.launch.ok()) << result.launch;
  for (const absl::Status& s : result.ranks) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("FullyShardedDataParallel (reported on rank"));
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("parameter 0 is \"0.weight\" f32[7, 5] on rank 0 "
                          "but \"0.weight\" f32[8, 5] on rank 1"));
  }
}

TEST(FsdpTest, WithoutPrefetchTheSameWeights) {
  absl::StatusOr<std::vector<std::vector<float>>> on =
      Train(3, true, Opt::kAdamW, /*prefetch=*/true);
  absl::StatusOr<std::vector<std::vector<float>>> off =
      Train(3, true, Opt::kAdamW, /*prefetch=*/false);
  ASSERT_TRUE(on.ok()) << on.status();
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(*on, *off);
}

TEST(FsdpTest, ShardsAreOneNthAndParametersHoldNoMemoryBetweenSteps) {
  sim::RunResult result =
      sim::Run(4, [&](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
        TANDEM_ASSIGN_OR_RETURN(auto fsdp,
                                FullyShardedDataParallel::Create(*model, comm));
        EXPECT_EQ(fsdp->units().size(), 3u);
        std::vector<int64_t> shards;
        for (const Tensor& s : fsdp->ShardParameters()) {
          shards.push_back(s.numel());
        }
        EXPECT_EQ(shards, (std::vector<int64_t>{11, 12, 6}));  // ceil(n / 4)
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Features(2, 5, 3));
        TANDEM_ASSIGN_OR_RETURN(Tensor y, fsdp->Forward(x));
        TANDEM_ASSIGN_OR_RETURN(Tensor loss, Loss(y));
        TANDEM_RETURN_IF_ERROR(fsdp->Backward(loss));
        for (const Tensor& p : model->Parameters()) {
          EXPECT_FALSE(p.storage()->is_allocated());
          EXPECT_FALSE(p.has_grad());
        }
        for (const Tensor& s : fsdp->ShardParameters()) {
          EXPECT_TRUE(s.has_grad());
        }
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.status().ok()) << result.status();
}

TEST(FsdpTest, CheckpointSavedOnTwoRanksLoadsOnThree) {
  nn::StateDict saved;
  sim::RunResult two =
      sim::Run(2, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
        TANDEM_ASSIGN_OR_RETURN(auto fsdp,
                                FullyShardedDataParallel::Create(*model, comm));
        TANDEM_ASSIGN_OR_RETURN(
            auto opt, MakeOptimizer(Opt::kAdamW, fsdp->ShardParameters()));
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Features(2, 5, 40 + rank));
        TANDEM_ASSIGN_OR_RETURN(Tensor y, fsdp->Forward(x));
        TANDEM_ASSIGN_OR_RETURN(Tensor loss, Loss(y));
        TANDEM_RETURN_IF_ERROR(fsdp->Backward(loss));
        TANDEM_RETURN_IF_ERROR(opt->Step());
        TANDEM_ASSIGN_OR_RETURN(nn::StateDict state, fsdp->FullStateDict());
        if (rank == 0) saved = state;
        return absl::OkStatus();
      });
  ASSERT_TRUE(two.status().ok()) << two.status();
  ASSERT_EQ(saved.size(), 6u);
  EXPECT_EQ(saved[0].name, "0.weight");
  absl::StatusOr<std::vector<float>> expected = Concat(saved);
  ASSERT_TRUE(expected.ok());
  sim::RunResult three =
      sim::Run(3, [&](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
        TANDEM_ASSIGN_OR_RETURN(auto fsdp,
                                FullyShardedDataParallel::Create(*model, comm));
        TANDEM_RETURN_IF_ERROR(fsdp->LoadFullStateDict(saved));
        TANDEM_ASSIGN_OR_RETURN(nn::StateDict state, fsdp->FullStateDict());
        TANDEM_ASSIGN_OR_RETURN(std::vector<float> got, Concat(state));
        EXPECT_EQ(got, *expected);
        nn::StateDict bad = saved;
        bad.pop_back();
        absl::Status missing = fsdp->LoadFullStateDict(bad);
        EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(missing.message(), HasSubstr("has no \"4.bias\""));
        return absl::OkStatus();
      });
  ASSERT_TRUE(three.status().ok()) << three.status();
}

// A layer whose two parameters differ in dtype.
class MixedLayer : public nn::Module {
 public:
  static absl::StatusOr<std::unique_ptr<MixedLayer>> Create() {
    auto m = std::unique_ptr<MixedLayer>(new MixedLayer());
    TANDEM_ASSIGN_OR_RETURN(Tensor a, Tensor::Zeros({2}, DType::kF32));
    TANDEM_ASSIGN_OR_RETURN(Tensor b, Tensor::Zeros({2}, DType::kF64));
    TANDEM_RETURN_IF_ERROR(m->RegisterParameter("a", a));
    TANDEM_RETURN_IF_ERROR(m->RegisterParameter("b", b));
    return m;
  }
  absl::StatusOr<Tensor> Forward(const Tensor& input) override { return input; }
  std::string_view type_name() const override { return "MixedLayer"; }
};

TEST(FsdpTest, BadInputsAreClearErrors) {
  sim::RunResult result =
      sim::Run(2, [&](int, comm::Communicator& comm) -> absl::Status {
        nn::Sequential mixed;
        TANDEM_RETURN_IF_ERROR(mixed.Append(MixedLayer::Create()));
        auto m = FullyShardedDataParallel::Create(mixed, comm);
        EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(m.status().message(), HasSubstr("unit 0 mixes parameters"));
        EXPECT_THAT(m.status().message(), HasSubstr("\"0.b\" is f64"));

        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
        TANDEM_ASSIGN_OR_RETURN(auto fsdp,
                                FullyShardedDataParallel::Create(*model, comm));
        auto twice = FullyShardedDataParallel::Create(*model, comm);
        EXPECT_EQ(twice.status().code(), absl::StatusCode::kFailedPrecondition);
        EXPECT_THAT(twice.status().message(), HasSubstr("already wrapped"));

        TANDEM_ASSIGN_OR_RETURN(Tensor x, Features(2, 5, 3));
        TANDEM_ASSIGN_OR_RETURN(Tensor loss0, Features(1, 1, 3));
        absl::Status early = fsdp->Backward(loss0);
        EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition);
        EXPECT_THAT(early.message(), HasSubstr("without a grad-mode Forward"));

        // A parameter given new memory after wrapping.
        TANDEM_ASSIGN_OR_RETURN(Tensor fresh, Tensor::Zeros({3}));
        TANDEM_RETURN_IF_ERROR(model->Parameters().back().SetData(fresh));
        auto changed = fsdp->Forward(x);
        EXPECT_EQ(changed.status().code(),
                  absl::StatusCode::kFailedPrecondition);
        EXPECT_THAT(changed.status().message(),
                    HasSubstr("\"4.bias\" no longer views"));
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.status().ok()) << result.status();
}

// The virtual world's calls: refused outside it; inside it, a fold needs
// a backward first, FinishVirtualStep needs every virtual rank folded, and
// the norm is the 2-norm only.
TEST(FsdpTest, VirtualWorldCallsInTheirOrderOnly) {
  sim::RunResult result =
      sim::Run(2, [](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto plain_model, Mlp());
        TANDEM_ASSIGN_OR_RETURN(
            auto plain, FullyShardedDataParallel::Create(*plain_model, comm));
        EXPECT_THAT(plain->FoldVirtualRank().message(),
                    HasSubstr("outside the virtual world"));
        EXPECT_EQ(plain->FinishVirtualStep().code(),
                  absl::StatusCode::kFailedPrecondition);

        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
        TANDEM_ASSIGN_OR_RETURN(
            auto fsdp, FullyShardedDataParallel::Create(*model, comm,
                                                        {.virtual_world = 4}));
        EXPECT_THAT(fsdp->FoldVirtualRank().message(),
                    HasSubstr("has no gradient to fold"));
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Features(4, 5, 3));
        TANDEM_ASSIGN_OR_RETURN(Tensor y, fsdp->Forward(x));
        TANDEM_ASSIGN_OR_RETURN(Tensor loss, Loss(y));
        TANDEM_RETURN_IF_ERROR(fsdp->Backward(loss));
        TANDEM_RETURN_IF_ERROR(fsdp->FoldVirtualRank());
        // One of this rank's two virtual ranks folded: the sum is not complete.
        EXPECT_EQ(fsdp->FinishVirtualStep().code(),
                  absl::StatusCode::kFailedPrecondition);
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.status().ok()) << result.status();
}

}  // namespace
}  // namespace tandem::train
