// What a machine without a GPU (or a build without CUDA) sees: registration
// works, and asking for CUDA memory is a FailedPrecondition that says why —
// never a crash. Runs everywhere; skips itself where a GPU is present.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tensor/allocator.h"
#include "tensor/cuda/cuda.h"
#include "tensor/cuda/memory.h"
#include "tensor/dispatch/op_table.h"
#include "tensor/tensor.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

TEST(NoDeviceTest, LinkingRegistersTheBackend) {
  // A static initialiser of //tensor/cuda did this before main().
  EXPECT_TRUE(GetAllocator(Device::CUDA(0)).ok());
  // Kernels exist only where CUDA was built in.
  EXPECT_EQ(internal::HasAnyKernel(DeviceType::kCUDA), cuda::BuiltWithCuda());
  EXPECT_TRUE(cuda::Register().ok());  // idempotent
  EXPECT_TRUE(GetAllocator(Device::CUDA(0)).ok());
}

TEST(NoDeviceTest, CudaTensorIsAClearError) {
  std::string reason;
  if (cuda::DeviceCount(&reason) > 0) {
    GTEST_SKIP() << "a CUDA device is present; the gpu tests cover it";
  }
  EXPECT_FALSE(reason.empty());
  const std::string expected = cuda::BuiltWithCuda()
                                   ? "cuda:1 is not available"
                                   : "tandem was built without CUDA";

  absl::StatusOr<Tensor> t =
      Tensor::Zeros({2, 3}, DType::kF32, Device::CUDA(1));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(t.status().message(), HasSubstr("cuda:1"));
  EXPECT_THAT(t.status().message(), HasSubstr(expected));
  EXPECT_THAT(t.status().message(), HasSubstr("Device::CPU()"));

  Tensor host = Tensor::FromVector(std::vector<float>{1, 2, 3}).value();
  absl::StatusOr<Tensor> moved = host.To(Device::CUDA(1));
  ASSERT_FALSE(moved.ok());
  EXPECT_EQ(moved.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(NoDeviceTest, RuntimeCallsSayWhy) {
  if (cuda::DeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  absl::StatusOr<CudaStreamHandle> stream = cuda::CurrentStream(0);
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(cuda::Synchronize(0).ok());
  EXPECT_FALSE(cuda::SetCurrentStream(0, CudaStreamHandle{}).ok());
  EXPECT_TRUE(cuda::EmptyCache().ok());  // nothing cached, nothing to do
}

TEST(NoDeviceTest, AllocationRounding) {
  EXPECT_EQ(cuda::RoundAllocationSize(1), 512);
  EXPECT_EQ(cuda::RoundAllocationSize(512), 512);
  EXPECT_EQ(cuda::RoundAllocationSize(513), 1024);
  EXPECT_EQ(cuda::RoundAllocationSize(1 << 20), 1 << 20);
  // Above 1 MiB: quarters of the power-of-two octave.
  EXPECT_EQ(cuda::RoundAllocationSize((1 << 20) + 1), (1 << 20) + (1 << 18));
  EXPECT_EQ(cuda::RoundAllocationSize(3 << 20), 3 << 20);
  EXPECT_EQ(cuda::RoundAllocationSize((3 << 20) + 1), (7 << 20) / 2);
  EXPECT_EQ(cuda::RoundAllocationSize(int64_t{100} << 20), int64_t{112} << 20);
  // Never more than 25% slack above 1 MiB.
  for (int64_t n = (1 << 20) + 1; n < (int64_t{1} << 34); n = n * 3 / 2 + 7) {
    const int64_t r = cuda::RoundAllocationSize(n);
    EXPECT_GE(r, n);
    EXPECT_LE(r, n + n / 4) << n;
  }
}

TEST(NoDeviceTest, StatsToString) {
  cuda::MemoryStats s;
  s.bytes_in_use = 3 << 20;
  s.peak_bytes_in_use = 4 << 20;
  s.bytes_cached = 1 << 19;
  s.num_allocations = 10;
  s.num_cache_hits = 7;
  s.num_device_mallocs = 3;
  EXPECT_EQ(s.ToString(),
            "in use 3.0 MiB (peak 4.0 MiB), cached 0.5 MiB, 10 allocations "
            "(7 from cache), 3 cudaMalloc, 0 cudaFree");
}

}  // namespace
}  // namespace tandem
