#include <cuda_runtime.h>

#include <cstdint>

#include "comm/nccl/test_kernels.h"

namespace tandem::comm::nccl_testing {
namespace {

__global__ void SlowFillKernel(float* out, int64_t n, float value,
                               int64_t spin_cycles) {
  if (threadIdx.x == 0) {
    const long long start = clock64();
    while (clock64() - start < spin_cycles) {
    }
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[i] = value;
}

}  // namespace

int LaunchSlowFill(float* out, int64_t n, float value, int64_t spin_cycles,
                   void* stream) {
  SlowFillKernel<<<1, 256, 0, static_cast<cudaStream_t>(stream)>>>(
      out, n, value, spin_cycles);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace tandem::comm::nccl_testing
