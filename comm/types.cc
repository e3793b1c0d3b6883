#include "comm/types.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace tandem::comm {

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
    case ReduceOp::kTreeSum:
      return "tree_sum";
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
    case ReduceOp::kTreeSum:
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
