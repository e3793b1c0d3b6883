#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "comm/nccl/internal/avg_kernel.h"
#include "comm/nccl/internal/nccl_support.h"
#include "comm/types.h"

namespace tandem::comm::nccl_internal {
namespace {

absl::StatusCode NcclCode(ncclResult_t r) {
  switch (r) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::StatusCode::kInvalidArgument;
    case ncclRemoteError:
    case ncclSystemError:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

std::string CudaText(cudaError_t err) {
  return absl::StrCat(cudaGetErrorName(err), ": ", cudaGetErrorString(err));
}

absl::Status CudaError(absl::string_view call, cudaError_t err,
                       absl::string_view where) {
  return absl::InternalError(
      absl::StrCat(call, " ", where, " failed: ", CudaText(err)));
}

absl::Status NcclError(absl::string_view call, ncclResult_t r, ncclComm_t comm,
                       absl::string_view where) {
  std::string text =
      absl::StrCat(call, " ", where, " failed: ", ncclGetErrorString(r),
                   " (ncclResult ", static_cast<int>(r), ")");
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') {
    absl::StrAppend(&text, "; NCCL says: ", last);
  }
  if (r == ncclRemoteError || r == ncclSystemError) {
    absl::StrAppend(&text,
                    ". A peer process or the network failed; run "
                    "with NCCL_DEBUG=WARN for details");
  }
  return absl::Status(NcclCode(r), text);
}

std::string VisibleDevicesText() {
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  return env == nullptr ? std::string("CUDA_VISIBLE_DEVICES unset")
                        : absl::StrCat("CUDA_VISIBLE_DEVICES=\"", env, "\"");
}

ncclDataType_t ToNcclType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kF64:
      return ncclFloat64;
    case DType::kF16:
      return ncclFloat16;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kI32:
      return ncclInt32;
    case DType::kI64:
      return ncclInt64;
    case DType::kU8:
      return ncclUint8;
  }
  return ncclUint8;  // unreachable: validated before
}

// Avg is Sum followed by a division (see the header), so it maps to ncclSum.
ncclRedOp_t ToNcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return ncclSum;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kProd:
      return ncclProd;
    case ReduceOp::kTreeSum:
      break;  // rejected by the front: NCCL has no fixed-order sum
  }
  return ncclSum;  // unreachable: validated before
}

int AvgFormatOf(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return kAvgF64;
    case DType::kF16:
      return kAvgF16;
    case DType::kBF16:
      return kAvgBF16;
    default:
      return kAvgF32;
  }
}

std::string Where(OpKind op, int rank) {
  return absl::StrCat(OpKindName(op), " on rank ", rank, ": ");
}

}  // namespace tandem::comm::nccl_internal
