#include <cstdlib>
#include <fstream>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/output_capture.h"
#include "sim/sim.h"
#include "train/examples/digits_ddp/digits_ddp_lib.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

struct DigitsRun {
  std::vector<DigitsResult> results;            // per rank
  std::vector<std::vector<std::string>> lines;  // per rank
};

DigitsRun RunOnSim(int world_size, const DigitsConfig& config) {
  DigitsRun run;
  run.results.resize(world_size);
  sim::OutputCapture capture;
  sim::Options options;
  options.capture = &capture;
  sim::RunResult result = sim::Run(
      world_size,
      [&](int rank, comm::Communicator& comm) -> absl::Status {
        absl::StatusOr<DigitsResult> r = RunDigitsDdp(comm, config);
        if (!r.ok()) return r.status();
        run.results[rank] = *r;
        return absl::OkStatus();
      },
      options);
  EXPECT_TRUE(result.ok()) << result.status();
  for (int r = 0; r < world_size; ++r) run.lines.push_back(capture.Lines(r));
  return run;
}

TEST(DigitsDdpTest, ReachesNinetyFivePercentOnAnyWorldSize) {
  for (int world_size : {1, 3}) {
    DigitsConfig config;
    config.global_batch_size = world_size == 3 ? 63 : 64;  // divisible
    DigitsRun run = RunOnSim(world_size, config);
    ASSERT_EQ(run.results.size(), static_cast<size_t>(world_size));
    for (const DigitsResult& r : run.results) {
      // 20% of 1797 held out, counted once over all ranks.
      EXPECT_EQ(r.test_total, 359);
      EXPECT_GE(r.test_accuracy(), 0.95) << "world size " << world_size;
      // Every rank reports the same global figures.
      EXPECT_EQ(r.test_correct, run.results[0].test_correct);
      EXPECT_EQ(r.final_train_loss, run.results[0].final_train_loss);
    }
    // Only rank 0 prints: a header, one line per epoch, the accuracy.
    ASSERT_EQ(run.lines[0].size(), 22u);
    EXPECT_THAT(run.lines[0][1], HasSubstr("Epoch: 001/020 | Train loss: "));
    EXPECT_THAT(run.lines[0][21], HasSubstr("Test accuracy: "));
    EXPECT_THAT(run.lines[0][21], HasSubstr("/359, all ranks)"));
    for (int r = 1; r < world_size; ++r) EXPECT_TRUE(run.lines[r].empty());
  }
}

TEST(DigitsDdpTest, IsBitwiseReproducible) {
  DigitsConfig config;
  config.epochs = 3;
  DigitsRun a = RunOnSim(2, config);
  DigitsRun b = RunOnSim(2, config);
  EXPECT_EQ(a.results[0].final_train_loss, b.results[0].final_train_loss);
  EXPECT_EQ(a.results[0].test_correct, b.results[0].test_correct);
  EXPECT_EQ(a.lines, b.lines);
}

TEST(DigitsDdpTest, EveryShardModeGivesDdpsLossAndAccuracyExactly) {
  DigitsConfig config;
  config.epochs = 3;
  config.global_batch_size = 63;
  const DigitsRun ddp = RunOnSim(3, config);
  for (const char* mode : {"zero1", "zero2", "fsdp"}) {
    config.shard = mode;
    const DigitsRun sharded = RunOnSim(3, config);
    ASSERT_EQ(sharded.results.size(), 3u) << mode;
    EXPECT_EQ(sharded.results[0].final_train_loss,
              ddp.results[0].final_train_loss)
        << mode;
    EXPECT_EQ(sharded.results[0].test_correct, ddp.results[0].test_correct)
        << mode;
    EXPECT_THAT(sharded.lines[0][0], HasSubstr(std::string("--shard=") + mode));
  }
  config.shard = "zero4";
  sim::RunResult bad = sim::Run(1, [&](int, comm::Communicator& comm) {
    return RunDigitsDdp(comm, config).status();
  });
  EXPECT_THAT(bad.status().message(), HasSubstr("not a sharding mode"));
}

TEST(DigitsDdpTest, BadConfigAndMissingFileAreErrors) {
  DigitsConfig bad;
  bad.global_batch_size = 0;
  sim::RunResult r1 = sim::Run(1, [&](int, comm::Communicator& comm) {
    return RunDigitsDdp(comm, bad).status();
  });
  EXPECT_THAT(
      r1.status().message(),
      HasSubstr("--global_batch_size=0 (expected global_batch_size >= 1)"));
  DigitsConfig missing;
  missing.data = "no/such/file.csv";
  sim::RunResult r2 = sim::Run(2, [&](int, comm::Communicator& comm) {
    return RunDigitsDdp(comm, missing).status();
  });
  EXPECT_THAT(r2.status().message(), HasSubstr("no/such/file.csv"));
}

// The world size must divide --global_batch_size: the error names both and
// the nearest valid sizes, on every rank.
TEST(DigitsDdpTest, GlobalBatchSizeTheWorldDoesNotDivideIsRefused) {
  DigitsConfig config;  // 64
  sim::RunResult r3 = sim::Run(3, [&](int, comm::Communicator& comm) {
    return RunDigitsDdp(comm, config).status();
  });
  for (const absl::Status& s : r3.ranks) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("--global_batch_size=64 is not divisible by 3 "
                          "ranks; use 63 or 66"));
  }
  config.global_batch_size = 3;  // below the world size: only one choice
  sim::RunResult r4 = sim::Run(4, [&](int, comm::Communicator& comm) {
    return RunDigitsDdp(comm, config).status();
  });
  EXPECT_THAT(std::string(r4.status().message()),
              HasSubstr("--global_batch_size=3 is not divisible by 4 ranks; "
                        "use 4 (each rank"));
}

// Per-rank flags fail on every rank with each rank's value, before training.
TEST(DigitsDdpTest, RanksWithDifferentFlagsFailNamingEachValue) {
  sim::RunResult run = sim::Run(2, [&](int rank, comm::Communicator& comm) {
    DigitsConfig config;
    config.epochs = 2 + rank;
    config.lr = rank == 0 ? 0.1 : 0.2;
    return RunDigitsDdp(comm, config).status();
  });
  for (const absl::Status& s : run.ranks) {
    EXPECT_EQ(std::string(s.message()),
              "ranks disagree on the configuration: --epochs is 2 on rank 0 "
              "and 3 on rank 1; --lr is 0.1 on rank 0 and 0.2 on rank 1; "
              "start every rank with the same flags and data");
  }
}

// Same flags, different data files (one pixel differs): the hash differs.
TEST(DigitsDdpTest, RanksWithDifferentDataFailNamingTheHash) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  for (int rank : {0, 1}) {
    std::ofstream f(dir + "/digits" + std::to_string(rank) + ".csv");
    for (int row = 0; row < 40; ++row) {
      for (int col = 0; col < 64; ++col) {
        f << (rank == 1 && row == 7 && col == 9 ? 5 : (row + col) % 17) << ",";
      }
      f << row % 10 << "\n";
    }
  }
  sim::RunResult run = sim::Run(2, [&](int rank, comm::Communicator& comm) {
    DigitsConfig config;
    config.data = dir + "/digits" + std::to_string(rank) + ".csv";
    return RunDigitsDdp(comm, config).status();
  });
  for (const absl::Status& s : run.ranks) {
    EXPECT_THAT(std::string(s.message()),
                MatchesRegex("ranks disagree on the configuration: dataset "
                             "hash is [0-9a-f]{16} on rank 0 and [0-9a-f]{16} "
                             "on rank 1; start every rank with the same flags "
                             "and data"));
  }
}

// A learning rate that blows the weights up stops every rank at the same
// step, naming it (an infinite one is refused by Sgd before training).
TEST(DigitsDdpTest, DivergingTrainingStopsEveryRankAtTheSameStep) {
  sim::RunResult run = sim::Run(2, [&](int, comm::Communicator& comm) {
    DigitsConfig config;
    config.lr = 1e30;
    return RunDigitsDdp(comm, config).status();
  });
  ASSERT_EQ(run.ranks.size(), 2u);
  EXPECT_EQ(run.ranks[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(run.ranks[0].message()),
              HasSubstr("non-finite values at epoch 1, step "));
  EXPECT_EQ(run.ranks[0], run.ranks[1]);
  sim::RunResult inf = sim::Run(2, [&](int, comm::Communicator& comm) {
    DigitsConfig config;
    config.lr = std::numeric_limits<double>::infinity();
    return RunDigitsDdp(comm, config).status();
  });
  EXPECT_THAT(std::string(inf.status().message()),
              HasSubstr("Invalid learning rate: inf"));
}

}  // namespace
}  // namespace tandem::train
