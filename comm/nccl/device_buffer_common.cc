// The parts of DeviceBuffer that need no CUDA call (both builds).
#include <utility>

#include "comm/nccl/device_buffer.h"

namespace tandem::comm {

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      device_(std::exchange(other.device_, -1)),
      alloc_stream_(std::exchange(other.alloc_stream_, {})),
      release_stream_(std::exchange(other.release_stream_, {})) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    device_ = std::exchange(other.device_, -1);
    alloc_stream_ = std::exchange(other.alloc_stream_, {});
    release_stream_ = std::exchange(other.release_stream_, {});
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { Release(); }

BufferView DeviceBuffer::View(DType dtype, int64_t offset,
                              int64_t count) const {
  char* base = static_cast<char*>(data_);
  return BufferView{
      base == nullptr ? nullptr : base + offset * DTypeSize(dtype), count,
      dtype, MemorySpace::kCuda, device_};
}

}  // namespace tandem::comm
