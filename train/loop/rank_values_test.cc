// GatherRankValues / RankValues: every rank's values come back bit for bit
// (values whose decimal print would round, and -0.0) under the documented
// keys; a missing or garbled key is an InvalidArgument naming it.
#include "train/loop/rank_values.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

constexpr const char* kNames[] = {"sum", "count"};

uint64_t Bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof(b));
  return b;
}

TEST(RankValuesTest, RoundTripsEveryRanksBits) {
  sim::RunResult r =
      sim::Run(3, [&](int rank, comm::Communicator& comm) -> absl::Status {
        const std::vector<double> mine = {0.1 * (rank + 1) / 3.0,
                                          rank == 1 ? -0.0 : 1e300 * rank};
        TANDEM_ASSIGN_OR_RETURN(
            checkpoint::Metadata extra,
            GatherRankValues(comm, Device::CPU(), "test", "t.", kNames, mine));
        EXPECT_EQ(extra.size(), 6u);
        EXPECT_EQ(extra.count("t.count_bits.2"), 1u);
        for (int other = 0; other < 3; ++other) {
          TANDEM_ASSIGN_OR_RETURN(
              std::vector<double> back,
              RankValues(extra, "test", "t.", kNames, other));
          const std::vector<double> want = {0.1 * (other + 1) / 3.0,
                                            other == 1 ? -0.0 : 1e300 * other};
          EXPECT_EQ(Bits(back[0]), Bits(want[0]));
          EXPECT_EQ(Bits(back[1]), Bits(want[1]));
        }
        extra.erase("t.sum_bits.1");
        absl::StatusOr<std::vector<double>> missing =
            RankValues(extra, "test", "t.", kNames, 1);
        EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(missing.status().message(),
                    HasSubstr("test: the checkpoint has no valid "
                              "\"t.sum_bits.1\" entry"));
        extra["t.sum_bits.1"] = std::string(1, 'x');  // a garbled value
        EXPECT_FALSE(RankValues(extra, "test", "t.", kNames, 1).ok());
        return absl::OkStatus();
      });
  EXPECT_TRUE(r.status().ok()) << r.status();
}

// In the virtual world a rank holds several virtual ranks' values, keyed by
// virtual rank: rank 1 of 2 holding virtual ranks 2 and 3.
TEST(RankValuesTest, SeveralVirtualRanksPerRankAreKeyedByVirtualRank) {
  sim::RunResult r =
      sim::Run(2, [&](int rank, comm::Communicator& comm) -> absl::Status {
        std::vector<double> mine;
        for (int k = 2 * rank; k < 2 * rank + 2; ++k) {
          mine.push_back(k + 0.5);  // "sum"
          mine.push_back(10 * k);   // "count"
        }
        TANDEM_ASSIGN_OR_RETURN(
            checkpoint::Metadata extra,
            GatherRankValues(comm, Device::CPU(), "test", "t.", kNames, mine));
        EXPECT_EQ(extra.size(), 8u);
        for (int k = 0; k < 4; ++k) {
          TANDEM_ASSIGN_OR_RETURN(std::vector<double> back,
                                  RankValues(extra, "test", "t.", kNames, k));
          EXPECT_EQ(back, (std::vector<double>{k + 0.5, 10.0 * k}));
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(r.status().ok()) << r.status();
}

TEST(RankValuesTest, CountsMustMatch) {
  sim::RunResult r =
      sim::Run(1, [&](int, comm::Communicator& comm) -> absl::Status {
        const std::vector<double> one = {1.0};
        absl::StatusOr<checkpoint::Metadata> m =
            GatherRankValues(comm, Device::CPU(), "test", "t.", kNames, one);
        EXPECT_EQ(m.status().code(), absl::StatusCode::kInternal);
        EXPECT_THAT(m.status().message(),
                    HasSubstr("expected 2 epoch sums per rank, found 1"));
        return absl::OkStatus();
      });
  EXPECT_TRUE(r.status().ok()) << r.status();
}

}  // namespace
}  // namespace tandem::train
