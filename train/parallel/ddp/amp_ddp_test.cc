// Mixed precision under DDP on the simulated cluster: autocast + GradScaler
// + DDP; an inf in ONE rank's gradient makes EVERY rank skip that step and
// halve its scale, and the weights stay identical on all ranks.
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/amp/autocast.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/ops.h"
#include "tensor/optim/grad_scaler.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"
#include "train/parallel/core/finite_check.h"
#include "train/parallel/core/found_inf.h"
#include "train/parallel/ddp/ddp.h"

namespace tandem::train {
namespace {

constexpr int kWorld = 3;
constexpr int kSteps = 4;
constexpr int kBadRank = 1;
constexpr int kBadStep = 1;

enum class Inject {
  kAfterAllReduce,   // into rank 1's reduced gradient: needs the combiner
  kBeforeAllReduce,  // rank 1's input: DDP's average spreads it
};

struct RankLog {
  std::vector<double> scales;  // after each Update
  std::vector<bool> stepped;
  std::vector<StepOutcome> outcomes;
  std::vector<float> weights;  // all parameters at the end
};

absl::Status TrainRank(int rank, comm::Communicator& comm, Inject inject,
                       DdpCommHook hook, RankLog& log) {
  Generator gen(42);
  auto model = std::make_unique<nn::Sequential>();
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(6, 8, gen)));
  TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(8, 2, gen)));
  DdpOptions options;
  options.comm_hook = hook;
  TANDEM_ASSIGN_OR_RETURN(
      auto ddp, DistributedDataParallel::Create(*model, comm, options));
  std::vector<Tensor> params;
  for (const nn::NamedTensor& p : model->NamedParameters()) {
    params.push_back(p.tensor);
  }
  TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd, optim::Sgd::Create(params, 0.01));
  TANDEM_ASSIGN_OR_RETURN(optim::GradScaler scaler,
                          optim::GradScaler::Create());
  if (inject == Inject::kAfterAllReduce) {
    scaler.set_found_inf_combiner(FoundInfAcrossRanks(comm, Device::CPU()));
  }
  Generator data(1000 + rank);
  for (int step = 0; step < kSteps; ++step) {
    std::vector<float> xs(4 * 6), ys(4 * 2);
    data.Uniform(xs.data(), static_cast<int64_t>(xs.size()), -1.f, 1.f);
    data.Uniform(ys.data(), static_cast<int64_t>(ys.size()), -1.f, 1.f);
    const bool bad = rank == kBadRank && step == kBadStep;
    if (bad && inject == Inject::kBeforeAllReduce) {
      xs[0] = std::numeric_limits<float>::infinity();
    }
    TANDEM_ASSIGN_OR_RETURN(Tensor x, Tensor::FromVector<float>(xs, {4, 6}));
    TANDEM_ASSIGN_OR_RETURN(Tensor y, Tensor::FromVector<float>(ys, {4, 2}));
    sgd.ZeroGrad();
    Tensor loss;
    {
      amp::Autocast autocast(DeviceType::kCPU, DType::kBF16);
      TANDEM_RETURN_IF_ERROR(autocast.status());
      TANDEM_ASSIGN_OR_RETURN(Tensor out, ddp->Forward(x));
      TANDEM_ASSIGN_OR_RETURN(loss, Mse(out, y));
    }
    TANDEM_ASSIGN_OR_RETURN(Tensor scaled, scaler.Scale(loss));
    TANDEM_RETURN_IF_ERROR(ddp->Backward(scaled));
    if (bad && inject == Inject::kAfterAllReduce) {
      params[0].grad().data<float>()[3] =
          std::numeric_limits<float>::infinity();
    }
    TANDEM_ASSIGN_OR_RETURN(bool stepped, scaler.Step(sgd));
    TANDEM_RETURN_IF_ERROR(scaler.Update());
    TANDEM_ASSIGN_OR_RETURN(double loss_value, loss.Item());
    TANDEM_ASSIGN_OR_RETURN(
        StepOutcome outcome,
        CheckStepFinite(comm, *model,
                        {.epoch = 0,
                         .step = step,
                         .loss = loss_value,
                         .outcome = stepped ? StepOutcome::kApplied
                                            : StepOutcome::kSkipped}));
    log.scales.push_back(scaler.scale());
    log.stepped.push_back(stepped);
    log.outcomes.push_back(outcome);
  }
  for (const Tensor& p : params) {
    TANDEM_ASSIGN_OR_RETURN(std::vector<float> v, p.ToVector<float>());
    log.weights.insert(log.weights.end(), v.begin(), v.end());
  }
  return absl::OkStatus();
}

void ExpectEveryRankSkipsTogether(Inject inject, DdpCommHook hook) {
  std::vector<RankLog> logs(kWorld);
  sim::RunResult result =
      sim::Run(kWorld, [&](int rank, comm::Communicator& comm) {
        return TrainRank(rank, comm, inject, hook, logs[rank]);
      });
  ASSERT_TRUE(result.status().ok()) << result.status();
  const std::vector<double> scales = {65536, 32768, 32768, 32768};
  const std::vector<bool> stepped = {true, false, true, true};
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(logs[r].scales, scales) << "rank " << r;
    EXPECT_EQ(logs[r].stepped, stepped) << "rank " << r;
    EXPECT_EQ(logs[r].outcomes[kBadStep], StepOutcome::kSkipped);
    EXPECT_EQ(logs[r].weights, logs[0].weights) << "rank " << r;
    for (float w : logs[r].weights) ASSERT_TRUE(std::isfinite(w));
  }
}

TEST(AmpDdpTest, InfAfterAllReduceOnOneRankSkipsEveryRank) {
  ExpectEveryRankSkipsTogether(Inject::kAfterAllReduce,
                               DdpCommHook::kAllReduce);
}

TEST(AmpDdpTest, InfBeforeAllReduceSpreadsAndEveryRankSkips) {
  ExpectEveryRankSkipsTogether(Inject::kBeforeAllReduce,
                               DdpCommHook::kAllReduce);
}

TEST(AmpDdpTest, WithBf16CompressedGradients) {
  ExpectEveryRankSkipsTogether(Inject::kAfterAllReduce,
                               DdpCommHook::kBf16Compress);
}

}  // namespace
}  // namespace tandem::train
