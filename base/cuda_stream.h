// CudaStreamHandle: a CUDA stream as it crosses tandem's interfaces (tensor's
// current stream, NCCL's compute and communication streams, device buffers),
// typed but without a CUDA include, so every header builds on machines
// without CUDA. The one stream handle tensor and comm share.
//
//   cudaStream_t s = ...;                          // in CUDA code
//   nccl.set_compute_stream(CudaStreamHandle{s});
//   cudaStream_t back = static_cast<cudaStream_t>(handle.raw);
//
// A handle does not own its stream. Trivially copyable; thread-safe.
#ifndef TANDEM_BASE_CUDA_STREAM_H_
#define TANDEM_BASE_CUDA_STREAM_H_

namespace tandem {

struct CudaStreamHandle {
  // The cudaStream_t. nullptr (the default) is the legacy default stream.
  void* raw = nullptr;

  friend bool operator==(CudaStreamHandle, CudaStreamHandle) = default;
};

}  // namespace tandem

#endif  // TANDEM_BASE_CUDA_STREAM_H_
