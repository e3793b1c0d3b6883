#include "sim/fingerprint.h"

#include "comm/types.h"
#include "gtest/gtest.h"

namespace tandem::sim {
namespace {

TEST(FingerprintTest, DebugStrings) {
  Fingerprint fp;
  fp.seq = 3;
  fp.op = comm::OpKind::kAllReduce;
  fp.count = 1024;
  fp.reduce_op = comm::ReduceOp::kSum;
  EXPECT_EQ(fp.DebugString(), "#3 AllReduce(f32 x 1024, sum)");
  fp.op = comm::OpKind::kBroadcast;
  fp.reduce_op.reset();
  fp.root = 1;
  fp.dtype = comm::DType::kBF16;
  EXPECT_EQ(fp.DebugString(), "#3 Broadcast(bf16 x 1024, root 1)");
  Fingerprint send;
  send.op = comm::OpKind::kSend;
  send.dtype = comm::DType::kI64;
  send.count = 5;
  send.peer = 1;
  EXPECT_EQ(send.DebugString(), "#0 Send(i64 x 5, to rank 1)");
  Fingerprint barrier;
  barrier.seq = 7;
  EXPECT_EQ(barrier.DebugString(), "#7 Barrier()");
}

TEST(FingerprintTest, Matching) {
  Fingerprint a;
  a.op = comm::OpKind::kAllReduce;
  a.count = 8;
  a.reduce_op = comm::ReduceOp::kSum;
  Fingerprint b = a;
  EXPECT_TRUE(SameCollective(a, b));
  b.reduce_op = comm::ReduceOp::kMax;
  EXPECT_FALSE(SameCollective(a, b));
  b = a;
  b.root = 2;
  EXPECT_FALSE(SameCollective(a, b));
  Fingerprint send, recv;
  send.op = comm::OpKind::kSend;
  recv.op = comm::OpKind::kRecv;
  send.count = recv.count = 4;
  EXPECT_TRUE(MatchingPointToPoint(send, recv));
  recv.dtype = comm::DType::kF64;
  EXPECT_FALSE(MatchingPointToPoint(send, recv));
}

}  // namespace
}  // namespace tandem::sim
