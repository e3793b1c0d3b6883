#include "train/parallel/core/tensor_comm.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/dtype.h"
#include "base/status_macros.h"
#include "comm/types.h"
#include "tensor/device.h"
#include "tensor/tensor.h"

namespace tandem::train {

absl::StatusOr<comm::BufferView> ToBufferView(const Tensor& t) {
  if (!t.defined()) {
    return absl::InvalidArgumentError(
        "ToBufferView: expected a defined tensor, got an undefined one "
        "(Tensor()); build it with a factory such as Tensor::Zeros before "
        "handing it to a collective");
  }
  const DType dtype = t.dtype();
  if (!IsValidDType(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ToBufferView: tensor dtype value ", static_cast<int>(dtype),
        " is not one of f32, f64, f16, bf16, i64, i32, u8; the tensor's "
        "metadata is corrupt or was cast from an unchecked integer"));
  }
  comm::BufferView view;
  view.data = t.raw_data();
  view.count = t.numel();
  view.dtype = dtype;  // the same enum: no mapping
  const Device device = t.device();
  if (device.is_cpu()) {
    view.space = comm::MemorySpace::kHost;
    view.device = -1;
  } else if (device.is_cuda() && device.index() >= 0) {
    view.space = comm::MemorySpace::kCuda;
    view.device = device.index();
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "ToBufferView: expected a tensor on the CPU or on a CUDA device "
        "cuda:k with k >= 0, got one on ",
        device.is_cuda()
            ? device.ToString()
            : absl::StrCat("device type ", static_cast<int>(device.type())),
        "; a collective moves host or CUDA memory only"));
  }
  return view;
}

}  // namespace tandem::train
