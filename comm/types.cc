#include "comm/types.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace tandem::comm {

int64_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF64:
      return 8;
    case DType::kF16:
      return 2;
    case DType::kBF16:
      return 2;
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
    case DType::kU8:
      return 1;
  }
  return 0;
}

std::string DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF64:
      return "f64";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
    case DType::kU8:
      return "u8";
  }
  return absl::StrCat("dtype(", static_cast<int>(dtype), ")");
}

bool IsValidDType(DType dtype) { return DTypeSize(dtype) != 0; }

bool IsFloatingPoint(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kF64:
    case DType::kF16:
    case DType::kBF16:
      return true;
    case DType::kI32:
    case DType::kI64:
    case DType::kU8:
      return false;
  }
  return false;
}

std::string ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kProd:
      return "prod";
  }
  return absl::StrCat("reduce_op(", static_cast<int>(op), ")");
}

bool IsValidReduceOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
    case ReduceOp::kMax:
    case ReduceOp::kMin:
    case ReduceOp::kProd:
      return true;
  }
  return false;
}

std::string OpKindName(OpKind op) {
  switch (op) {
    case OpKind::kAllReduce:
      return "AllReduce";
    case OpKind::kBroadcast:
      return "Broadcast";
    case OpKind::kAllGather:
      return "AllGather";
    case OpKind::kReduceScatter:
      return "ReduceScatter";
    case OpKind::kSend:
      return "Send";
    case OpKind::kRecv:
      return "Recv";
    case OpKind::kBarrier:
      return "Barrier";
  }
  return absl::StrCat("op(", static_cast<int>(op), ")");
}

int64_t BufferView::bytes() const { return count * DTypeSize(dtype); }

std::string BufferView::DebugString() const {
  std::string where = space == MemorySpace::kHost
                          ? std::string("host")
                          : absl::StrCat("cuda:", device);
  return absl::StrCat(DTypeName(dtype), "[", count, "] ", where);
}

}  // namespace tandem::comm
