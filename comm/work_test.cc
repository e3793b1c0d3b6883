#include "comm/work.h"

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/fingerprint.h"
#include "comm/types.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

using ::testing::HasSubstr;

TEST(CompletedWorkTest, OkByDefault) {
  auto work = MakeCompletedWork();
  EXPECT_TRUE(work->IsCompleted());
  EXPECT_TRUE(work->Wait().ok());
  EXPECT_TRUE(work->Wait(absl::ZeroDuration()).ok());
}

TEST(CompletedWorkTest, CarriesItsErrorOnEveryWait) {
  auto work = MakeCompletedWork(absl::InvalidArgumentError("bad root"));
  EXPECT_TRUE(work->IsCompleted());
  EXPECT_EQ(work->Wait().message(), "bad root");
  EXPECT_EQ(work->Wait().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CompletedWorkTest, RecordIsClosedAtCreation) {
  Fingerprint fp = MakeFingerprint(OpKind::kAllReduce, DType::kF16, 10);
  fp.seq = 4;
  fp.reduce_op = ReduceOp::kMax;
  const absl::Time before = absl::Now();
  auto work = MakeCompletedWork(absl::OkStatus(), StartRecord(fp, 2));
  const WorkRecord& r = work->record();
  EXPECT_EQ(r.fp.DebugString(), "#4 AllReduce(f16 x 10, max)");
  EXPECT_EQ(r.bytes, 20);
  EXPECT_TRUE(r.completed());
  EXPECT_GE(r.start, before);
  EXPECT_GE(r.end, r.start);
  EXPECT_THAT(r.DebugString(),
              HasSubstr("#4 AllReduce(f16 x 10, max), 20 bytes"));
}

TEST(CompletedWorkTest, DefaultRecordStillHasTimes) {
  auto work = MakeCompletedWork();
  EXPECT_TRUE(work->record().completed());
  EXPECT_NE(work->record().start, absl::InfinitePast());
}

TEST(CompletedWorkTest, RejectedWorkIsNotNumbered) {
  Fingerprint fp = MakeFingerprint(OpKind::kSend, DType::kF32, 3);
  fp.seq = 9;
  fp.peer = 1;
  auto work = MakeRejectedWork(absl::InvalidArgumentError("bad"), fp, 4);
  EXPECT_EQ(work->record().fp.seq, -1);
  EXPECT_EQ(work->record().bytes, 12);
  EXPECT_EQ(work->Wait().message(), "bad");
}

// Whichever way it reads, the records' clock is absl::Now()'s wall time:
// a wrong base (a monotonic clock, seconds since boot) would be off by
// decades, a unit slip by orders of magnitude.
TEST(RecordClockTest, IsTheWallClock) {
  const absl::Time before = absl::Now();
  const absl::Time t = RecordClockNow();
  const absl::Time after = absl::Now();
  EXPECT_GE(t, before - absl::Milliseconds(10));
  EXPECT_LE(t, after + absl::Milliseconds(10));
}

TEST(StartRecordTest, BytesAreNcclTestsSize) {
  const int world = 4;
  Fingerprint fp = MakeFingerprint(OpKind::kAllGather, DType::kF64, 5);
  EXPECT_EQ(StartRecord(fp, world).bytes, 5 * 8 * world);  // recv buffer
  fp.op = OpKind::kReduceScatter;
  EXPECT_EQ(StartRecord(fp, world).bytes, 5 * 8 * world);  // send buffer
  fp.op = OpKind::kBroadcast;
  EXPECT_EQ(StartRecord(fp, world).bytes, 40);
  fp.op = OpKind::kRecv;
  EXPECT_EQ(StartRecord(fp, world).bytes, 40);
  EXPECT_EQ(
      StartRecord(MakeFingerprint(OpKind::kBarrier, DType::kF32, 0), world)
          .bytes,
      0);
  EXPECT_FALSE(StartRecord(fp, world).completed());
}

}  // namespace
}  // namespace tandem::comm
