#include "train/parallel/ddp/comm_hook.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autograd/autograd.h"
#include "tensor/ops.h"

namespace tandem::train {

const char* DdpCommHookName(DdpCommHook hook) {
  switch (hook) {
    case DdpCommHook::kAllReduce:
      return "allreduce";
    case DdpCommHook::kF16Compress:
      return "fp16_compress";
    case DdpCommHook::kBf16Compress:
      return "bf16_compress";
  }
  return "allreduce";
}

std::optional<DdpCommHook> DdpCommHookFromName(const char* name) {
  for (DdpCommHook h : {DdpCommHook::kAllReduce, DdpCommHook::kF16Compress,
                        DdpCommHook::kBf16Compress}) {
    if (std::strcmp(name, DdpCommHookName(h)) == 0) return h;
  }
  return std::nullopt;
}

std::optional<DType> WireDType(DdpCommHook hook) {
  switch (hook) {
    case DdpCommHook::kAllReduce:
      return std::nullopt;
    case DdpCommHook::kF16Compress:
      return DType::kF16;
    case DdpCommHook::kBf16Compress:
      return DType::kBF16;
  }
  return std::nullopt;
}

absl::StatusOr<Tensor> CompressBucket(const Tensor& bucket, DType wire,
                                      int64_t world_size) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CompressBucket: world size must be >= 1, got ", world_size));
  }
  NoGradGuard no_grad;  // buckets never require grad; be explicit
  // PyTorch: bucket.buffer().to(float16).div_(world_size). The division of
  // a low-precision tensor computes in float and rounds (tensor/ops.h's
  // low-precision rule), exactly as ATen's CPU div_ on f16/bf16.
  TANDEM_ASSIGN_OR_RETURN(Tensor low, bucket.To(wire));
  if (world_size == 1) return low;
  return Div(low, static_cast<double>(world_size));
}

absl::Status DecompressBucket(const Tensor& reduced, const Tensor& bucket) {
  NoGradGuard no_grad;
  TANDEM_ASSIGN_OR_RETURN(Tensor wide, reduced.To(bucket.dtype()));
  return bucket.CopyFrom(wide);
}

}  // namespace tandem::train
