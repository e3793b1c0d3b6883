// nn::PyFloatRepr, with which the tutorials' lines print Python floats,
// against Python's repr(float); RunToyDdp's config checks. The end-to-end
// runs (lines pinned to PyTorch's output) are in tests/toy_ddp_test.cc.
#include "train/examples/toy_ddp/toy_ddp_lib.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/nn/py_repr.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

TEST(PyFloatReprTest, MatchesPythonRepr) {
  // Expected values are Python 3's repr() of the same doubles.
  EXPECT_EQ(nn::PyFloatRepr(1.0), "1.0");
  EXPECT_EQ(nn::PyFloatRepr(0.5), "0.5");
  EXPECT_EQ(nn::PyFloatRepr(2.0 / 3.0), "0.6666666666666666");
  // float32(2/3) widened, what (correct / total).item() gives in PyTorch.
  EXPECT_EQ(nn::PyFloatRepr(static_cast<double>(2.f / 3.f)),
            "0.6666666865348816");
  EXPECT_EQ(nn::PyFloatRepr(0.0), "0.0");
  EXPECT_EQ(nn::PyFloatRepr(-0.0), "-0.0");
  EXPECT_EQ(nn::PyFloatRepr(0.1), "0.1");
  EXPECT_EQ(nn::PyFloatRepr(100.0), "100.0");
  EXPECT_EQ(nn::PyFloatRepr(123.456), "123.456");
  EXPECT_EQ(nn::PyFloatRepr(0.0001), "0.0001");
  EXPECT_EQ(nn::PyFloatRepr(0.00012), "0.00012");
  EXPECT_EQ(nn::PyFloatRepr(1e-5), "1e-05");
  EXPECT_EQ(nn::PyFloatRepr(-1.5e-7), "-1.5e-07");
  EXPECT_EQ(nn::PyFloatRepr(9999999999999998.0), "9999999999999998.0");
  EXPECT_EQ(nn::PyFloatRepr(1e16), "1e+16");
  EXPECT_EQ(nn::PyFloatRepr(1.5e16), "1.5e+16");
  EXPECT_EQ(nn::PyFloatRepr(1e22), "1e+22");
  EXPECT_EQ(nn::PyFloatRepr(12345678901234567890.0), "1.2345678901234567e+19");
  EXPECT_EQ(nn::PyFloatRepr(5e-324), "5e-324");
  EXPECT_EQ(nn::PyFloatRepr(1.7976931348623157e308), "1.7976931348623157e+308");
  EXPECT_EQ(nn::PyFloatRepr(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(nn::PyFloatRepr(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(nn::PyFloatRepr(std::nan("")), "nan");
}

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
