#include "comm/validate.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "comm/types.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

class ValidateTest : public ::testing::Test {
 protected:
  std::vector<float> a_ = std::vector<float>(64);
  std::vector<float> b_ = std::vector<float>(256);
};

TEST_F(ValidateTest, GoodArgumentsPass) {
  EXPECT_TRUE(ValidateAllReduce(HostView(a_.data(), 64, DType::kF32),
                                ReduceOp::kAvg, 0, 4)
                  .ok());
  EXPECT_TRUE(
      ValidateAllReduce(HostView(nullptr, 0, DType::kI32), ReduceOp::kSum, 0, 1)
          .ok());
  EXPECT_TRUE(ValidateAllGather(HostView(a_.data(), 64, DType::kF32),
                                HostView(b_.data(), 256, DType::kF32), 1, 4)
                  .ok());
  EXPECT_TRUE(ValidateReduceScatter(HostView(b_.data(), 256, DType::kF32),
                                    HostView(a_.data(), 64, DType::kF32),
                                    ReduceOp::kMax, 3, 4)
                  .ok());
  EXPECT_TRUE(
      ValidateBroadcast(HostView(a_.data(), 64, DType::kF32), 3, 0, 4).ok());
  EXPECT_TRUE(ValidatePointToPoint(
                  OpKind::kSend, HostView(a_.data(), 64, DType::kF32), 2, 0, 4)
                  .ok());
}

TEST_F(ValidateTest, InPlaceFormsAreAllowed) {
  // AllGather: send is rank r's slice of recv.
  EXPECT_TRUE(ValidateAllGather(HostView(b_.data() + 128, 64, DType::kF32),
                                HostView(b_.data(), 256, DType::kF32), 2, 4)
                  .ok());
  // ReduceScatter: recv is rank r's slice of send.
  EXPECT_TRUE(ValidateReduceScatter(HostView(b_.data(), 256, DType::kF32),
                                    HostView(b_.data() + 64, 64, DType::kF32),
                                    ReduceOp::kSum, 1, 4)
                  .ok());
}

TEST_F(ValidateTest, OtherOverlapsAreRejected) {
  absl::Status s =
      ValidateAllGather(HostView(b_.data() + 64, 64, DType::kF32),
                        HostView(b_.data(), 256, DType::kF32), 2, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), AllOf(HasSubstr("AllGather on rank 2"),
                                HasSubstr("128 elements into recv"),
                                HasSubstr("found send at element 64")));
  s = ValidateReduceScatter(HostView(b_.data(), 256, DType::kF32),
                            HostView(b_.data() + 10, 64, DType::kF32),
                            ReduceOp::kSum, 0, 4);
  EXPECT_THAT(Message(s), AllOf(HasSubstr("recv overlaps send"),
                                HasSubstr("found recv at element 10")));
}

TEST_F(ValidateTest, NullBuffer) {
  absl::Status s = ValidateAllReduce(HostView(nullptr, 5, DType::kF32),
                                     ReduceOp::kSum, 2, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s),
              AllOf(HasSubstr("AllReduce on rank 2"), HasSubstr("buf is null"),
                    HasSubstr("count is 5"),
                    HasSubstr("expected a pointer to 5 f32 elements")));
}

TEST_F(ValidateTest, NegativeCountAndUnknownDType) {
  EXPECT_THAT(Message(ValidateAllReduce(HostView(a_.data(), -1, DType::kF32),
                                        ReduceOp::kSum, 0, 2)),
              HasSubstr("buf.count must be >= 0; found -1"));
  EXPECT_THAT(
      Message(ValidateAllReduce(HostView(a_.data(), 1, static_cast<DType>(77)),
                                ReduceOp::kSum, 0, 2)),
      HasSubstr("unknown dtype dtype(77)"));
  EXPECT_THAT(Message(ValidateAllReduce(HostView(a_.data(), 1, DType::kF32),
                                        static_cast<ReduceOp>(9), 0, 2)),
              HasSubstr("unknown reduce op reduce_op(9)"));
}

TEST_F(ValidateTest, AvgOnIntegers) {
  for (DType dtype : {DType::kI32, DType::kI64, DType::kU8}) {
    absl::Status s =
        ValidateAllReduce(HostView(a_.data(), 4, dtype), ReduceOp::kAvg, 1, 2);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(s), AllOf(HasSubstr("avg needs a floating-point"),
                                  HasSubstr(DTypeName(dtype))));
  }
  EXPECT_THAT(Message(ValidateReduceScatter(HostView(b_.data(), 8, DType::kI32),
                                            HostView(a_.data(), 4, DType::kI32),
                                            ReduceOp::kAvg, 0, 2)),
              HasSubstr("ReduceScatter on rank 0: reduce op avg"));
}

TEST_F(ValidateTest, CountMismatches) {
  absl::Status s =
      ValidateAllGather(HostView(a_.data(), 64, DType::kF32),
                        HostView(b_.data(), 250, DType::kF32), 1, 4);
  EXPECT_THAT(Message(s),
              HasSubstr("AllGather on rank 1: recv.count must be world size x "
                        "send.count = 4 x 64 = 256 elements; found 250"));
  s = ValidateReduceScatter(HostView(b_.data(), 255, DType::kF32),
                            HostView(a_.data(), 64, DType::kF32),
                            ReduceOp::kSum, 0, 4);
  EXPECT_THAT(Message(s),
              HasSubstr("send.count must be world size x recv.count = 4 x 64 "
                        "= 256 elements; found 255"));
  s = ValidateAllGather(HostView(a_.data(), 64, DType::kF32),
                        HostView(b_.data(), 256, DType::kF64), 1, 4);
  EXPECT_THAT(Message(s), HasSubstr("same dtype; found send f32 and recv f64"));
}

TEST_F(ValidateTest, RootAndPeerRange) {
  EXPECT_THAT(
      Message(ValidateBroadcast(HostView(a_.data(), 4, DType::kF32), 4, 0, 4)),
      HasSubstr("Broadcast on rank 0: root must be in [0, 4) for world size 4; "
                "found root 4"));
  EXPECT_THAT(
      Message(ValidateBroadcast(HostView(a_.data(), 4, DType::kF32), -1, 0, 4)),
      HasSubstr("found root -1"));
  EXPECT_THAT(Message(ValidatePointToPoint(
                  OpKind::kRecv, HostView(a_.data(), 4, DType::kF32), 7, 1, 2)),
              HasSubstr("Recv on rank 1: peer must be in [0, 2) for world size "
                        "2; found peer 7"));
  EXPECT_THAT(Message(ValidatePointToPoint(
                  OpKind::kSend, HostView(a_.data(), 4, DType::kF32), 1, 1, 2)),
              HasSubstr("Send on rank 1: peer must be another rank; found peer "
                        "1, this rank itself"));
}

TEST_F(ValidateTest, WorldSize) {
  EXPECT_THAT(Message(ValidateWorldSize(0)),
              HasSubstr("world size must be at least 1; found 0"));
  EXPECT_TRUE(ValidateWorldSize(1).ok());
}

TEST_F(ValidateTest, MemorySpace) {
  BufferView d{a_.data(), 4, DType::kF32, MemorySpace::kCuda, 0};
  absl::Status s = ValidateMemorySpace(OpKind::kAllReduce, "buf", d,
                                       MemorySpace::kHost, "sim", 3);
  EXPECT_THAT(Message(s),
              AllOf(HasSubstr("AllReduce on rank 3: the sim backend moves host "
                              "memory only; found buf in f32[4] cuda:0"),
                    HasSubstr("Copy the data to host memory")));
}

}  // namespace
}  // namespace tandem::comm
