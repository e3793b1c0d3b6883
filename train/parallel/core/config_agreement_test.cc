// CheckRanksAgree on the simulated cluster, each rank passing its own values.
#include "train/parallel/core/config_agreement.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

// Runs CheckRanksAgree on `n` ranks with entries(rank); returns the statuses.
std::vector<absl::Status> Agree(
    int n, const std::function<std::vector<ConfigEntry>(int)>& entries) {
  sim::RunResult result = sim::Run(n, [&](int rank, comm::Communicator& comm) {
    return CheckRanksAgree(comm, Device::CPU(), entries(rank));
  });
  EXPECT_TRUE(result.launch.ok()) << result.launch;
  return result.ranks;
}

void ExpectSameOnEveryRank(const std::vector<absl::Status>& statuses,
                           const std::string& message) {
  for (const absl::Status& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(s.message(), message);
  }
}

TEST(ConfigAgreementTest, SameConfigurationPasses) {
  for (const absl::Status& s : Agree(3, [](int) {
         return std::vector<ConfigEntry>{
             {"--epochs", int64_t{3}}, {"--lr", 0.5}, {"--model", "mlp"}};
       })) {
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(ConfigAgreementTest, NamesTheFlagAndEachRanksValue) {
  ExpectSameOnEveryRank(
      Agree(2,
            [](int rank) {
              return std::vector<ConfigEntry>{{"--epochs", 3 + rank},
                                              {"--lr", 0.5}};
            }),
      "ranks disagree on the configuration: --epochs is 3 on rank 0 and 4 on "
      "rank 1; start every rank with the same flags and data");
}

TEST(ConfigAgreementTest, GroupsRanksAndListsEveryDifferingEntry) {
  ExpectSameOnEveryRank(
      Agree(4,
            [](int rank) {
              std::vector<ConfigEntry> e = {
                  {"--epochs", rank == 2 ? 5 : 3},
                  {"--lr", rank % 2 == 0 ? 0.1 : 0.30000000000000004},
                  {"--seed", uint64_t{7}}};
              if (rank == 3) e.push_back({"dataset hash", HashHex(42)});
              return e;
            }),
      "ranks disagree on the configuration: --epochs is 3 on ranks 0, 1 and "
      "3 and 5 on rank 2; --lr is 0.1 on ranks 0 and 2 and "
      "0.30000000000000004 on ranks 1 and 3; dataset hash is (absent) on "
      "ranks 0, 1 and 2 and 000000000000002a on rank 3; start every rank "
      "with the same flags and data");
}

// Values of any length and content (separators included) round-trip, and a
// value that only looks like another one after a lossy print still differs.
TEST(ConfigAgreementTest, LongAndOddValuesAndNearbyDoublesAreCompared) {
  const std::vector<absl::Status> statuses = Agree(3, [](int rank) {
    return std::vector<ConfigEntry>{
        {"--data", rank == 1 ? std::string(100, 'x') + ":9:" : "a"},
        {"--lr", rank == 2 ? 0.5000000001 : 0.5}};
  });
  ExpectSameOnEveryRank(
      statuses,
      "ranks disagree on the configuration: --data is a on ranks 0 "
      "and 2 and " +
          std::string(100, 'x') +
          ":9: on rank 1; --lr is 0.5 on ranks 0 and 1 and "
          "0.5000000001 on rank 2; start every rank with the same "
          "flags and data");
}

TEST(ConfigAgreementTest, EntryFormatsAndHashes) {
  EXPECT_EQ(ConfigEntry("a", std::numeric_limits<double>::infinity()).value,
            "inf");
  EXPECT_EQ(ConfigEntry("a", 0.1).value, "0.1");
  EXPECT_EQ(ConfigEntry("a", int64_t{-3}).value, "-3");
  EXPECT_EQ(HashHex(HashBytes("", 0)), "cbf29ce484222325");   // FNV-1a basis
  EXPECT_EQ(HashHex(HashBytes("a", 1)), "af63dc4c8601ec8c");  // FNV-1a("a")
  // Hashing in pieces equals hashing the whole.
  EXPECT_EQ(HashBytes("bc", 2, HashBytes("a", 1)), HashBytes("abc", 3));
}

}  // namespace
}  // namespace tandem::train
