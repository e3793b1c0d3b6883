#include "train/parallel/core/model_agreement.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/device.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

// Linear(3, width), then Linear(width, 2) if `second`; f32.
absl::StatusOr<std::unique_ptr<nn::Sequential>> Model(int64_t width,
                                                      uint64_t seed,
                                                      bool second = true) {
  Generator gen(seed);
  auto model = std::make_unique<nn::Sequential>();
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(3, width, gen)));
  if (second) {
    TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(width, 2, gen)));
  }
  return model;
}

absl::Status Check(comm::Communicator& comm, const nn::Module& model) {
  return CheckSameModelOnEveryRank(model, comm, Device::CPU(), "Wrapper",
                                   absl::Seconds(30));
}

TEST(ModelAgreementTest, SameModelsAgreeWhateverTheirValues) {
  sim::RunResult result =
      sim::Run(4, [](int rank, comm::Communicator& comm) -> absl::Status {
        // Other seeds, other weights: only the description is compared.
        TANDEM_ASSIGN_OR_RETURN(auto model, Model(4, 100 + rank));
        return Check(comm, *model);
      });
  EXPECT_TRUE(result.status().ok()) << result.status();
}

TEST(ModelAgreementTest, OneRankAlwaysAgrees) {
  sim::RunResult result =
      sim::Run(1, [](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Model(4, 1));
        return Check(comm, *model);
      });
  EXPECT_TRUE(result.status().ok()) << result.status();
}

TEST(ModelAgreementTest, EveryRankNamesTheFirstDifference) {
  sim::RunResult result =
      sim::Run(3, [](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Model(rank == 2 ? 5 : 4, 1));
        return Check(comm, *model);
      });
  ASSERT_TRUE(result.launch.ok()) << result.launch;
  for (int r = 0; r < 3; ++r) {
    const absl::Status& s = result.ranks[r];
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr(absl::StrCat("Wrapper (reported on rank ", r,
                                       "): the ranks hold different models: "
                                       "parameter 0 is \"0.weight\" f32[4, 3] "
                                       "on rank 0 but \"0.weight\" f32[5, 3] "
                                       "on rank 2")));
  }
}

TEST(ModelAgreementTest, AMissingLayerIsNamedWithTheRankThatHasIt) {
  sim::RunResult result =
      sim::Run(2, [](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Model(4, 1, /*second=*/rank == 0));
        return Check(comm, *model);
      });
  ASSERT_TRUE(result.launch.ok()) << result.launch;
  EXPECT_THAT(std::string(result.ranks[1].message()),
              HasSubstr("rank 1 has 2 parameters but rank 0 has 4 (parameter "
                        "2, \"1.weight\" f32[2, 4], exists only on rank 0)"));
}

}  // namespace
}  // namespace tandem::train
