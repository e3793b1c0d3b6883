// Stream ordering of the NCCL backend (CUDA builds only): an operation reads
// what the compute stream wrote before it was issued, without the host
// waiting, and StreamWaitForWork hands the result to another stream.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "comm/nccl/device_buffer.h"
#include "comm/nccl/local_gpus.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/nccl/test_kernels.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

absl::Status Cuda(const char* call, cudaError_t err) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, ": ", cudaGetErrorString(err)));
}

#define RETURN_IF_CUDA(call)                                        \
  do {                                                              \
    if (absl::Status s_ = Cuda(#call, (call)); !s_.ok()) return s_; \
  } while (false)

// Roughly 50 ms on a 1.5-2 GHz GPU: long enough that an unordered NCCL call
// would read the buffer before the kernel writes it.
constexpr int64_t kSpinCycles = 100'000'000;

TEST(NcclStreamTest, OrderedAfterTheComputeStreamAndHandedToAnother) {
  const int gpus = LocalGpuCount();
  if (gpus == 0) GTEST_SKIP() << "needs a GPU";
  const int n = std::min(gpus, 2);
  LocalRunResult result =
      RunOnLocalGpus(n, [n](int rank, NcclCommunicator& comm) -> absl::Status {
        constexpr int64_t kCount = 1 << 16;
        cudaStream_t compute = nullptr, consumer = nullptr;
        RETURN_IF_CUDA(
            cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
        RETURN_IF_CUDA(
            cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking));
        comm.set_compute_stream(CudaStreamHandle{compute});
        absl::StatusOr<DeviceBuffer> dev = DeviceBuffer::Allocate(
            comm.device().ordinal, kCount * 4, CudaStreamHandle{compute});
        if (!dev.ok()) return dev.status();
        std::vector<float> zeros(kCount, 0.0f);
        if (absl::Status s = dev->CopyFromHost(zeros.data(), kCount * 4);
            !s.ok()) {
          return s;
        }
        dev->set_release_stream(comm.communication_stream());
        // Slow producer on the compute stream; the host does not wait for it.
        int e = nccl_testing::LaunchSlowFill(
            static_cast<float*>(dev->data()), kCount,
            static_cast<float>(rank + 1), kSpinCycles, compute);
        RETURN_IF_CUDA(static_cast<cudaError_t>(e));
        std::unique_ptr<Work> work =
            comm.AllReduce(dev->View(DType::kF32, 0, kCount), ReduceOp::kSum);
        // Consumer stream: waits for the all-reduce on the GPU, not the host.
        if (absl::Status s =
                StreamWaitForWork(*work, CudaStreamHandle{consumer});
            !s.ok())
          return s;
        std::vector<float> host(kCount, -1.0f);
        RETURN_IF_CUDA(cudaMemcpyAsync(host.data(), dev->data(), kCount * 4,
                                       cudaMemcpyDeviceToHost, consumer));
        RETURN_IF_CUDA(cudaStreamSynchronize(consumer));
        const float want = static_cast<float>(n * (n + 1) / 2);
        for (int64_t i = 0; i < kCount; ++i) {
          if (host[i] != want) {
            return absl::InternalError(absl::StrCat(
                "rank ", rank, ": element ", i, " is ", host[i], ", want ",
                want, " (0 means NCCL ran before the compute stream's write)"));
          }
        }
        if (absl::Status s = work->Wait(); !s.ok()) return s;
        if (!work->IsCompleted()) {
          return absl::InternalError("Wait() OK but IsCompleted() false");
        }
        if (absl::Status s = comm.Synchronize(); !s.ok()) return s;
        comm.set_compute_stream(CudaStreamHandle{});
        dev = DeviceBuffer();  // freed on the communication stream
        RETURN_IF_CUDA(cudaStreamSynchronize(compute));
        RETURN_IF_CUDA(cudaStreamDestroy(compute));
        RETURN_IF_CUDA(cudaStreamDestroy(consumer));
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.ok()) << result.status();
}

}  // namespace
}  // namespace tandem::comm
