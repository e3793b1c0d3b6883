#include "comm/types.h"

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

TEST(DTypeTest, SizesAndNames) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4);
  EXPECT_EQ(DTypeSize(DType::kF64), 8);
  EXPECT_EQ(DTypeSize(DType::kF16), 2);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2);
  EXPECT_EQ(DTypeSize(DType::kI32), 4);
  EXPECT_EQ(DTypeSize(DType::kI64), 8);
  EXPECT_EQ(DTypeSize(DType::kU8), 1);
  EXPECT_STREQ(DTypeName(DType::kBF16), "bf16");
  EXPECT_STREQ(DTypeName(DType::kU8), "u8");
  EXPECT_STREQ(DTypeName(static_cast<DType>(42)), "dtype(42)");
  EXPECT_FALSE(IsValidDType(static_cast<DType>(42)));
  EXPECT_TRUE(IsFloatingPoint(DType::kF16));
  EXPECT_FALSE(IsFloatingPoint(DType::kI64));
}

TEST(ReduceOpTest, Names) {
  EXPECT_EQ(ReduceOpName(ReduceOp::kSum), "sum");
  EXPECT_EQ(ReduceOpName(ReduceOp::kAvg), "avg");
  EXPECT_EQ(ReduceOpName(ReduceOp::kProd), "prod");
  EXPECT_FALSE(IsValidReduceOp(static_cast<ReduceOp>(9)));
  EXPECT_EQ(OpKindName(OpKind::kReduceScatter), "ReduceScatter");
}

TEST(BufferViewTest, HostViewOfSpan) {
  std::vector<int64_t> v(5);
  BufferView b = HostView(absl::MakeSpan(v));
  EXPECT_EQ(b.data, v.data());
  EXPECT_EQ(b.count, 5);
  EXPECT_EQ(b.dtype, DType::kI64);
  EXPECT_EQ(b.space, MemorySpace::kHost);
  EXPECT_EQ(b.bytes(), 40);
  EXPECT_EQ(b.DebugString(), "i64[5] host");
  BufferView d{nullptr, 8, DType::kBF16, MemorySpace::kCuda, 1};
  EXPECT_EQ(d.DebugString(), "bf16[8] cuda:1");
}

}  // namespace
}  // namespace tandem::comm
