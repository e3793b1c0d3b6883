// ZeroRedundancyOptimizer (ZeRO stages 1 and 2) against DDP with a full
// optimizer on every rank, on the simulated cluster: the same weights bit for
// bit after several steps of Sgd with momentum and of AdamW, at world sizes
// 1, 2, 3, 4 and 8, on a model whose parameter count (66) divides by none of
// 4 and 8 and whose first bucket (3 elements) is smaller than 8 ranks.
// Bitwise, because the arithmetic is the same: the gradients are averaged by
// the same reduction in the same rank order (a reduce-scatter slice sums what
// the all-reduce sums), and Sgd and AdamW are elementwise, so stepping a
// slice computes each element exactly as stepping the whole tensor does.
#include "train/parallel/sharded/zero_optimizer.h"

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

absl::StatusOr<std::unique_ptr<nn::Sequential>> Mlp(int64_t in, int64_t hidden,
                                                    int64_t out) {
  Generator gen(7);
  auto model = std::make_unique<nn::Sequential>();
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(in, hidden, gen)));
  TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(hidden, out, gen)));
  return model;
}

absl::StatusOr<Tensor> Features(int64_t rows, int64_t in, uint64_t seed) {
  Generator gen(seed);
  std::vector<float> values(rows * in);
  gen.Uniform(values.data(), rows * in, -1.f, 1.f);
  return Tensor::FromVector(values, {rows, in});
}

enum class Opt { kSgdMomentum, kAdamW };
enum class Mode { kDdp, kZero1, kZero2 };

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

struct RunOutput {
  std::vector<std::vector<float>> params;  // per rank, all concatenated
  std::vector<int64_t> shard_numel;        // per rank (ZeRO only)
};

// kSteps steps of `mode` on `world` sim ranks; each rank its own batch.
absl::StatusOr<RunOutput> Train(int world, Mode mode, Opt opt,
                                int64_t hidden = 7) {
  RunOutput out;
  out.params.resize(world);
  out.shard_numel.resize(world);
  sim::RunResult result =
      sim::Run(world, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp(5, hidden, 3));
        DdpOptions options;
        options.first_bucket_cap_bytes = 64;  // two buckets: 3 + 63 elements
        options.bucket_cap_bytes = 256;
        TANDEM_ASSIGN_OR_RETURN(
            auto ddp, DistributedDataParallel::Create(*model, comm, options));
        std::unique_ptr<optim::Optimizer> full;
        std::unique_ptr<ZeroRedundancyOptimizer> zero;
        if (mode == Mode::kDdp) {
          TANDEM_ASSIGN_OR_RETURN(full,
                                  MakeOptimizer(opt, model->Parameters()));
        } else {
          TANDEM_ASSIGN_OR_RETURN(
              zero, ZeroRedundancyOptimizer::Create(
                        *ddp,
                        [opt](std::vector<Tensor> shards) {
                          return MakeOptimizer(opt, std::move(shards));
                        },
                        {.reduce_scatter_gradients = mode == Mode::kZero2}));
          out.shard_numel[rank] = zero->shard_numel();
        }
        for (int step = 0; step < kSteps; ++step) {
          if (zero) {
            zero->ZeroGrad();
          } else {
            model->ZeroGrad();
          }
          TANDEM_ASSIGN_OR_RETURN(Tensor x,
                                  Features(4, 5, 1000 + 10 * step + rank));
          TANDEM_ASSIGN_OR_RETURN(Tensor y, ddp->Forward(x));
          TANDEM_ASSIGN_OR_RETURN(Tensor sq, Mul(y, y));
          TANDEM_ASSIGN_OR_RETURN(Tensor loss, Mean(sq));
          TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));
          TANDEM_RETURN_IF_ERROR(zero ? zero->Step() : full->Step());
        }
        for (const Tensor& p : model->Parameters()) {
          TANDEM_ASSIGN_OR_RETURN(std::vector<float> v, p.ToVector<float>());
          out.params[rank].insert(out.params[rank].end(), v.begin(), v.end());
        }
        return absl::OkStatus();
      });
  TANDEM_RETURN_IF_ERROR(result.status());
  return out;
}

class ZeroEquivalenceTest
    : public ::testing::TestWithParam<std::tuple<int, Mode, Opt>> {};

TEST_P(ZeroEquivalenceTest, SameWeightsAsDdpBitForBit) {
  const auto [world, mode, opt] = GetParam();
  absl::StatusOr<RunOutput> ddp = Train(world, Mode::kDdp, opt);
  ASSERT_TRUE(ddp.ok()) << ddp.status();
  absl::StatusOr<RunOutput> zero = Train(world, mode, opt);
  ASSERT_TRUE(zero.ok()) << zero.status();
  int64_t owned = 0;
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(ddp->params[r].size(), 66u);
    EXPECT_EQ(zero->params[r], ddp->params[0]) << "rank " << r;
    owned += zero->shard_numel[r];
  }
  // The shards cover the parameters exactly once.
  EXPECT_EQ(owned, 66);
}

INSTANTIATE_TEST_SUITE_P(
    WorldSizes, ZeroEquivalenceTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                       ::testing::Values(Mode::kZero1, Mode::kZero2),
                       ::testing::Values(Opt::kSgdMomentum, Opt::kAdamW)),
    [](const auto& info) {
      return absl::StrCat(
          "world", std::get<0>(info.param),
          std::get<1>(info.param) == Mode::kZero1 ? "_zero1" : "_zero2",
          std::get<2>(info.param) == Opt::kAdamW ? "_adamw" : "_sgd");
    });

TEST(ZeroRedundancyOptimizerTest, StateIsOneNthPerRankAndEmptyRanksStillJoin) {
  // 5*1 + 1 + 1*3 + 3 = 12 elements in two buckets (3 and 9) over 8 ranks:
  // shards of 1 and 2; ranks 3.. own nothing of bucket 0, rank 7 nothing of
  // bucket 1 (9 = 4 * 2 + 1: ranks 0-3 two, rank 4 one).
  constexpr int kWorld = 8;
  std::vector<int64_t> state(kWorld, -1);
  std::vector<int64_t> shard(kWorld, -1);
  // char, not bool: ranks write their own element from their own thread
  // (std::vector<bool> packs bits, a data race under TSan).
  std::vector<char> has_optimizer(kWorld, 0);
  sim::RunResult result =
      sim::Run(kWorld, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp(5, 1, 3));
        DdpOptions options;
        options.first_bucket_cap_bytes = 12;
        options.bucket_cap_bytes = 256;
        TANDEM_ASSIGN_OR_RETURN(
            auto ddp, DistributedDataParallel::Create(*model, comm, options));
        TANDEM_ASSIGN_OR_RETURN(auto zero,
                                ZeroRedundancyOptimizer::Create(
                                    *ddp, [](std::vector<Tensor> shards) {
                                      return MakeOptimizer(Opt::kSgdMomentum,
                                                           std::move(shards));
                                    }));
        EXPECT_EQ(zero->stage(), 1);
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Features(2, 5, 5 + rank));
        TANDEM_ASSIGN_OR_RETURN(Tensor y, ddp->Forward(x));
        TANDEM_ASSIGN_OR_RETURN(Tensor loss, Mean(y));
        TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));
        TANDEM_RETURN_IF_ERROR(zero->Step());
        shard[rank] = zero->shard_numel();
        has_optimizer[rank] = zero->local_optimizer() != nullptr;
        int64_t buffers = 0;
        if (auto* sgd = dynamic_cast<optim::Sgd*>(zero->local_optimizer())) {
          for (size_t i = 0; i < sgd->params().size(); ++i) {
            buffers += sgd->momentum_buffer(i).numel();
          }
        }
        state[rank] = buffers;
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.status().ok()) << result.status();
  const std::vector<int64_t> expected = {3, 3, 3, 2, 1, 0, 0, 0};
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(shard[r], expected[r]) << "rank " << r;
    EXPECT_EQ(state[r], expected[r]) << "rank " << r;  // momentum: 1/N only
    EXPECT_EQ(has_optimizer[r] != 0, expected[r] > 0) << "rank " << r;
  }
}

TEST(ZeroRedundancyOptimizerTest, StageTwoKeepsOnlyGradientShardsBetweenSteps) {
  sim::RunResult result =
      sim::Run(2, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp(5, 7, 3));
        TANDEM_ASSIGN_OR_RETURN(auto ddp,
                                DistributedDataParallel::Create(*model, comm));
        TANDEM_ASSIGN_OR_RETURN(auto zero,
                                ZeroRedundancyOptimizer::Create(
                                    *ddp,
                                    [](std::vector<Tensor> shards) {
                                      return MakeOptimizer(Opt::kAdamW,
                                                           std::move(shards));
                                    },
                                    {.reduce_scatter_gradients = true}));
        EXPECT_EQ(zero->stage(), 2);
        for (int step = 0; step < 2; ++step) {
          zero->ZeroGrad();
          TANDEM_ASSIGN_OR_RETURN(Tensor x, Features(2, 5, 5 + rank));
          TANDEM_ASSIGN_OR_RETURN(Tensor y, ddp->Forward(x));
          EXPECT_TRUE(ddp->buckets()[0].flat.storage()->is_allocated());
          TANDEM_ASSIGN_OR_RETURN(Tensor loss, Mean(y));
          TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));
          TANDEM_RETURN_IF_ERROR(zero->Step());
          EXPECT_FALSE(ddp->buckets()[0].flat.storage()->is_allocated());
          for (const Tensor& p : model->Parameters()) {
            EXPECT_FALSE(p.has_grad());
          }
          EXPECT_EQ(zero->local_optimizer()->params()[0].grad().numel(), 33);
        }
        absl::Status twice = zero->Step();
        EXPECT_EQ(twice.code(), absl::StatusCode::kFailedPrecondition);
        EXPECT_THAT(twice.message(), HasSubstr("Step called twice"));
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.status().ok()) << result.status();
}

TEST(ZeroRedundancyOptimizerTest, ParametersBecomeViewsOfTheFlatBuffers) {
  sim::RunResult result =
      sim::Run(2, [&](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp(5, 7, 3));
        TANDEM_ASSIGN_OR_RETURN(std::vector<float> before,
                                model->Parameters()[0].ToVector<float>());
        TANDEM_ASSIGN_OR_RETURN(auto ddp,
                                DistributedDataParallel::Create(*model, comm));
        TANDEM_ASSIGN_OR_RETURN(auto zero,
                                ZeroRedundancyOptimizer::Create(
                                    *ddp, [](std::vector<Tensor> shards) {
                                      return MakeOptimizer(Opt::kAdamW,
                                                           std::move(shards));
                                    }));
        EXPECT_EQ(zero->flat_parameters().size(), 1u);
        EXPECT_EQ(zero->flat_parameters()[0].numel(), 66);  // 2 * 33
        for (const Tensor& p : model->Parameters()) {
          EXPECT_TRUE(p.SharesStorageWith(zero->flat_parameters()[0]));
        }
        // Values kept.
        EXPECT_EQ(*model->Parameters()[0].ToVector<float>(), before);
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.status().ok()) << result.status();
}

TEST(ZeroRedundancyOptimizerTest, BadArgumentsAreErrors) {
  sim::RunResult result =
      sim::Run(1, [&](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp(2, 2, 2));
        TANDEM_ASSIGN_OR_RETURN(auto ddp,
                                DistributedDataParallel::Create(*model, comm));
        auto none = ZeroRedundancyOptimizer::Create(*ddp, nullptr);
        EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(none.status().message(), HasSubstr("make_optimizer"));
        auto timeout = ZeroRedundancyOptimizer::Create(
            *ddp,
            [](std::vector<Tensor> s) {
              return MakeOptimizer(Opt::kAdamW, std::move(s));
            },
            {.timeout = absl::ZeroDuration()});
        EXPECT_EQ(timeout.status().code(), absl::StatusCode::kInvalidArgument);
        auto failing = ZeroRedundancyOptimizer::Create(
            *ddp,
            [](std::vector<Tensor>)
                -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
              return absl::InvalidArgumentError("no thanks");
            });
        EXPECT_THAT(failing.status().message(),
                    HasSubstr("building the shard optimizer: no thanks"));
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.status().ok()) << result.status();
}

// ZeRO-2's switch is ZeroOptions::reduce_scatter_gradients: Create re-lays
// DDP's buckets padded to the world size (its groups' NewBuffer(N)), keeping
// every gradient a view of its bucket; DDP refuses it with a compressing
// hook or during a step, and a second call changes nothing.
TEST(ZeroRedundancyOptimizerTest, StageTwoSwitchRelaysDdpsBucketsPadded) {
  const auto adamw = [](std::vector<Tensor> shards) {
    return MakeOptimizer(Opt::kAdamW, std::move(shards));
  };
  sim::RunResult result =
      sim::Run(4, [&](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp(5, 7, 3));  // 66 elements
        TANDEM_ASSIGN_OR_RETURN(auto ddp,
                                DistributedDataParallel::Create(*model, comm));
        EXPECT_FALSE(ddp->reduce_scatter_gradients());
        EXPECT_EQ(ddp->buckets()[0].flat.numel(), 66);
        TANDEM_ASSIGN_OR_RETURN(
            auto zero, ZeroRedundancyOptimizer::Create(
                           *ddp, adamw, {.reduce_scatter_gradients = true}));
        EXPECT_EQ(zero->stage(), 2);
        EXPECT_TRUE(ddp->reduce_scatter_gradients());
        const Tensor flat = ddp->buckets()[0].flat;
        EXPECT_EQ(flat.numel(), 68);  // 4 * ceil(66 / 4)
        for (const Tensor& p : model->Parameters()) {
          EXPECT_TRUE(p.grad().SharesStorageWith(flat));
        }
        TANDEM_RETURN_IF_ERROR(ddp->ReduceScatterGradients());
        EXPECT_EQ(ddp->buckets()[0].flat.storage(), flat.storage());

        // Not during a step.
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Features(2, 5, 3));
        TANDEM_ASSIGN_OR_RETURN(Tensor y, ddp->Forward(x));
        absl::Status busy = ddp->ReduceScatterGradients();
        EXPECT_EQ(busy.code(), absl::StatusCode::kFailedPrecondition);
        EXPECT_THAT(busy.message(), HasSubstr("during a step"));
        TANDEM_ASSIGN_OR_RETURN(Tensor loss, Mean(y));
        TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));

        // Not with a compressing hook.
        TANDEM_ASSIGN_OR_RETURN(auto other, Mlp(5, 7, 3));
        TANDEM_ASSIGN_OR_RETURN(
            auto fp16,
            DistributedDataParallel::Create(
                *other, comm, {.comm_hook = DdpCommHook::kF16Compress}));
        auto refused = ZeroRedundancyOptimizer::Create(
            *fp16, adamw, {.reduce_scatter_gradients = true});
        EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(refused.status().message(),
                    HasSubstr("does not combine with a compressing"));
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.status().ok()) << result.status();
}

// ZeRO finds DDP's parameters through the bucket groups (no names): a
// module whose parameter was replaced after DDP wrapped it is refused.
TEST(ZeroRedundancyOptimizerTest, AModuleChangedAfterDdpWrappedItIsRefused) {
  sim::RunResult result =
      sim::Run(1, [&](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp(5, 7, 3));
        TANDEM_ASSIGN_OR_RETURN(auto ddp,
                                DistributedDataParallel::Create(*model, comm));
        Generator gen(9);
        TANDEM_ASSIGN_OR_RETURN(
            auto replaced,
            model->ReplaceChild("2", nn::Linear::Create(7, 3, gen).value()));
        auto zero = ZeroRedundancyOptimizer::Create(
            *ddp, [](std::vector<Tensor> shards) {
              return MakeOptimizer(Opt::kAdamW, std::move(shards));
            });
        EXPECT_EQ(zero.status().code(), absl::StatusCode::kFailedPrecondition);
        EXPECT_THAT(zero.status().message(),
                    HasSubstr("DDP's bucket holds \"2.bias\" as parameter 3"));
        EXPECT_THAT(zero.status().message(),
                    HasSubstr("parameter 3 (\"2.bias\") is another tensor: "
                              "the module changed after DDP wrapped it"));
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.status().ok()) << result.status();
}

}  // namespace
}  // namespace tandem::train
