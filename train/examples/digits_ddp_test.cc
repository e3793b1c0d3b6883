#include <mutex>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/output_capture.h"
#include "sim/sim.h"
#include "train/examples/digits_ddp_lib.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

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
    DigitsRun run = RunOnSim(world_size, DigitsConfig());
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

TEST(DigitsDdpTest, BadConfigAndMissingFileAreErrors) {
  DigitsConfig bad;
  bad.global_batch_size = 0;
  sim::RunResult r1 = sim::Run(1, [&](int, comm::Communicator& comm) {
    return RunDigitsDdp(comm, bad).status();
  });
  EXPECT_THAT(r1.status().message(), HasSubstr("global_batch_size=0"));
  DigitsConfig missing;
  missing.data_path = "no/such/file.csv";
  sim::RunResult r2 = sim::Run(2, [&](int, comm::Communicator& comm) {
    return RunDigitsDdp(comm, missing).status();
  });
  EXPECT_THAT(r2.status().message(), HasSubstr("no/such/file.csv"));
}

}  // namespace
}  // namespace tandem::train
