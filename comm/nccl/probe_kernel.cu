// A trivial kernel for the build's smoke test: out[i] = i * factor.
#include <cuda_runtime.h>

namespace tandem::comm {

__global__ void ProbeFillKernel(int* out, int n, int factor) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i * factor;
}

// Host-side launcher with C++ linkage for cuda_probe_cuda.cc.
cudaError_t LaunchProbeFill(int* out, int n, int factor, cudaStream_t stream) {
  ProbeFillKernel<<<(n + 255) / 256, 256, 0, stream>>>(out, n, factor);
  return cudaGetLastError();
}

}  // namespace tandem::comm
