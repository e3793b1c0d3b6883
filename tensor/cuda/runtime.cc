// The CUDA runtime side of tensor/cuda/cuda.h: device count, per-thread
// current streams and cuBLAS handles (pooled, never destroyed), TF32.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/cuda/cuda.h"
#include "tensor/cuda/internal/runtime_internal.h"
#include "tensor/cuda/internal/status.h"

namespace tandem::cuda {
namespace {

struct DeviceInfo {
  int count = 0;
  std::string reason;  // why count == 0
};

// Asked once: the device count cannot change while a process runs.
const DeviceInfo& GetDeviceInfo() {
  static const DeviceInfo* info = [] {
    auto* d = new DeviceInfo;
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err == cudaSuccess) {
      d->count = count;
      if (count == 0) d->reason = "the CUDA driver reports no device";
    } else {
      cudaGetLastError();  // clear the error for later calls
      d->reason = absl::StrCat(
          "no usable CUDA device (cudaGetDeviceCount: ", cudaGetErrorName(err),
          ": ", cudaGetErrorString(err), ")");
    }
    return d;
  }();
  return *info;
}

// Streams and cuBLAS handles no thread is using, per device. Leaked: they
// must outlive every thread_local that returns to them, and destroying
// CUDA objects during process teardown is unsafe.
struct Pools {
  std::mutex mu;
  std::vector<std::vector<cudaStream_t>> streams;    // guarded by mu
  std::vector<std::vector<cublasHandle_t>> handles;  // guarded by mu
};

Pools& GetPools() {
  static Pools* pools = new Pools;
  return *pools;
}

struct ThreadDevice {
  cudaStream_t own = nullptr;      // from the pool, lazily
  cudaStream_t current = nullptr;  // SetCurrentStream's, or null
  bool has_current = false;
  cublasHandle_t blas = nullptr;  // from the pool, lazily
};

// Per thread: gives its streams and handles back to the pools at exit.
struct ThreadState {
  std::vector<ThreadDevice> devices;
  ThreadDevice& at(int device) {
    if (static_cast<int>(devices.size()) <= device) devices.resize(device + 1);
    return devices[device];
  }
  ~ThreadState() {
    Pools& pools = GetPools();
    std::lock_guard<std::mutex> lock(pools.mu);
    for (size_t d = 0; d < devices.size(); ++d) {
      if (devices[d].own != nullptr) {
        if (pools.streams.size() <= d) pools.streams.resize(d + 1);
        pools.streams[d].push_back(devices[d].own);
      }
      if (devices[d].blas != nullptr) {
        if (pools.handles.size() <= d) pools.handles.resize(d + 1);
        pools.handles[d].push_back(devices[d].blas);
      }
    }
  }
};

thread_local ThreadState thread_state;

std::atomic<bool> allow_tf32{false};

absl::StatusOr<cudaStream_t> OwnStream(int device) {
  ThreadDevice& td = thread_state.at(device);
  if (td.own != nullptr) return td.own;
  {
    Pools& pools = GetPools();
    std::lock_guard<std::mutex> lock(pools.mu);
    if (static_cast<int>(pools.streams.size()) > device &&
        !pools.streams[device].empty()) {
      td.own = pools.streams[device].back();
      pools.streams[device].pop_back();
      return td.own;
    }
  }
  cudaStream_t stream = nullptr;
  TANDEM_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  td.own = stream;
  return stream;
}

}  // namespace

bool BuiltWithCuda() { return true; }

int DeviceCount(std::string* reason) {
  const DeviceInfo& info = GetDeviceInfo();
  if (info.count == 0 && reason != nullptr) *reason = info.reason;
  return info.count;
}

absl::StatusOr<CudaStreamHandle> CurrentStream(int device) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, internal::Enter(device));
  return CudaStreamHandle{static_cast<void*>(stream)};
}

absl::Status SetCurrentStream(int device, CudaStreamHandle stream) {
  TANDEM_RETURN_IF_ERROR(internal::CheckDevice(device));
  ThreadDevice& td = thread_state.at(device);
  td.current = static_cast<cudaStream_t>(stream.raw);
  td.has_current = stream.raw != nullptr;
  return absl::OkStatus();
}

absl::Status Synchronize(int device) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, internal::Enter(device));
  TANDEM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

void SetAllowTf32(bool allow) { allow_tf32.store(allow); }
bool AllowTf32() { return allow_tf32.load(); }

namespace internal {

absl::Status CheckDevice(int device) {
  const DeviceInfo& info = GetDeviceInfo();
  if (info.count == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda:", device, " is not available: ", info.reason,
                     "; use Device::CPU() on this machine"));
  }
  if (device < 0 || device >= info.count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda:", device, " does not exist: this machine has ", info.count,
        " CUDA device", info.count == 1 ? "" : "s", " (cuda:0 to cuda:",
        info.count - 1, "; CUDA_VISIBLE_DEVICES may hide others)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<cudaStream_t> Enter(int device) {
  TANDEM_RETURN_IF_ERROR(CheckDevice(device));
  TANDEM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  ThreadDevice& td = thread_state.at(device);
  if (td.has_current) return td.current;
  return OwnStream(device);
}

absl::StatusOr<cublasHandle_t> BlasHandle(int device, cudaStream_t stream) {
  ThreadDevice& td = thread_state.at(device);
  if (td.blas == nullptr) {
    {
      Pools& pools = GetPools();
      std::lock_guard<std::mutex> lock(pools.mu);
      if (static_cast<int>(pools.handles.size()) > device &&
          !pools.handles[device].empty()) {
        td.blas = pools.handles[device].back();
        pools.handles[device].pop_back();
      }
    }
    if (td.blas == nullptr) {
      cublasHandle_t handle = nullptr;
      TANDEM_CUBLAS_RETURN_IF_ERROR(cublasCreate(&handle));
      td.blas = handle;
    }
  }
  TANDEM_CUBLAS_RETURN_IF_ERROR(cublasSetStream(td.blas, stream));
  return td.blas;
}

}  // namespace internal
}  // namespace tandem::cuda
