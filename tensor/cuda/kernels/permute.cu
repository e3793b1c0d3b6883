// Permute's CUDA kernel: a generic strided gather, one thread per output
// element (grid-stride). The host side, which builds the plan and registers
// it in the kernel table, is ops_permute.cc; the launcher is declared in
// internal/kernels.h.
#include <cuda_runtime.h>

#include <cstdint>

#include "tensor/cuda/kernels/kernel_util.cuh"

namespace tandem::cuda::kernels {
namespace {

// T is an unsigned integer of the element's size: bytes are copied, never
// converted, so NaN payloads and every dtype move exactly.
template <typename T>
__global__ void PermuteKernel(const T* x, T* out, int64_t n, PermutePlan plan) {
  TANDEM_CUDA_LOOP(i, n) {
    int64_t rest = i;
    int64_t offset = 0;
    for (int d = plan.rank - 1; d >= 0; --d) {
      const int64_t size = plan.size[d];
      offset += (rest % size) * plan.stride[d];
      rest /= size;
    }
    out[i] = x[offset];
  }
}

template <typename T>
cudaError_t LaunchPermute(const PermutePlan& plan, const void* x, void* out,
                          int64_t n, cudaStream_t stream) {
  return Launch(n, stream, PermuteKernel<T>, static_cast<const T*>(x),
                static_cast<T*>(out), n, plan);
}

}  // namespace

cudaError_t Permute(int64_t elem_size, const PermutePlan& plan, const void* x,
                    void* out, int64_t n, cudaStream_t stream) {
  if (plan.rank < 0 || plan.rank > kPermuteMaxRank) {
    return cudaErrorInvalidValue;
  }
  switch (elem_size) {
    case 1:
      return LaunchPermute<uint8_t>(plan, x, out, n, stream);
    case 2:
      return LaunchPermute<uint16_t>(plan, x, out, n, stream);
    case 4:
      return LaunchPermute<uint32_t>(plan, x, out, n, stream);
    case 8:
      return LaunchPermute<uint64_t>(plan, x, out, n, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace tandem::cuda::kernels
