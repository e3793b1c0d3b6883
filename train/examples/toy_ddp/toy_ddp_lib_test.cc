// RunToyDdp's config checks. The end-to-end runs (lines pinned to
// PyTorch's output) are in tests/toy_ddp_test.cc; nn::PyFloatRepr, with
// which the tutorials' lines print Python floats, is tested beside it
// (tensor/nn/py_repr_test.cc).
#include "train/examples/toy_ddp/toy_ddp_lib.h"

#include <limits>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

TEST(RunToyDdpTest, RejectsBadConfig) {
  ToyDdpConfig config;
  config.batch_size = 0;
  sim::RunResult result = sim::Run(1, [&](int, comm::Communicator& comm) {
    return RunToyDdp(comm, config);
  });
  EXPECT_EQ(result.ranks[0].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.ranks[0].message(),
              HasSubstr("--batch_size=0 (expected batch_size >= 1)"));

  config = ToyDdpConfig();
  config.epochs = -1;
  result = sim::Run(1, [&](int, comm::Communicator& comm) {
    return RunToyDdp(comm, config);
  });
  EXPECT_THAT(result.ranks[0].message(),
              HasSubstr("--epochs=-1 (expected 0 <= epochs <= 1000000)"));
}

TEST(RunToyDdpTest, EmptyShardIsAnErrorNotADivisionByZero) {
  // 5 samples over 4 ranks: 2 per rank, fewer than one batch of 3.
  ToyDdpConfig config;
  config.batch_size = 3;
  sim::OutputCapture capture;
  sim::Options options;
  options.capture = &capture;
  sim::RunResult result = sim::Run(
      4, [&](int, comm::Communicator& comm) { return RunToyDdp(comm, config); },
      options);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(result.ranks[r].code(), absl::StatusCode::kFailedPrecondition)
        << result.ranks[r];
    EXPECT_THAT(result.ranks[r].message(),
                HasSubstr("lower --batch_size or --world_size"));
    EXPECT_TRUE(capture.Lines(r).empty());  // no step ran
  }
}

// Per-rank flags (as mpirun MPMD gives them) fail on every rank at start-up,
// naming each rank's value, before any step prints.
TEST(RunToyDdpTest, RanksWithDifferentFlagsFailBeforeTraining) {
  sim::OutputCapture capture;
  sim::Options options;
  options.capture = &capture;
  sim::RunResult result = sim::Run(
      3,
      [&](int rank, comm::Communicator& comm) {
        ToyDdpConfig config;
        config.epochs = rank == 2 ? 4 : 3;
        return RunToyDdp(comm, config);
      },
      options);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(result.ranks[r].code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(result.ranks[r].message()),
              "ranks disagree on the configuration: --epochs is 3 on ranks 0 "
              "and 1 and 4 on rank 2; start every rank with the same flags "
              "and data");
    EXPECT_TRUE(capture.Lines(r).empty());
  }
}

// A finite but huge learning rate blows the weights up: every rank stops at
// the same step with the same error instead of printing nan to the end.
// An infinite one is refused when the optimizer is built.
TEST(RunToyDdpTest, NonFiniteTrainingStopsEveryRank) {
  ToyDdpConfig config;
  config.lr = 1e30;
  sim::RunResult result = sim::Run(2, [&](int, comm::Communicator& comm) {
    return RunToyDdp(comm, config);
  });
  EXPECT_EQ(result.ranks[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(result.ranks[0].message()),
              HasSubstr("non-finite values at epoch "));
  EXPECT_EQ(result.ranks[0], result.ranks[1]);
  config.lr = std::numeric_limits<double>::infinity();
  result = sim::Run(2, [&](int, comm::Communicator& comm) {
    return RunToyDdp(comm, config);
  });
  EXPECT_THAT(std::string(result.ranks[1].message()),
              HasSubstr("Sgd: Invalid learning rate: inf"));
}

}  // namespace
}  // namespace tandem::train
