#include "comm/fingerprint.h"

#include "comm/types.h"
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

}  // namespace
}  // namespace tandem::comm
