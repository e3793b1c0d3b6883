#include "comm/nccl/cuda_probe.h"

#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

TEST(CudaProbeTest, ReportsBuildAndDevices) {
  absl::StatusOr<CudaProbe> probe = ProbeCuda();
  ASSERT_TRUE(probe.ok()) << probe.status();
  if (probe->built_with_cuda) {
    // NCCL versions are encoded as major*10000 + minor*100 + patch (>= 2.x).
    EXPECT_GE(probe->nccl_version, 20000);
    EXPECT_GT(probe->runtime_version, 0);
  } else {
    EXPECT_EQ(probe->device_count, 0);
    EXPECT_EQ(probe->nccl_version, 0);
  }
  if (probe->device_count == 0) {
    EXPECT_FALSE(probe->no_device_reason.empty());
  }
}

TEST(CudaProbeTest, KernelRunsOnEveryDevice) {
  absl::StatusOr<CudaProbe> probe = ProbeCuda();
  ASSERT_TRUE(probe.ok()) << probe.status();
  if (probe->device_count == 0) {
    GTEST_SKIP() << probe->no_device_reason;
  }
  for (int d = 0; d < probe->device_count; ++d) {
    EXPECT_TRUE(RunProbeKernel(d).ok()) << "device " << d;
  }
}

}  // namespace
}  // namespace tandem::comm
