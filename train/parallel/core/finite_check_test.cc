// CheckStepFinite on the simulated cluster: every rank takes the same
// decision, including when only one rank's data or parameters go bad.
#include "train/parallel/core/finite_check.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
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
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"
#include "train/parallel/ddp/ddp.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

absl::StatusOr<std::unique_ptr<nn::Sequential>> Mlp() {
  Generator gen(7);
  auto model = std::make_unique<nn::Sequential>();
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(3, 4, gen)));
  TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(4, 2, gen)));
  return model;
}

// Runs `fn` on `n` ranks and returns each rank's status.
std::vector<absl::Status> RunRanks(int n, const sim::RankFn& fn) {
  sim::RunResult result = sim::Run(n, fn);
  EXPECT_TRUE(result.launch.ok()) << result.launch;
  return result.ranks;
}

void ExpectAllEqualErrors(const std::vector<absl::Status>& statuses) {
  ASSERT_FALSE(statuses.empty());
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kFailedPrecondition)
      << statuses[0];
  for (const absl::Status& s : statuses) EXPECT_EQ(s, statuses[0]);
}

TEST(FiniteCheckTest, FiniteStepPassesOnEveryRank) {
  for (const absl::Status& s : RunRanks(3, [](int, comm::Communicator& comm) {
         TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> model, Mlp());
         TANDEM_ASSIGN_OR_RETURN(
             StepOutcome outcome,
             CheckStepFinite(comm, *model, {.epoch = 0, .step = 0, .loss = 1}));
         if (outcome != StepOutcome::kApplied) {
           return absl::InternalError("expected kApplied");
         }
         return absl::OkStatus();
       })) {
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(FiniteCheckTest, OneRanksLossStopsEveryRankWithTheSameError) {
  const std::vector<absl::Status> statuses =
      RunRanks(3, [](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> model, Mlp());
        return CheckStepFinite(
                   comm, *model,
                   {.epoch = 1, .step = 4, .loss = rank == 1 ? kInf : 0.5})
            .status();
      });
  ExpectAllEqualErrors(statuses);
  EXPECT_THAT(std::string(statuses[0].message()),
              HasSubstr("non-finite values at epoch 2, step 5 (counted from "
                        "1): rank 1: loss = inf. Every rank stops here. Lower "
                        "the learning rate (--lr)"));
}

TEST(FiniteCheckTest, NamesTheFirstNonFiniteParameterOfEachRank) {
  const std::vector<absl::Status> statuses =
      RunRanks(2, [](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> model, Mlp());
        std::vector<nn::NamedTensor> named = model->NamedParameters();
        // Rank 0: the last element of 2.bias is nan. Rank 1: 0.weight[5]
        // is -inf and 2.bias[1] nan; the first in order is reported.
        named[3].tensor.data<float>()[1] = std::nanf("");
        if (rank == 1) named[0].tensor.data<float>()[5] = -INFINITY;
        return CheckStepFinite(comm, *model, {.epoch = 0, .step = 0, .loss = 1})
            .status();
      });
  ExpectAllEqualErrors(statuses);
  EXPECT_THAT(std::string(statuses[0].message()),
              HasSubstr("rank 0: parameter 2.bias = nan; rank 1: parameter "
                        "0.weight = -inf."));
}

// A later GradScaler reports a skipped step: a non-finite loss is then not
// an error, but parameters are still checked.
TEST(FiniteCheckTest, SkippedStepIsNotAnErrorButBadParametersStillAre) {
  for (const absl::Status& s :
       RunRanks(2, [](int, comm::Communicator& comm) -> absl::Status {
         TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> model, Mlp());
         TANDEM_ASSIGN_OR_RETURN(
             StepOutcome outcome,
             CheckStepFinite(comm, *model,
                             {.loss = kInf, .outcome = StepOutcome::kSkipped}));
         if (outcome != StepOutcome::kSkipped) {
           return absl::InternalError("expected kSkipped");
         }
         return absl::OkStatus();
       })) {
    EXPECT_TRUE(s.ok()) << s;
  }
  const std::vector<absl::Status> statuses =
      RunRanks(2, [](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> model, Mlp());
        model->Parameters()[0].data<float>()[0] = INFINITY;
        return CheckStepFinite(comm, *model,
                               {.loss = kInf, .outcome = StepOutcome::kSkipped})
            .status();
      });
  ExpectAllEqualErrors(statuses);
  EXPECT_THAT(std::string(statuses[0].message()),
              HasSubstr("rank 0: parameter 0.weight = inf; rank 1: parameter "
                        "0.weight = inf."));
}

// Large tensors: the blocked scan finds a value past its first block.
TEST(FiniteCheckTest, FindsAValueDeepInALargeParameter) {
  const std::vector<absl::Status> statuses =
      RunRanks(2, [](int rank, comm::Communicator& comm) -> absl::Status {
        Generator gen(1);
        TANDEM_ASSIGN_OR_RETURN(
            std::unique_ptr<nn::Module> big,
            nn::Linear::Create(300, 100, gen, {.dtype = DType::kF64}));
        if (rank == 0) big->Parameters()[0].data<double>()[29999] = -kInf;
        return CheckStepFinite(comm, *big, {.loss = 0}).status();
      });
  ExpectAllEqualErrors(statuses);
  EXPECT_THAT(std::string(statuses[0].message()),
              HasSubstr(": rank 0: parameter weight = "
                        "-inf. Every rank stops here."));
}

// DDP training where only rank 1's batch holds an inf: rank 1's loss goes
// non-finite, the all-reduced gradient spreads nan to every rank's
// parameters, and every rank stops at the same step with the same error.
TEST(FiniteCheckTest, OneRanksBadDataStopsEveryRankInTraining) {
  const std::vector<absl::Status> statuses =
      RunRanks(2, [](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> model, Mlp());
        TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                                optim::Sgd::Create(model->Parameters(), 0.1));
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<DistributedDataParallel> ddp,
                                DistributedDataParallel::Create(*model, comm));
        for (int64_t step = 0; step < 3; ++step) {
          std::vector<float> x = {0.5f, -1.f, 2.f, 1.f, 0.f, -0.5f};
          if (rank == 1 && step == 1) x[2] = INFINITY;
          TANDEM_ASSIGN_OR_RETURN(Tensor features,
                                  Tensor::FromVector(x, {2, 3}));
          TANDEM_ASSIGN_OR_RETURN(
              Tensor labels, Tensor::FromVector(std::vector<int64_t>{0, 1}));
          TANDEM_ASSIGN_OR_RETURN(Tensor logits, ddp->Forward(features));
          TANDEM_ASSIGN_OR_RETURN(Tensor loss, CrossEntropy(logits, labels));
          sgd.ZeroGrad();
          TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));
          TANDEM_RETURN_IF_ERROR(sgd.Step());
          TANDEM_ASSIGN_OR_RETURN(double value, loss.Item());
          TANDEM_RETURN_IF_ERROR(
              CheckStepFinite(comm, *model,
                              {.epoch = 0, .step = step, .loss = value})
                  .status());
        }
        return absl::InternalError("training went on past the inf");
      });
  ExpectAllEqualErrors(statuses);
  EXPECT_THAT(std::string(statuses[0].message()),
              HasSubstr("at epoch 1, step 2 (counted from 1): rank 0: "
                        "parameter 0.weight = nan; rank 1: loss = nan"));
}

// Without check_parameters only the loss is judged: a bad parameter passes.
TEST(FiniteCheckTest, ParametersAreScannedOnlyWhenAsked) {
  for (const absl::Status& s :
       RunRanks(2, [](int, comm::Communicator& comm) -> absl::Status {
         TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> model, Mlp());
         model->Parameters()[1].data<float>()[0] = std::nanf("");
         return CheckStepFinite(comm, *model,
                                {.loss = 1, .check_parameters = false})
             .status();
       })) {
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(FiniteCheckTest, ParameterCheckIsDueEveryIntervalAndAtEpochEnd) {
  std::vector<int64_t> due;
  for (int64_t step = 0; step < 40; ++step) {
    if (ParameterCheckDue(step, 40)) due.push_back(step);
  }
  EXPECT_EQ(due, (std::vector<int64_t>{kParameterCheckInterval - 1,
                                       2 * kParameterCheckInterval - 1, 39}));
  EXPECT_TRUE(ParameterCheckDue(0, 1));
  EXPECT_FALSE(ParameterCheckDue(0, 2));
}

}  // namespace
}  // namespace tandem::train
