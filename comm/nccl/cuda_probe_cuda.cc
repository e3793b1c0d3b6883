// Built when a CUDA toolkit and NCCL were found.
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "comm/nccl/cuda_probe.h"

namespace tandem::comm {

cudaError_t LaunchProbeFill(int* out, int n, int factor, cudaStream_t stream);

namespace {

absl::Status CudaError(const char* call, cudaError_t err) {
  return absl::InternalError(absl::StrCat(
      call, " failed: ", cudaGetErrorName(err), ": ", cudaGetErrorString(err)));
}

}  // namespace

absl::StatusOr<CudaProbe> ProbeCuda() {
  CudaProbe probe;
  probe.built_with_cuda = true;
  ncclGetVersion(&probe.nccl_version);
  cudaRuntimeGetVersion(&probe.runtime_version);
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  switch (err) {
    case cudaSuccess:
      probe.device_count = count;
      if (count == 0) probe.no_device_reason = "the CUDA driver sees no device";
      return probe;
    // The "no GPU here" answers: no driver library, no device, or a driver
    // too old for this runtime. Not errors: the caller chooses a CPU backend.
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
      cudaGetLastError();  // clear the sticky error
      probe.no_device_reason =
          absl::StrCat("no CUDA device found (", cudaGetErrorName(err), ": ",
                       cudaGetErrorString(err), ")");
      return probe;
    default:
      return CudaError("cudaGetDeviceCount", err);
  }
}

absl::Status RunProbeKernel(int device) {
  constexpr int kN = 1000;
  constexpr int kFactor = 3;
  cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess) return CudaError("cudaSetDevice", err);
  int* d_out = nullptr;
  err = cudaMalloc(&d_out, kN * sizeof(int));
  if (err != cudaSuccess) return CudaError("cudaMalloc", err);
  std::vector<int> host(kN, -1);
  err = LaunchProbeFill(d_out, kN, kFactor, nullptr);
  if (err == cudaSuccess) {
    err = cudaMemcpy(host.data(), d_out, kN * sizeof(int),
                     cudaMemcpyDeviceToHost);
  }
  cudaFree(d_out);
  if (err != cudaSuccess) return CudaError("probe kernel", err);
  for (int i = 0; i < kN; ++i) {
    if (host[i] != i * kFactor) {
      return absl::InternalError(absl::StrCat("probe kernel on device ", device,
                                              ": out[", i, "] = ", host[i],
                                              ", expected ", i * kFactor));
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::comm
