#include "comm/fingerprint.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "comm/types.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

TEST(FingerprintTest, DebugStrings) {
  Fingerprint fp;
  fp.seq = 3;
  fp.op = OpKind::kAllReduce;
  fp.count = 1024;
  fp.reduce_op = ReduceOp::kSum;
  EXPECT_EQ(fp.DebugString(), "#3 AllReduce(f32 x 1024, sum)");
  fp.op = OpKind::kBroadcast;
  fp.reduce_op.reset();
  fp.root = 1;
  fp.dtype = DType::kBF16;
  EXPECT_EQ(fp.DebugString(), "#3 Broadcast(bf16 x 1024, root 1)");
  Fingerprint send;
  send.op = OpKind::kSend;
  send.dtype = DType::kI64;
  send.count = 5;
  send.peer = 1;
  EXPECT_EQ(send.DebugString(), "#0 Send(i64 x 5, to rank 1)");
  Fingerprint barrier;
  barrier.seq = 7;
  EXPECT_EQ(barrier.DebugString(), "#7 Barrier()");
}

TEST(FingerprintTest, Matching) {
  Fingerprint a;
  a.op = OpKind::kAllReduce;
  a.count = 8;
  a.reduce_op = ReduceOp::kSum;
  Fingerprint b = a;
  EXPECT_TRUE(SameCollective(a, b));
  b.reduce_op = ReduceOp::kMax;
  EXPECT_FALSE(SameCollective(a, b));
  b = a;
  b.root = 2;
  EXPECT_FALSE(SameCollective(a, b));
  Fingerprint send, recv;
  send.op = OpKind::kSend;
  recv.op = OpKind::kRecv;
  send.count = recv.count = 4;
  EXPECT_TRUE(MatchingPointToPoint(send, recv));
  recv.dtype = DType::kF64;
  EXPECT_FALSE(MatchingPointToPoint(send, recv));
}

TEST(FingerprintTest, EncodeDecodeRoundTrips) {
  Fingerprint a;
  a.seq = 41;
  a.op = OpKind::kReduceScatter;
  a.dtype = DType::kBF16;
  a.count = 1 << 20;
  a.reduce_op = ReduceOp::kProd;
  Fingerprint b;
  ASSERT_TRUE(Decode(Encode(a), b));
  EXPECT_TRUE(SameCollective(a, b));
  EXPECT_EQ(b.DebugString(), a.DebugString());
  Fingerprint send;
  send.op = OpKind::kSend;
  send.peer = 3;
  ASSERT_TRUE(Decode(Encode(send), b));
  EXPECT_EQ(b.peer, 3);
  EXPECT_FALSE(b.reduce_op.has_value());
}

TEST(FingerprintTest, DecodeRejectsWordsOutOfRange) {
  Fingerprint fp;
  EncodedFingerprint words = Encode(fp);
  words[1] = 99;  // op
  EXPECT_FALSE(Decode(words, fp));
  words = Encode(fp);
  words[2] = -1;  // dtype
  EXPECT_FALSE(Decode(words, fp));
  words = Encode(fp);
  words[5] = 5;  // reduce op
  EXPECT_FALSE(Decode(words, fp));
}

std::vector<int64_t> Gathered(const std::vector<Fingerprint>& per_rank) {
  std::vector<int64_t> words;
  for (const Fingerprint& fp : per_rank) {
    const EncodedFingerprint e = Encode(fp);
    words.insert(words.end(), e.begin(), e.end());
  }
  return words;
}

TEST(FingerprintTest, GatheredFingerprintsThatAgreePass) {
  Fingerprint fp = MakeFingerprint(OpKind::kAllReduce, DType::kF32, 8);
  fp.reduce_op = ReduceOp::kSum;
  fp.seq = 4;
  EXPECT_TRUE(CompareGatheredFingerprints("mpi", 1, 3, Gathered({fp, fp, fp}),
                                          Encode(fp))
                  .ok());
}

TEST(FingerprintTest, GatheredFingerprintsThatDifferNameEachGroup) {
  Fingerprint a = MakeFingerprint(OpKind::kBroadcast, DType::kF32, 8);
  a.root = 0;
  a.seq = 2;
  Fingerprint b = a;
  b.root = 1;
  absl::Status s =
      CompareGatheredFingerprints("gloo", 2, 3, Gathered({a, b, a}), Encode(a));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              ::testing::StartsWith(
                  "gloo: collective mismatch seen on rank 2: ranks 0, 2 issued "
                  "#2 Broadcast(f32 x 8, root 0); rank 1 issued #2 "
                  "Broadcast(f32 x 8, root 1). Every rank must issue"));
  // Words that are no fingerprint (a rank running other code) are named too.
  std::vector<int64_t> words = Gathered({a, a});
  words[kFingerprintWords + 1] = 99;
  s = CompareGatheredFingerprints("mpi", 0, 2, words, Encode(a));
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("rank 1 issued unreadable "
                                   "fingerprint [2,99,"));
}

TEST(FingerprintTest, DebugEnvironmentOverridesTheRequest) {
  unsetenv("TANDEM_DISTRIBUTED_DEBUG");
  EXPECT_TRUE(CollectiveCheckRequested(true));
  EXPECT_FALSE(CollectiveCheckRequested(false));
  setenv("TANDEM_DISTRIBUTED_DEBUG", "OFF", 1);
  EXPECT_FALSE(CollectiveCheckRequested(true));
  setenv("TANDEM_DISTRIBUTED_DEBUG", "DETAIL", 1);
  EXPECT_TRUE(CollectiveCheckRequested(false));
  setenv("TANDEM_DISTRIBUTED_DEBUG", "INFO", 1);
  EXPECT_FALSE(CollectiveCheckRequested(false));
  unsetenv("TANDEM_DISTRIBUTED_DEBUG");
}

}  // namespace
}  // namespace tandem::comm
