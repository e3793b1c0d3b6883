// TrainingLoop in the virtual world (LoopOptions::virtual_world = K) on
// simulated ranks:
//   - the same weights, per-virtual-rank losses, tree-mean losses and epoch
//     sums, bit for bit, at W = 1, 2 and 4 for K = 4, with gradient
//     accumulation, clipping, momentum and dropout reseeded each step (its
//     masks keyed by the virtual rank, not the real one);
//   - after_step sees every virtual rank once per step, in order, each with
//     its own batch and loss;
//   - the virtual world is not plain DDP at W: the weights differ from
//     plain DDP on W ranks (the test could not pass by ignoring K);
//   - zero1, zero2 and fsdp give DDP's bits;
//   - refusals: data built for another world, a LoopOptions::virtual_world
//     the strategy does not play.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
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
#include "tensor/nn/layers/dropout.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/tensor.h"
#include "train/loop/training_loop.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kSamples = 40;  // 10 per virtual rank at K = 4
constexpr int64_t kBatch = 4;     // 3 steps per epoch (no drop_last)

absl::StatusOr<TensorDataset> Data() {
  Generator gen(5);
  std::vector<float> x(kSamples * 3);
  gen.Uniform(x.data(), static_cast<int64_t>(x.size()), -1.f, 1.f);
  std::vector<int64_t> y(kSamples);
  for (int64_t i = 0; i < kSamples; ++i) y[i] = (i * 7) % 3;
  TANDEM_ASSIGN_OR_RETURN(Tensor features,
                          Tensor::FromVector(x, {kSamples, 3}));
  TANDEM_ASSIGN_OR_RETURN(Tensor labels, Tensor::FromVector(y));
  return TensorDataset::Create(features, labels);
}

// Linear, dropout drawing from `drop`, ReLU, Linear.
absl::StatusOr<std::unique_ptr<nn::Sequential>> Model(Generator& drop) {
  Generator gen(9);
  auto model = std::make_unique<nn::Sequential>();
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(3, 16, gen)));
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Dropout::Create(0.3, drop)));
  TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(16, 3, gen)));
  return model;
}

// LoopOptions field by field: GCC 12 -O2 warns falsely
// (maybe-uninitialized) on designated initialisers of a LoopOptions.
LoopOptions Options(int64_t epochs, int64_t k) {
  LoopOptions o;
  o.who = "test";
  o.epochs = epochs;
  o.virtual_world = k;
  return o;
}

struct Seen {
  int64_t global_step;
  int64_t rank;
  double loss;
  double mean_loss;
  int64_t rows;
  bool operator==(const Seen& o) const {
    return global_step == o.global_step && rank == o.rank && loss == o.loss &&
           mean_loss == o.mean_loss && rows == o.rows;
  }
};

struct Outcome {
  absl::Status status;
  std::vector<std::vector<float>> weights;  // rank 0's parameters
  std::vector<Seen> seen;                   // every after_step, in (step, rank)
  std::vector<double> epoch_sums;           // rank 0's at each epoch's end
};

// Two epochs at `world` ranks of K = `k` (0: plain DDP), SGD with momentum,
// grad_accum 2, clipping at 0.5, dropout reseeded every step.
Outcome Train(int world, int64_t k, ShardMode mode = ShardMode::kNone) {
  Outcome out;
  std::mutex mu;
  sim::RunResult r =
      sim::Run(world, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(TensorDataset data, Data());
        Generator drop(1);
        TANDEM_ASSIGN_OR_RETURN(auto model, Model(drop));
        TANDEM_ASSIGN_OR_RETURN(
            SampledBatches batches,
            SampledBatches::Create(data, comm, kBatch, /*drop_last=*/false, k));
        LoopOptions options = Options(2, k);
        options.max_grad_norm = 0.5;
        options.epoch_sums = {"loss"};
        options.grad_accum = 2;
        options.reseed_each_step = &drop;
        options.step_seed = 3;
        TANDEM_ASSIGN_OR_RETURN(
            auto loop,
            TrainingLoop::Create(comm, *model, mode,
                                 SgdFactory(0.2, {.momentum = 0.9}), options));
        LoopHooks hooks;
        hooks.after_step = [&](const StepView& s) {
          (*s.sums)[0] += s.loss;
          std::lock_guard<std::mutex> lock(mu);
          out.seen.push_back({s.global_step, s.rank, s.loss, s.mean_loss,
                              s.batch->labels.dim(0)});
          return absl::OkStatus();
        };
        hooks.end_epoch = [&](int64_t, int64_t) -> absl::StatusOr<EpochEnd> {
          if (rank == 0) out.epoch_sums.push_back(loop->epoch_sums()[0]);
          return EpochEnd{};
        };
        TANDEM_RETURN_IF_ERROR(loop->Run(batches, CrossEntropyLoss(), hooks));
        // The full state in every mode (fsdp's parameters live in shards).
        TANDEM_ASSIGN_OR_RETURN(nn::StateDict state,
                                loop->strategy().FullModelState());
        if (rank == 0) {
          for (const nn::NamedTensor& p : state) {
            TANDEM_ASSIGN_OR_RETURN(std::vector<float> v,
                                    p.tensor.ToVector<float>());
            out.weights.push_back(v);
          }
        }
        return absl::OkStatus();
      });
  out.status = r.status();
  std::sort(out.seen.begin(), out.seen.end(), [](const Seen& a, const Seen& b) {
    return std::make_pair(a.global_step, a.rank) <
           std::make_pair(b.global_step, b.rank);
  });
  return out;
}

TEST(TrainingLoopVirtualTest, SameBitsAtEveryWorldSize) {
  const Outcome one = Train(1, 4);
  ASSERT_TRUE(one.status.ok()) << one.status;
  // 2 epochs x 3 steps x 4 virtual ranks, each seen once, in order.
  ASSERT_EQ(one.seen.size(), 24u);
  for (size_t i = 0; i < one.seen.size(); ++i) {
    EXPECT_EQ(one.seen[i].global_step, static_cast<int64_t>(i / 4));
    EXPECT_EQ(one.seen[i].rank, static_cast<int64_t>(i % 4));
    // The tree mean of the step's four losses, on every virtual rank.
    const size_t s = i / 4 * 4;
    EXPECT_EQ(one.seen[i].mean_loss,
              ((one.seen[s].loss + one.seen[s + 1].loss) +
               (one.seen[s + 2].loss + one.seen[s + 3].loss)) /
                  4.0);
  }
  // 10 samples per virtual rank in batches of 4: 4, 4, 2.
  EXPECT_EQ(one.seen[8].rows, 2);
  ASSERT_EQ(one.epoch_sums.size(), 2u);
  for (int w : {2, 4}) {
    SCOPED_TRACE(w);
    const Outcome other = Train(w, 4);
    ASSERT_TRUE(other.status.ok()) << other.status;
    EXPECT_EQ(other.weights, one.weights);
    EXPECT_EQ(other.seen, one.seen);
    EXPECT_EQ(other.epoch_sums, one.epoch_sums);
  }
}

// zero1, zero2 and fsdp reduce the same sums in the same order and clip by
// the same norm: DDP's weights and losses, bit for bit, at other world
// sizes (fsdp: each unit's tree over virtual ranks, then its ordered
// all-reduce, each rank keeping its shard).
TEST(TrainingLoopVirtualTest, ShardedModesGiveDdpsBits) {
  const Outcome ddp = Train(1, 4);
  ASSERT_TRUE(ddp.status.ok()) << ddp.status;
  for (auto [mode, world] :
       {std::pair{ShardMode::kZero1, 2}, std::pair{ShardMode::kZero2, 4},
        std::pair{ShardMode::kZero2, 2}}) {
    SCOPED_TRACE(ShardModeName(mode) + " at " + std::to_string(world));
    const Outcome sharded = Train(world, 4, mode);
    ASSERT_TRUE(sharded.status.ok()) << sharded.status;
    EXPECT_EQ(sharded.weights, ddp.weights);
    EXPECT_EQ(sharded.seen, ddp.seen);
  }
}

// Plain DDP on 2 ranks is another computation (2 replicas of batch 4, not
// 4): the virtual world's weights are not what the test would see if the
// loop ignored K.
TEST(TrainingLoopVirtualTest, IsNotPlainDdpAtTheRealWorldSize) {
  const Outcome virt = Train(2, 4);
  const Outcome plain = Train(2, 0);
  ASSERT_TRUE(virt.status.ok()) << virt.status;
  ASSERT_TRUE(plain.status.ok()) << plain.status;
  EXPECT_NE(virt.weights, plain.weights);
}

absl::Status RunWith(
    int world,
    const std::function<absl::Status(comm::Communicator&, nn::Sequential&,
                                     const TensorDataset&, Generator&)>& fn) {
  return sim::Run(world,
                  [&](int, comm::Communicator& comm) -> absl::Status {
                    TANDEM_ASSIGN_OR_RETURN(TensorDataset data, Data());
                    Generator drop(1);
                    TANDEM_ASSIGN_OR_RETURN(auto model, Model(drop));
                    return fn(comm, *model, data, drop);
                  })
      .status();
}

TEST(TrainingLoopVirtualTest, DataForAnotherWorldIsRefused) {
  absl::Status s =
      RunWith(2, [](comm::Communicator& comm, nn::Sequential& model,
                    const TensorDataset& data, Generator&) {
        TANDEM_ASSIGN_OR_RETURN(
            SampledBatches batches,
            SampledBatches::Create(data, comm, kBatch, false /* no K */));
        TANDEM_ASSIGN_OR_RETURN(
            auto loop, TrainingLoop::Create(comm, model, ShardMode::kNone,
                                            SgdFactory(0.1), Options(1, 4)));
        return loop->Run(batches, CrossEntropyLoss());
      });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("the data gives batches of 1 (virtual) rank(s) per "
                        "step and this rank plays 2 of the 4 virtual ranks"));
}

TEST(TrainingLoopVirtualTest, LoopAndStrategyMustAgreeOnK) {
  absl::Status s =
      RunWith(1, [](comm::Communicator& comm, nn::Sequential& model,
                    const TensorDataset& data, Generator&) {
        TANDEM_ASSIGN_OR_RETURN(
            SampledBatches batches,
            SampledBatches::Create(data, comm, kBatch, false, 2));
        TANDEM_ASSIGN_OR_RETURN(
            std::unique_ptr<Strategy> strategy,
            Strategy::Create(ShardMode::kNone, model, comm, SgdFactory(0.1),
                             {.virtual_world = 2}));
        TrainingLoop loop(comm, model, *strategy, Options(1, 4));
        return loop.Run(batches, CrossEntropyLoss());
      });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("LoopOptions::virtual_world is 4 but the strategy "
                        "plays 2 virtual ranks"));
}

}  // namespace
}  // namespace tandem::train
