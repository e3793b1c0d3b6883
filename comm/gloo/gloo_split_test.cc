// GlooCommunicator::Split with the ranks as threads of one process
// (GlooThreadLauncher): membership and order, collectives and Send/Recv in
// the children, kNoColor, bad colors, repeated and nested splits that never
// share store keys, the collective check inside a child, and a rank that
// never splits. The full contract on children runs in the conformance
// suite (GlooSplit cases of conformance_np*_test).
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "comm/gloo/gloo_thread_launcher.h"
#include "comm/types.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

using ::testing::HasSubstr;

absl::Status Expect(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

void ExpectAllOk(const std::vector<RankStatus>& statuses) {
  for (const RankStatus& s : statuses) {
    EXPECT_TRUE(s.status.ok()) << "rank " << s.rank << ": " << s.status;
  }
}

absl::StatusOr<float> SumOf(Communicator& comm, float value) {
  std::vector<float> v = {value};
  TANDEM_RETURN_IF_ERROR(
      comm.AllReduce(HostView(absl::MakeSpan(v)), ReduceOp::kSum)->Wait());
  return v[0];
}

// 6 ranks, colors r % 3, keys -r: each color sums only its members, sub-ranks
// follow the keys, point to point uses sub-ranks, the parent still works.
TEST(GlooSplitTest, GroupsByColorOrdersByKeyAndStaysIndependent) {
  GlooThreadLauncher launcher;
  ExpectAllOk(launcher.Run(6, [](int rank, Communicator& comm) -> absl::Status {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> sub,
                            comm.Split(rank % 3, -rank));
    TANDEM_RETURN_IF_ERROR(
        Expect(sub != nullptr && sub->size() == 2, "two members per color"));
    TANDEM_RETURN_IF_ERROR(Expect(sub->backend() == "gloo", "a gloo child"));
    // Members of color c: c and c + 3; key -rank puts c + 3 first.
    TANDEM_RETURN_IF_ERROR(
        Expect(sub->rank() == (rank < 3 ? 1 : 0),
               absl::StrCat("sub-rank of ", rank, " is ", sub->rank())));
    TANDEM_ASSIGN_OR_RETURN(float sum, SumOf(*sub, static_cast<float>(rank)));
    const float color = static_cast<float>(rank % 3);
    TANDEM_RETURN_IF_ERROR(
        Expect(sum == color + color + 3, absl::StrCat("color sum ", sum)));
    std::vector<float> msg = {static_cast<float>(rank)};
    if (sub->rank() == 0) {
      TANDEM_RETURN_IF_ERROR(
          sub->Send(HostView(absl::MakeSpan(msg)), 1)->Wait());
    } else {
      TANDEM_RETURN_IF_ERROR(
          sub->Recv(HostView(absl::MakeSpan(msg)), 0)->Wait());
      TANDEM_RETURN_IF_ERROR(Expect(msg[0] == static_cast<float>(rank + 3),
                                    "the message of sub-rank 0"));
    }
    TANDEM_ASSIGN_OR_RETURN(float all, SumOf(comm, 1));
    return Expect(all == 6, "the parent still sums all six");
  }));
}

TEST(GlooSplitTest, NoColorTakesPartAndGetsNothing) {
  GlooThreadLauncher launcher;
  ExpectAllOk(launcher.Run(3, [](int rank, Communicator& comm) -> absl::Status {
    TANDEM_ASSIGN_OR_RETURN(
        std::unique_ptr<Communicator> sub,
        comm.Split(rank == 1 ? Communicator::kNoColor : 0, 0));
    if (rank == 1) return Expect(sub == nullptr, "kNoColor gets nullptr");
    TANDEM_RETURN_IF_ERROR(Expect(sub->size() == 2, "ranks 0 and 2"));
    TANDEM_RETURN_IF_ERROR(Expect(sub->rank() == rank / 2, "sub-rank"));
    return sub->Barrier();
  }));
}

TEST(GlooSplitTest, ABadColorFailsEveryRankNamingIt) {
  GlooThreadLauncher launcher;
  std::vector<RankStatus> statuses =
      launcher.Run(3, [](int rank, Communicator& comm) -> absl::Status {
        return comm.Split(rank == 2 ? -5 : 0, 0).status();
      });
  for (const RankStatus& s : statuses) {
    EXPECT_EQ(s.status.code(), absl::StatusCode::kInvalidArgument) << s.status;
    EXPECT_THAT(s.status.message(), HasSubstr("rank 2 passed color -5"));
  }
}

// The same split twice gives two independent communicators (their own
// store keys and connections): operations interleaved on both never pair.
TEST(GlooSplitTest, RepeatedSplitsAreIndependent) {
  GlooThreadLauncher launcher;
  ExpectAllOk(launcher.Run(4, [](int rank, Communicator& comm) -> absl::Status {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> a,
                            comm.Split(rank % 2, rank));
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> b,
                            comm.Split(rank % 2, rank));
    std::vector<float> va = {1};
    std::vector<float> vb = {static_cast<float>(10 * (rank + 1))};
    // Issued a-then-b on even ranks, b-then-a on odd ones: each pairs
    // within its own color, so the orders never meet.
    std::unique_ptr<Work> wa, wb;
    if (rank % 2 == 0) {
      wa = a->AllReduce(HostView(absl::MakeSpan(va)), ReduceOp::kSum);
      wb = b->AllReduce(HostView(absl::MakeSpan(vb)), ReduceOp::kMax);
    } else {
      wb = b->AllReduce(HostView(absl::MakeSpan(vb)), ReduceOp::kMax);
      wa = a->AllReduce(HostView(absl::MakeSpan(va)), ReduceOp::kSum);
    }
    TANDEM_RETURN_IF_ERROR(wa->Wait());
    TANDEM_RETURN_IF_ERROR(wb->Wait());
    TANDEM_RETURN_IF_ERROR(Expect(va[0] == 2, "a sums its two members"));
    // Color 0 holds ranks 0 and 2 (max 30), color 1 ranks 1 and 3 (max 40).
    return Expect(vb[0] == (rank % 2 == 0 ? 30 : 40),
                  absl::StrCat("b's max is ", vb[0]));
  }));
}

// 8 ranks split into halves, each half into pairs: the two halves' children
// have the same split number and colors, yet their own keys (the parent's
// prefix is part of the child's), so each pair sums only itself.
TEST(GlooSplitTest, NestedSplitsNeverCollide) {
  GlooThreadLauncher launcher;
  ExpectAllOk(launcher.Run(8, [](int rank, Communicator& comm) -> absl::Status {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> half,
                            comm.Split(rank / 4, rank));
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> pair,
                            half->Split(half->rank() / 2, half->rank()));
    TANDEM_RETURN_IF_ERROR(Expect(pair->size() == 2 && pair->rank() == rank % 2,
                                  "pairs of consecutive ranks"));
    TANDEM_ASSIGN_OR_RETURN(float sum, SumOf(*pair, static_cast<float>(rank)));
    const float first = static_cast<float>(rank - rank % 2);
    TANDEM_RETURN_IF_ERROR(
        Expect(sum == first + first + 1, absl::StrCat("pair sum ", sum)));
    TANDEM_ASSIGN_OR_RETURN(float half_sum, SumOf(*half, 1));
    return Expect(half_sum == 4, "the half still sums four");
  }));
}

// The child checks its collectives like any gloo communicator: a count
// mismatch names both fingerprints.
TEST(GlooSplitTest, MismatchInsideAChildNamesBoth) {
  GlooThreadLauncher launcher;
  std::vector<RankStatus> statuses =
      launcher.Run(2, [](int rank, Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> sub,
                                comm.Split(0, rank));
        std::vector<float> v(rank == 0 ? 4 : 8);
        return sub->AllReduce(HostView(absl::MakeSpan(v)), ReduceOp::kSum)
            ->Wait();
      });
  for (const RankStatus& s : statuses) {
    EXPECT_EQ(s.status.code(), absl::StatusCode::kFailedPrecondition)
        << s.status;
    EXPECT_THAT(s.status.message(), HasSubstr("x 4"));
    EXPECT_THAT(s.status.message(), HasSubstr("x 8"));
  }
}

// A rank that leaves without calling Split: the others fail (when its
// connections close, at the latest at the timeout) naming the split,
// instead of hanging.
TEST(GlooSplitTest, ARankThatNeverSplitsFailsTheOthers) {
  GlooThreadLauncher launcher(absl::Seconds(3));
  std::vector<RankStatus> statuses =
      launcher.Run(2, [](int rank, Communicator& comm) -> absl::Status {
        if (rank == 1) return absl::OkStatus();
        return comm.Split(0, 0).status();
      });
  EXPECT_TRUE(statuses[1].status.ok());
  EXPECT_FALSE(statuses[0].status.ok());
  EXPECT_THAT(statuses[0].status.message(),
              HasSubstr("Split on gloo rank 0: exchanging colors and keys"));
}

// A rank that calls another collective instead: the split's checked
// all-gather fails on both, naming both operations.
TEST(GlooSplitTest, ARankThatCallsSomethingElseFailsBothNamingThem) {
  GlooThreadLauncher launcher;
  std::vector<RankStatus> statuses =
      launcher.Run(2, [](int rank, Communicator& comm) -> absl::Status {
        if (rank == 1) return comm.Barrier();
        return comm.Split(0, 0).status();
      });
  for (const RankStatus& s : statuses) {
    EXPECT_EQ(s.status.code(), absl::StatusCode::kFailedPrecondition)
        << s.status;
    EXPECT_THAT(s.status.message(), HasSubstr("AllGather"));
    EXPECT_THAT(s.status.message(), HasSubstr("Barrier"));
  }
}

}  // namespace
}  // namespace tandem::comm
