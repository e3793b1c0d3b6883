// Avg = Sum / n on the communication stream (see avg_kernel.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "comm/nccl/internal/avg_kernel.h"

namespace tandem::comm::nccl_internal {
namespace {

// IEEE division (nvcc's default -prec-div=true), the same operation the host
// reference performs, so results match bit for bit.
__device__ inline float DivideOnce(float x, float n) { return x / n; }

template <typename T>
__global__ void DivideKernel(T* data, int64_t count, int divisor) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    data[i] = data[i] / static_cast<T>(divisor);
  }
}

__global__ void DivideHalfKernel(__half* data, int64_t count, int divisor) {
  const float n = static_cast<float>(divisor);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    data[i] = __float2half_rn(DivideOnce(__half2float(data[i]), n));
  }
}

__global__ void DivideBFloat16Kernel(__nv_bfloat16* data, int64_t count,
                                     int divisor) {
  const float n = static_cast<float>(divisor);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    data[i] = __float2bfloat16_rn(DivideOnce(__bfloat162float(data[i]), n));
  }
}

}  // namespace

int LaunchDivideInPlace(void* data, int64_t count, int format, int divisor,
                        void* stream) {
  if (count <= 0) return static_cast<int>(cudaSuccess);
  constexpr int kThreads = 256;
  const int64_t wanted = (count + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(wanted < 4096 ? wanted : 4096);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (format) {
    case kAvgF32:
      DivideKernel<float><<<blocks, kThreads, 0, s>>>(static_cast<float*>(data),
                                                      count, divisor);
      break;
    case kAvgF64:
      DivideKernel<double><<<blocks, kThreads, 0, s>>>(
          static_cast<double*>(data), count, divisor);
      break;
    case kAvgF16:
      DivideHalfKernel<<<blocks, kThreads, 0, s>>>(static_cast<__half*>(data),
                                                   count, divisor);
      break;
    case kAvgBF16:
      DivideBFloat16Kernel<<<blocks, kThreads, 0, s>>>(
          static_cast<__nv_bfloat16*>(data), count, divisor);
      break;
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace tandem::comm::nccl_internal
