// DeviceBuffer: an owned block of CUDA device memory, for tests, tools and
// staging host data in and out of the NCCL backend. The header names no CUDA
// type, so it compiles everywhere; built without CUDA, Allocate() fails with
// "tandem was built without CUDA ...".
//
//   TANDEM_ASSIGN_OR_RETURN(comm::DeviceBuffer dev,
//                           comm::DeviceBuffer::Allocate(/*device=*/1, bytes));
//   TANDEM_RETURN_IF_ERROR(dev.CopyFromHost(host.data(), bytes));
//   auto work = nccl->AllReduce(dev.View(comm::DType::kF32, 0, n),
//                               comm::ReduceOp::kSum);
//   TANDEM_RETURN_IF_ERROR(work->Wait());
//   TANDEM_RETURN_IF_ERROR(dev.CopyToHost(host.data(), bytes));
//   dev.set_release_stream(nccl->communication_stream());  // free after use
//
// Memory comes from the stream-ordered allocator (cudaMallocAsync on the
// allocation stream) and is returned with cudaFreeAsync on the release
// stream (the allocation stream unless changed), so neither allocating nor
// freeing synchronises the device: a buffer dropped while a collective
// still reads it is freed only after the work already queued on the release
// stream. The copies are blocking (they return when the bytes have arrived)
// and are ordered on the allocation stream.
// Move-only. Not thread-safe; use from one thread at a time.
#ifndef TANDEM_COMM_NCCL_DEVICE_BUFFER_H_
#define TANDEM_COMM_NCCL_DEVICE_BUFFER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/cuda_stream.h"
#include "comm/types.h"

namespace tandem::comm {

class DeviceBuffer {
 public:
  // `bytes` >= 0 on CUDA device `device`, allocated on `stream` (of that
  // device; {} is the legacy default stream).
  // Zero bytes gives a buffer with data() == nullptr.
  static absl::StatusOr<DeviceBuffer> Allocate(int device, int64_t bytes,
                                               CudaStreamHandle stream = {});

  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  int device() const { return device_; }

  // The stream the memory is returned on when this buffer dies.
  void set_release_stream(CudaStreamHandle stream) { release_stream_ = stream; }

  // Copies `n` bytes between host memory and [offset, offset + n) of this
  // buffer; blocks until done. kOutOfRange if the range is not inside.
  absl::Status CopyFromHost(const void* src, int64_t n, int64_t offset = 0);
  absl::Status CopyToHost(void* dst, int64_t n, int64_t offset = 0) const;

  // A view of `count` elements of `dtype` starting `offset` elements in, in
  // MemorySpace::kCuda on device(). Does not check bounds.
  BufferView View(DType dtype, int64_t offset, int64_t count) const;

 private:
  void Release();

  void* data_ = nullptr;
  int64_t bytes_ = 0;
  int device_ = -1;
  CudaStreamHandle alloc_stream_;
  CudaStreamHandle release_stream_;
};

}  // namespace tandem::comm

#endif  // TANDEM_COMM_NCCL_DEVICE_BUFFER_H_
