#include "comm/bandwidth.h"

#include <string>

#include "comm/types.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

TEST(BandwidthTest, NcclTestsFactors) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(OpKind::kAllReduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(OpKind::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(OpKind::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(OpKind::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(OpKind::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(OpKind::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(OpKind::kSend, 2), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(OpKind::kBarrier, 2), 0.0);
}

TEST(BandwidthTest, AlgAndBusBandwidth) {
  // 1 GB in 0.5 s: algbw 2 GB/s; all-reduce on 4 ranks: busbw 2 * 1.5.
  EXPECT_DOUBLE_EQ(AlgBandwidthGBps(1000000000, 0.5), 2.0);
  EXPECT_DOUBLE_EQ(BusBandwidthGBps(OpKind::kAllReduce, 4, 1000000000, 0.5),
                   3.0);
  EXPECT_DOUBLE_EQ(AlgBandwidthGBps(100, 0.0), 0.0);
}

TEST(BandwidthTest, TableLayout) {
  BandwidthTable table(OpKind::kAllReduce, 2);
  EXPECT_EQ(table.Header(),
            "#         size         count      type   redop |     time   "
            "algbw   busbw  #wrong\n"
            "#          (B)    (elements)                   |     (us)  "
            "(GB/s)  (GB/s)        \n");
  BandwidthRow row;
  row.bytes = 4096;
  row.count = 1024;
  row.dtype = DType::kF32;
  row.redop = ReduceOp::kSum;
  row.seconds = 2.048e-6;
  row.wrong = 0;
  EXPECT_EQ(table.Row(row),
            "          4096          1024       f32     sum |     2.05    "
            "2.00    2.00       0\n");
  row.redop.reset();
  row.seconds = 0.0125;
  row.wrong = -1;
  EXPECT_EQ(table.Row(row),
            "          4096          1024       f32    none |    12500    "
            "0.00    0.00     N/A\n");
}

}  // namespace
}  // namespace tandem::comm
