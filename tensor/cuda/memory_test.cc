// The caching allocator (reuse, statistics, "no cudaMalloc per step",
// per-stream pools), the per-thread streams, and threads sharing a device.
// Skips without a GPU.
#include "tensor/cuda/memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "tensor/autograd/autograd.h"
#include "tensor/cuda/cuda.h"
#include "tensor/cuda/test_util.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem {
namespace {

using ::tandem::cuda_test::ExpectBitwiseEqual;
using ::tandem::cuda_test::kGpu;
using ::tandem::cuda_test::Random;
using ::tandem::cuda_test::ToCuda;
using ::tandem::cuda_test::ToHost;

cuda::MemoryStats Stats() { return cuda::GetMemoryStats(0).value(); }

TEST(CudaMemoryTest, FreedBlocksAreReusedBySize) {
  TANDEM_REQUIRE_CUDA();
  ASSERT_TRUE(cuda::Synchronize(0).ok());
  ASSERT_TRUE(cuda::EmptyCache().ok());
  const cuda::MemoryStats s0 = Stats();
  EXPECT_EQ(s0.bytes_cached, 0);
  {
    Tensor a = Tensor::Empty({1000}, DType::kF32, kGpu).value();  // 4000 B
    const cuda::MemoryStats s1 = Stats();
    EXPECT_EQ(s1.num_device_mallocs, s0.num_device_mallocs + 1);
    EXPECT_EQ(s1.bytes_in_use, s0.bytes_in_use + 4096);  // rounded to 512
  }
  const cuda::MemoryStats s2 = Stats();
  EXPECT_EQ(s2.bytes_in_use, s0.bytes_in_use);
  EXPECT_EQ(s2.bytes_cached, 4096);
  {
    // Another request that rounds to 4096 bytes reuses the block.
    Tensor b = Tensor::Empty({1020}, DType::kF32, kGpu).value();
    const cuda::MemoryStats s3 = Stats();
    EXPECT_EQ(s3.num_device_mallocs, s2.num_device_mallocs);
    EXPECT_EQ(s3.num_cache_hits, s2.num_cache_hits + 1);
    EXPECT_EQ(s3.bytes_cached, 0);
    // While b lives, the same size needs a new block.
    Tensor c = Tensor::Empty({1000}, DType::kF32, kGpu).value();
    EXPECT_EQ(Stats().num_device_mallocs, s2.num_device_mallocs + 1);
    EXPECT_GE(Stats().peak_bytes_in_use, s0.bytes_in_use + 2 * 4096);
  }
  EXPECT_EQ(Stats().bytes_cached, 2 * 4096);
  ASSERT_TRUE(cuda::EmptyCache().ok());
  const cuda::MemoryStats s4 = Stats();
  EXPECT_EQ(s4.bytes_cached, 0);
  EXPECT_EQ(s4.num_device_frees, s2.num_device_frees + 2);
  // Zero bytes: no block at all.
  Tensor empty = Tensor::Empty({0}, DType::kF32, kGpu).value();
  EXPECT_EQ(Stats().num_allocations, s4.num_allocations);
}

// One training step of a small MLP on the device.
absl::Status Step(const std::vector<Tensor>& params, const Tensor& x,
                  const Tensor& labels) {
  for (const Tensor& p : params) p.ZeroGrad();
  absl::StatusOr<Tensor> h = Linear(x, params[0], params[1]);
  if (!h.ok()) return h.status();
  h = Relu(*h);
  if (!h.ok()) return h.status();
  h = Linear(*h, params[2], params[3]);
  if (!h.ok()) return h.status();
  absl::StatusOr<Tensor> loss = CrossEntropy(*h, labels);
  if (!loss.ok()) return loss.status();
  absl::Status s = loss->Backward();
  if (!s.ok()) return s;
  NoGradGuard no_grad;
  for (const Tensor& p : params) {
    s = AddInPlace(p, p.grad(), -0.1);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

TEST(CudaMemoryTest, RepeatedStepsDoNotCallCudaMalloc) {
  TANDEM_REQUIRE_CUDA();
  std::vector<Tensor> params = {
      ToCuda(Random({64, 32}, DType::kF32, 1, -0.2, 0.2)),
      ToCuda(Random({64}, DType::kF32, 2)),
      ToCuda(Random({10, 64}, DType::kF32, 3, -0.2, 0.2)),
      ToCuda(Random({10}, DType::kF32, 4))};
  for (const Tensor& p : params) ASSERT_TRUE(p.set_requires_grad(true).ok());
  Tensor x = ToCuda(Random({128, 32}, DType::kF32, 5));
  std::vector<int64_t> y(128);
  for (int i = 0; i < 128; ++i) y[i] = (i * 7) % 10;
  Tensor labels = ToCuda(Tensor::FromVector(y).value());
  // Two warm-up steps: the first creates the gradients, the second settles
  // the pattern of temporaries.
  ASSERT_TRUE(Step(params, x, labels).ok());
  ASSERT_TRUE(Step(params, x, labels).ok());
  const cuda::MemoryStats warm = Stats();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Step(params, x, labels).ok());
  const cuda::MemoryStats after = Stats();
  EXPECT_EQ(after.num_device_mallocs, warm.num_device_mallocs)
      << "before: " << warm.ToString() << "\nafter: " << after.ToString();
  EXPECT_GT(after.num_allocations, warm.num_allocations);
  EXPECT_EQ(after.num_allocations - warm.num_allocations,
            after.num_cache_hits - warm.num_cache_hits);
  EXPECT_EQ(after.bytes_in_use, warm.bytes_in_use);
}

TEST(CudaStreamTest, OneStreamPerThreadFromAPool) {
  TANDEM_REQUIRE_CUDA();
  void* main_stream = cuda::CurrentStream(0).value().raw;
  EXPECT_NE(main_stream, nullptr);
  EXPECT_EQ(cuda::CurrentStream(0).value().raw, main_stream);
  void* first = nullptr;
  std::thread([&] { first = cuda::CurrentStream(0).value().raw; }).join();
  EXPECT_NE(first, nullptr);
  EXPECT_NE(first, main_stream);
  // An exited thread's stream goes back to the pool for the next thread.
  void* second = nullptr;
  std::thread([&] { second = cuda::CurrentStream(0).value().raw; }).join();
  EXPECT_EQ(second, first);
  // SetCurrentStream overrides it for this thread until reset.
  ASSERT_TRUE(cuda::SetCurrentStream(0, CudaStreamHandle{first}).ok());
  EXPECT_EQ(cuda::CurrentStream(0).value().raw, first);
  Tensor t = Tensor::Ones({4}, DType::kF32, kGpu).value();
  ASSERT_TRUE(cuda::Synchronize(0).ok());
  ASSERT_TRUE(cuda::SetCurrentStream(0, CudaStreamHandle{}).ok());
  EXPECT_EQ(cuda::CurrentStream(0).value().raw, main_stream);
}

TEST(CudaMemoryTest, BlocksAreReusedOnlyOnTheirStream) {
  TANDEM_REQUIRE_CUDA();
  ASSERT_TRUE(cuda::EmptyCache().ok());
  // A block freed on another thread's stream...
  std::thread([] {
    Tensor a = Tensor::Empty({3000}, DType::kF32, kGpu).value();
    ASSERT_TRUE(cuda::Synchronize(0).ok());
  }).join();
  const cuda::MemoryStats s0 = Stats();
  EXPECT_EQ(s0.bytes_cached, 12288);
  // ...is not handed to this thread's stream.
  Tensor b = Tensor::Empty({3000}, DType::kF32, kGpu).value();
  EXPECT_EQ(Stats().num_device_mallocs, s0.num_device_mallocs + 1);
}

TEST(CudaStreamTest, ThreadsShareTheDevice) {
  TANDEM_REQUIRE_CUDA();
  Tensor x = Random({64, 48}, DType::kF32, 7);
  Tensor w = Random({32, 48}, DType::kF32, 8);
  Tensor expected =
      ToHost(Relu(MatMul(ToCuda(x), ToCuda(w), false, true).value()).value());
  constexpr int kThreads = 4;
  std::vector<Tensor> results(kThreads);
  std::vector<absl::Status> status(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Tensor r;
      for (int i = 0; i < 20 && status[t].ok(); ++i) {
        absl::StatusOr<Tensor> xd = x.To(kGpu);
        absl::StatusOr<Tensor> wd = w.To(kGpu);
        if (!xd.ok() || !wd.ok()) {
          status[t] = xd.ok() ? wd.status() : xd.status();
          break;
        }
        absl::StatusOr<Tensor> y = MatMul(*xd, *wd, false, true);
        if (y.ok()) y = Relu(*y);
        if (y.ok()) y = y->To(Device::CPU());
        if (!y.ok()) status[t] = y.status();
        if (y.ok()) r = *y;
      }
      results[t] = r;
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_TRUE(status[t].ok()) << "thread " << t << ": " << status[t];
    ExpectBitwiseEqual(results[t], expected, "thread " + std::to_string(t));
  }
}

}  // namespace
}  // namespace tandem
