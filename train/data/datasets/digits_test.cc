// LoadDigitsSplit on simulated ranks: the shipped file's split, shared by
// the ranks of one process and agreed on by all; the files it refuses.
#include "train/data/datasets/digits.h"

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

constexpr char kDigits[] = "train/data/digits.csv.gz";

// A CSV of `rows` rows of `columns` pixels and a label; `bump` changes one
// pixel.
std::string WriteCsv(const std::string& name, int rows, int columns = 64,
                     bool bump = false) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream f(path);
  for (int row = 0; row < rows; ++row) {
    for (int col = 0; col < columns; ++col) {
      f << (bump && row == 7 && col == 9 ? 5 : (row + col) % 17) << ",";
    }
    f << row % 10 << "\n";
  }
  return path;
}

// LoadDigitsSplit(options) on `world` simulated ranks; each rank's split.
std::vector<std::shared_ptr<const DigitsSplit>> LoadOn(
    int world, const std::vector<DigitsSplitOptions>& per_rank,
    std::vector<absl::Status>* statuses) {
  std::vector<std::shared_ptr<const DigitsSplit>> out(world);
  sim::RunResult run = sim::Run(world, [&](int rank, comm::Communicator& comm) {
    const DigitsSplitOptions& options =
        per_rank[per_rank.size() == 1 ? 0 : rank];
    absl::StatusOr<std::shared_ptr<const DigitsSplit>> split =
        LoadDigitsSplit(options, comm, Device::CPU());
    if (!split.ok()) return split.status();
    out[rank] = *split;
    return absl::OkStatus();
  });
  *statuses = run.ranks;
  return out;
}

TEST(DigitsTest, TheShippedFileSplitOnceAndShared) {
  std::vector<absl::Status> statuses;
  std::vector<std::shared_ptr<const DigitsSplit>> splits =
      LoadOn(2, {{.data_path = kDigits}}, &statuses);
  for (const absl::Status& s : statuses) ASSERT_TRUE(s.ok()) << s;
  // One read-only copy for the ranks of this process.
  EXPECT_EQ(splits[0], splits[1]);
  const DigitsSplit& split = *splits[0];
  EXPECT_EQ(split.train.size(), 1438);
  EXPECT_EQ(split.test.size(), 359);  // llround(0.2 * 1797)
  EXPECT_EQ(split.train.features.shape(), (std::vector<int64_t>{1438, 64}));
  // Pixels scaled from 0..16 to 0..1.
  float largest = 0;
  const float* x = split.train.features.data<float>();
  for (int64_t i = 0; i < split.train.features.numel(); ++i) {
    largest = std::max(largest, x[i]);
  }
  EXPECT_EQ(largest, 1.0f);
  // Another seed, another split of the same rows.
  std::vector<std::shared_ptr<const DigitsSplit>> other =
      LoadOn(1, {{.data_path = kDigits, .split_seed = 1}}, &statuses);
  ASSERT_TRUE(statuses[0].ok()) << statuses[0];
  EXPECT_EQ(other[0]->train.size(), 1438);
  EXPECT_NE(other[0]->hash, split.hash);
}

TEST(DigitsTest, RanksWithDifferentRowsFailNamingTheHash) {
  const std::string a = WriteCsv("a.csv", 40);
  const std::string b = WriteCsv("b.csv", 40, 64, /*bump=*/true);
  std::vector<absl::Status> statuses;
  LoadOn(2, {{.data_path = a}, {.data_path = b}}, &statuses);
  for (const absl::Status& s : statuses) {
    EXPECT_THAT(std::string(s.message()),
                MatchesRegex("ranks disagree on the configuration: dataset "
                             "hash is [0-9a-f]{16} on rank 0 and [0-9a-f]{16} "
                             "on rank 1; start every rank with the same flags "
                             "and data"));
  }
}

TEST(DigitsTest, RefusesTooFewRowsAndOtherShapes) {
  const std::string few = WriteCsv("few.csv", 2);
  std::vector<absl::Status> statuses;
  LoadOn(2, {{.data_path = few}}, &statuses);
  EXPECT_EQ(
      statuses[0],
      absl::InvalidArgumentError(
          few + ": 2 data row(s); need at least 3 for one test sample "
                "(test_fraction 0.2) and one training sample on each of 2 "
                "rank(s): add rows or use fewer ranks"));
  const std::string narrow = WriteCsv("narrow.csv", 40, 3);
  LoadOn(1, {{.data_path = narrow}}, &statuses);
  EXPECT_THAT(statuses[0].message(),
              HasSubstr(narrow + ": expected 64 pixel columns and a label"));
  LoadOn(1, {{.data_path = "/nonexistent/digits.csv"}}, &statuses);
  EXPECT_THAT(statuses[0].message(), HasSubstr("/nonexistent/digits.csv"));
}

}  // namespace
}  // namespace tandem::train
