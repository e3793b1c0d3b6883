#include "sim/fingerprint.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "comm/types.h"

namespace tandem::sim {

std::string Fingerprint::DebugString() const {
  std::string args;
  switch (op) {
    case comm::OpKind::kBarrier:
      break;
    case comm::OpKind::kAllReduce:
    case comm::OpKind::kReduceScatter:
      args = absl::StrCat(comm::DTypeName(dtype), " x ", count, ", ",
                          reduce_op.has_value() ? comm::ReduceOpName(*reduce_op)
                                                : std::string("no reduce op"));
      break;
    case comm::OpKind::kBroadcast:
      args =
          absl::StrCat(comm::DTypeName(dtype), " x ", count, ", root ", root);
      break;
    case comm::OpKind::kAllGather:
      args = absl::StrCat(comm::DTypeName(dtype), " x ", count);
      break;
    case comm::OpKind::kSend:
      args = absl::StrCat(comm::DTypeName(dtype), " x ", count, ", to rank ",
                          peer);
      break;
    case comm::OpKind::kRecv:
      args = absl::StrCat(comm::DTypeName(dtype), " x ", count, ", from rank ",
                          peer);
      break;
  }
  return absl::StrCat("#", seq, " ", comm::OpKindName(op), "(", args, ")");
}

bool SameCollective(const Fingerprint& a, const Fingerprint& b) {
  return a.seq == b.seq && a.op == b.op && a.dtype == b.dtype &&
         a.count == b.count && a.root == b.root && a.reduce_op == b.reduce_op;
}

bool MatchingPointToPoint(const Fingerprint& send, const Fingerprint& recv) {
  return send.dtype == recv.dtype && send.count == recv.count;
}

}  // namespace tandem::sim
