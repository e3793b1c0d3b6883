#include "tensor/allocator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "tensor/tensor.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

// A stand-in "CUDA" allocator backed by host memory, counting live bytes.
class FakeDeviceAllocator : public Allocator {
 public:
  absl::StatusOr<void*> Allocate(Device, int64_t nbytes) override {
    live_ += nbytes;
    return nbytes == 0 ? nullptr
                       : std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
  }
  void Deallocate(Device, void* ptr, int64_t nbytes) override {
    live_ -= nbytes;
    std::free(ptr);
  }
  std::atomic<int64_t> live_{0};
};

TEST(AllocatorTest, CpuAllocatesAligned) {
  std::shared_ptr<Allocator> cpu = CpuAllocator();
  void* p = cpu->Allocate(Device::CPU(), 100).value();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  cpu->Deallocate(Device::CPU(), p, 100);
  EXPECT_EQ(cpu->Allocate(Device::CPU(), 0).value(), nullptr);
  EXPECT_FALSE(cpu->Allocate(Device::CPU(), -1).ok());
  EXPECT_FALSE(cpu->Allocate(Device::CUDA(0), 8).ok());
}

TEST(AllocatorTest, RegistryLifecycle) {
  // Before registration: a clear error, not a crash.
  absl::StatusOr<std::shared_ptr<Allocator>> none =
      GetAllocator(Device::CUDA(1));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("cuda:1"));
  EXPECT_FALSE(RegisterAllocator(DeviceType::kCUDA, nullptr).ok());

  auto fake = std::make_shared<FakeDeviceAllocator>();
  ASSERT_TRUE(RegisterAllocator(DeviceType::kCUDA, fake).ok());
  {
    Tensor t = Tensor::Empty({4, 4}, DType::kF32, Device::CUDA(1)).value();
    EXPECT_EQ(t.device(), Device::CUDA(1));
    EXPECT_EQ(fake->live_.load(), 64);
    // The default CopyBytes refuses host<->device transfers.
    absl::StatusOr<Tensor> host = t.To(Device::CPU());
    ASSERT_FALSE(host.ok());
    EXPECT_EQ(host.status().code(), absl::StatusCode::kUnimplemented);
    // Ops have no CUDA kernels yet.
    EXPECT_FALSE(t.CopyFrom(t).ok());
  }
  EXPECT_EQ(fake->live_.load(), 0);  // returned when the tensor died
}

TEST(AllocatorTest, FreeAndReallocateKeepTheStorageAndItsViews) {
  auto fake = std::make_shared<FakeDeviceAllocator>();
  ASSERT_TRUE(RegisterAllocator(DeviceType::kCUDA, fake).ok());
  {
    absl::StatusOr<Tensor> t = Tensor::Empty({8}, DType::kF32, Device::CUDA(0));
    ASSERT_TRUE(t.ok()) << t.status();
    const Tensor view = *t->View(4, {4});
    Storage& storage = *t->storage();
    EXPECT_EQ(fake->live_.load(), 32);
    storage.Free();
    storage.Free();  // no-op
    EXPECT_FALSE(storage.is_allocated());
    EXPECT_EQ(fake->live_.load(), 0);
    EXPECT_EQ(view.raw_data(), nullptr);
    ASSERT_TRUE(storage.Reallocate().ok());
    ASSERT_TRUE(storage.Reallocate().ok());  // no-op
    EXPECT_TRUE(storage.is_allocated());
    EXPECT_EQ(fake->live_.load(), 32);
    EXPECT_EQ(view.raw_data(),
              static_cast<char*>(storage.data()) + 4 * sizeof(float));
  }
  EXPECT_EQ(fake->live_.load(), 0);
}

}  // namespace
}  // namespace tandem
