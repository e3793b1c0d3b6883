// CudaStreamHandle: a CUDA stream as it crosses comm's interfaces (NCCL's
// compute and communication streams, device buffers), typed but without a
// CUDA include, so every comm header builds on machines without CUDA.
//
//   cudaStream_t s = ...;                          // in CUDA code
//   nccl.set_compute_stream(comm::CudaStreamHandle{s});
//   cudaStream_t back = static_cast<cudaStream_t>(handle.raw);
#ifndef TANDEM_COMM_CUDA_STREAM_H_
#define TANDEM_COMM_CUDA_STREAM_H_

namespace tandem::comm {

struct CudaStreamHandle {
  // The cudaStream_t. nullptr (the default) is the legacy default stream.
  void* raw = nullptr;

  friend bool operator==(CudaStreamHandle, CudaStreamHandle) = default;
};

}  // namespace tandem::comm

#endif  // TANDEM_COMM_CUDA_STREAM_H_
