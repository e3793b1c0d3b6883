// Communicator::Split on the simulated cluster: membership and order,
// independence of sub-communicators, kNoColor, bad colors, and failures
// that end every wait at once.
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "sim/test_util.h"

namespace tandem::sim {
namespace {

using ::testing::HasSubstr;
using SplitTest = testing::ModeTest;

absl::Status Expect(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

// 6 ranks: colors r % 3, keys -r. Each color's AllReduce sums only its
// members; sub-ranks follow the keys; the parent still works afterwards,
// and a second split (by halves) is independent of the first.
TEST_P(SplitTest, GroupsByColorOrdersByKeyAndStaysIndependent) {
  RunResult r =
      RunRanks(6, [](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> sub,
                                comm.Split(rank % 3, -rank));
        TANDEM_RETURN_IF_ERROR(Expect(sub != nullptr && sub->size() == 2,
                                      "two members per color"));
        // Members of color c: c and c + 3; key -rank puts c + 3 first.
        TANDEM_RETURN_IF_ERROR(
            Expect(sub->rank() == (rank < 3 ? 1 : 0),
                   absl::StrCat("sub-rank of ", rank, " is ", sub->rank())));
        TANDEM_RETURN_IF_ERROR(
            Expect(sub->backend() == "sim", "a sim communicator"));
        std::vector<float> v = {static_cast<float>(rank)};
        TANDEM_RETURN_IF_ERROR(sub->AllReduce(comm::HostView(absl::MakeSpan(v)),
                                              comm::ReduceOp::kSum)
                                   ->Wait());
        const float color = static_cast<float>(rank % 3);
        TANDEM_RETURN_IF_ERROR(Expect(v[0] == color + color + 3,
                                      absl::StrCat("color sum ", v[0])));
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> half,
                                comm.Split(rank / 3, rank));
        std::vector<float> w = {1};
        TANDEM_RETURN_IF_ERROR(
            half->AllReduce(comm::HostView(absl::MakeSpan(w)),
                            comm::ReduceOp::kSum)
                ->Wait());
        TANDEM_RETURN_IF_ERROR(Expect(w[0] == 3, "halves of 3"));
        // Point to point inside a sub-communicator uses sub-ranks.
        std::vector<float> msg = {static_cast<float>(rank)};
        if (sub->rank() == 0) {
          TANDEM_RETURN_IF_ERROR(
              sub->Send(comm::HostView(absl::MakeSpan(msg)), 1)->Wait());
        } else {
          TANDEM_RETURN_IF_ERROR(
              sub->Recv(comm::HostView(absl::MakeSpan(msg)), 0)->Wait());
          TANDEM_RETURN_IF_ERROR(Expect(msg[0] == static_cast<float>(rank + 3),
                                        "the message of sub-rank 0"));
        }
        std::vector<float> all = {1};
        TANDEM_RETURN_IF_ERROR(
            comm.AllReduce(comm::HostView(absl::MakeSpan(all)),
                           comm::ReduceOp::kSum)
                ->Wait());
        return Expect(all[0] == 6, "the parent still sums all six");
      });
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST_P(SplitTest, NoColorTakesPartAndGetsNothing) {
  RunResult r =
      RunRanks(3, [](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(
            std::unique_ptr<comm::Communicator> sub,
            comm.Split(rank == 1 ? comm::Communicator::kNoColor : 0, 0));
        if (rank == 1) return Expect(sub == nullptr, "kNoColor gets nullptr");
        TANDEM_RETURN_IF_ERROR(Expect(sub->size() == 2, "ranks 0 and 2"));
        return sub->Barrier();
      });
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST_P(SplitTest, ABadColorFailsEveryRankNamingIt) {
  RunResult r =
      RunRanks(3, [](int rank, comm::Communicator& comm) -> absl::Status {
        return comm.Split(rank == 2 ? -5 : 0, 0).status();
      });
  for (const absl::Status& s : r.ranks) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("rank 2 passed color -5"));
  }
}

// Rank 3 fails before its sub-communicator's AllReduce; rank 1, the other
// member of its color, fails at once (not at the timeout), and so does the
// other color, which waits in its own sub-communicator.
TEST_P(SplitTest, AFailingRankEndsWaitsInEverySubCommunicator) {
  Options options;
  options.timeout = absl::Minutes(10);  // a hang would trip the watchdog
  RunResult r = RunRanks(
      4,
      [](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> sub,
                                comm.Split(rank % 2, rank));
        if (rank == 3) return absl::InternalError("rank 3 gives up");
        if (rank == 0) {  // waits for a message that never comes
          std::vector<float> v(1);
          return sub->Recv(comm::HostView(absl::MakeSpan(v)), 1)->Wait();
        }
        std::vector<float> v(1);
        return sub
            ->AllReduce(comm::HostView(absl::MakeSpan(v)), comm::ReduceOp::kSum)
            ->Wait();
      },
      options);
  EXPECT_THAT(r.ranks[3].message(), HasSubstr("rank 3 gives up"));
  // The others fail at once, each with what it saw first: the run aborted,
  // or (in rank 1's sub-communicator) its peer left without issuing the
  // operation.
  EXPECT_FALSE(r.ranks[0].ok());
  EXPECT_FALSE(r.ranks[1].ok());
  EXPECT_FALSE(r.ranks[2].ok());
}

// A mismatch inside a sub-communicator is checked like any other: both
// fingerprints named.
TEST_P(SplitTest, MismatchInsideASubCommunicatorNamesBoth) {
  RunResult r =
      RunRanks(2, [](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> sub,
                                comm.Split(0, rank));
        std::vector<float> v(rank == 0 ? 4 : 8);
        return sub
            ->AllReduce(comm::HostView(absl::MakeSpan(v)), comm::ReduceOp::kSum)
            ->Wait();
      });
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("x 4"));
  EXPECT_THAT(r.status().message(), HasSubstr("x 8"));
}

TANDEM_SIM_TEST_BOTH_MODES(SplitTest);

}  // namespace
}  // namespace tandem::sim
