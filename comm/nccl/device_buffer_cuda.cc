// DeviceBuffer over the CUDA runtime.
#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "comm/nccl/device_buffer.h"

namespace tandem::comm {
namespace {

absl::Status CudaError(absl::string_view call, cudaError_t err, int device) {
  return absl::InternalError(absl::StrCat(call, " on cuda:", device,
                                          " failed: ", cudaGetErrorName(err),
                                          ": ", cudaGetErrorString(err)));
}

absl::Status CheckRange(absl::string_view what, int64_t n, int64_t offset,
                        int64_t bytes) {
  if (n < 0 || offset < 0 || offset > bytes || n > bytes - offset) {
    return absl::OutOfRangeError(absl::StrCat(
        "DeviceBuffer::", what, ": bytes [", offset, ", ", offset + n,
        ") are not inside the buffer's ", bytes, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(int device, int64_t bytes,
                                                    CudaStreamHandle stream) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DeviceBuffer::Allocate: bytes must be >= 0; found ", bytes));
  }
  cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError(
        absl::StrCat("DeviceBuffer::Allocate: cannot use cuda:", device, " (",
                     cudaGetErrorName(err), ": ", cudaGetErrorString(err),
                     "); a CUDA device and driver are needed"));
  }
  DeviceBuffer buffer;
  buffer.device_ = device;
  buffer.alloc_stream_ = stream;
  buffer.release_stream_ = stream;
  if (bytes == 0) return buffer;
  err = cudaMallocAsync(&buffer.data_, static_cast<size_t>(bytes),
                        static_cast<cudaStream_t>(stream.raw));
  if (err != cudaSuccess) {
    buffer.data_ = nullptr;
    return CudaError(absl::StrCat("cudaMallocAsync(", bytes, " bytes)"), err,
                     device);
  }
  buffer.bytes_ = bytes;
  return buffer;
}

void DeviceBuffer::Release() {
  if (data_ == nullptr) return;
  cudaSetDevice(device_);
  cudaFreeAsync(data_, static_cast<cudaStream_t>(release_stream_.raw));
  data_ = nullptr;
  bytes_ = 0;
}

absl::Status DeviceBuffer::CopyFromHost(const void* src, int64_t n,
                                        int64_t offset) {
  if (absl::Status s = CheckRange("CopyFromHost", n, offset, bytes_); !s.ok()) {
    return s;
  }
  if (n == 0) return absl::OkStatus();
  cudaSetDevice(device_);
  cudaStream_t stream = static_cast<cudaStream_t>(alloc_stream_.raw);
  cudaError_t err =
      cudaMemcpyAsync(static_cast<char*>(data_) + offset, src,
                      static_cast<size_t>(n), cudaMemcpyHostToDevice, stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) return CudaError("CopyFromHost", err, device_);
  return absl::OkStatus();
}

absl::Status DeviceBuffer::CopyToHost(void* dst, int64_t n,
                                      int64_t offset) const {
  if (absl::Status s = CheckRange("CopyToHost", n, offset, bytes_); !s.ok()) {
    return s;
  }
  if (n == 0) return absl::OkStatus();
  cudaSetDevice(device_);
  cudaStream_t stream = static_cast<cudaStream_t>(alloc_stream_.raw);
  cudaError_t err =
      cudaMemcpyAsync(dst, static_cast<const char*>(data_) + offset,
                      static_cast<size_t>(n), cudaMemcpyDeviceToHost, stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) return CudaError("CopyToHost", err, device_);
  return absl::OkStatus();
}

}  // namespace tandem::comm
