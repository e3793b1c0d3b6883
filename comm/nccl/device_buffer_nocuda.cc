// DeviceBuffer when tandem was built without CUDA: nothing can be allocated.
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "comm/nccl/device_buffer.h"

namespace tandem::comm {
namespace {

absl::Status NoCuda(const char* what) {
  return absl::FailedPreconditionError(absl::StrCat(
      "DeviceBuffer::", what,
      ": tandem was built without CUDA (no CUDA toolkit with NCCL was found "
      "at build time, or TANDEM_NO_CUDA=1 was set); install a CUDA toolkit "
      "with NCCL and rebuild"));
}

}  // namespace

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(int, int64_t,
                                                    CudaStreamHandle) {
  return NoCuda("Allocate");
}

// No buffer ever holds memory in this build.
void DeviceBuffer::Release() {}

absl::Status DeviceBuffer::CopyFromHost(const void*, int64_t, int64_t) {
  return NoCuda("CopyFromHost");
}

absl::Status DeviceBuffer::CopyToHost(void*, int64_t, int64_t) const {
  return NoCuda("CopyToHost");
}

}  // namespace tandem::comm
