#include "base/dtype.h"

#include <cmath>
#include <cstdint>
#include <set>
#include <string>

#include "gtest/gtest.h"

namespace tandem {
namespace {

// The numbering is a contract (tensor metadata and collective fingerprints
// carry the integer): tensor's and comm's dtypes once numbered i32 and i64
// in opposite orders, so a cast between them swapped the two widths.
TEST(DTypeTest, NumberingIsPinned) {
  EXPECT_EQ(static_cast<int>(DType::kF32), 0);
  EXPECT_EQ(static_cast<int>(DType::kF64), 1);
  EXPECT_EQ(static_cast<int>(DType::kF16), 2);
  EXPECT_EQ(static_cast<int>(DType::kBF16), 3);
  EXPECT_EQ(static_cast<int>(DType::kI64), 4);
  EXPECT_EQ(static_cast<int>(DType::kI32), 5);
  EXPECT_EQ(static_cast<int>(DType::kU8), 6);
  int i = 0;
  for (DType d : kEveryDType) EXPECT_EQ(static_cast<int>(d), i++);
}

TEST(DTypeTest, SizesNamesAndKinds) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4);
  EXPECT_EQ(DTypeSize(DType::kF64), 8);
  EXPECT_EQ(DTypeSize(DType::kF16), 2);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2);
  EXPECT_EQ(DTypeSize(DType::kI64), 8);
  EXPECT_EQ(DTypeSize(DType::kI32), 4);
  EXPECT_EQ(DTypeSize(DType::kU8), 1);
  EXPECT_EQ(DTypeSize(static_cast<DType>(7)), 0);
  EXPECT_STREQ(DTypeName(DType::kI64), "i64");
  EXPECT_STREQ(DTypeName(DType::kI32), "i32");
  EXPECT_STREQ(DTypeName(DType::kU8), "u8");
  EXPECT_STREQ(DTypeName(static_cast<DType>(-3)), "dtype(-3)");
  EXPECT_STREQ(DTypeName(static_cast<DType>(127)), "dtype(127)");
  std::set<std::string> names;
  for (DType d : kEveryDType) {
    EXPECT_TRUE(IsValidDType(d));
    names.insert(DTypeName(d));
  }
  EXPECT_EQ(names.size(), std::size(kEveryDType));
  EXPECT_FALSE(IsValidDType(static_cast<DType>(7)));
  EXPECT_TRUE(IsFloatingPoint(DType::kBF16));
  EXPECT_FALSE(IsFloatingPoint(DType::kU8));
}

TEST(DTypeTest, DTypeOfMatchesTheElementWidth) {
  EXPECT_EQ(DTypeSize(DTypeOf<int32_t>::value),
            static_cast<int64_t>(sizeof(int32_t)));
  EXPECT_EQ(DTypeSize(DTypeOf<int64_t>::value),
            static_cast<int64_t>(sizeof(int64_t)));
  EXPECT_EQ(DTypeSize(DTypeOf<uint8_t>::value), 1);
  EXPECT_EQ(DTypeSize(DTypeOf<Half>::value), 2);
  EXPECT_EQ(DTypeSize(DTypeOf<double>::value), 8);
}

TEST(DTypeTest, SixteenBitFloatsWidenExactlyAndNarrowToNearestEven) {
  EXPECT_TRUE(Is16BitFloat(DType::kF16));
  EXPECT_TRUE(Is16BitFloat(DType::kBF16));
  EXPECT_FALSE(Is16BitFloat(DType::kF32));
  const uint16_t f16[] = {0x3C00, 0x3555, 0x0001, 0xFC00};  // 1, ~1/3, 2^-24
  float wide[4];
  Widen16BitFloats(DType::kF16, f16, wide, 4);
  EXPECT_EQ(wide[0], 1.0f);
  EXPECT_EQ(wide[1], 0.333251953125f);
  EXPECT_EQ(wide[2], 0x1.0p-24f);
  EXPECT_EQ(wide[3], -INFINITY);
  uint16_t back[4];
  Narrow16BitFloats(DType::kF16, wide, back, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(back[i], f16[i]) << i;
  const float values[] = {1.0f, 1.0f + 0x1.0p-8f, 1.0f + 0x1.8p-8f};
  uint16_t bf16[3];
  Narrow16BitFloats(DType::kBF16, values, bf16, 3);
  EXPECT_EQ(bf16[0], 0x3F80);  // 1
  EXPECT_EQ(bf16[1], 0x3F80);  // a tie rounds to even
  EXPECT_EQ(bf16[2], 0x3F81);  // above the tie rounds up
  Widen16BitFloats(DType::kBF16, bf16, wide, 3);
  EXPECT_EQ(wide[2], 1.0f + 0x1.0p-7f);
}

}  // namespace
}  // namespace tandem
