#include "comm/fingerprint.h"

#include <iterator>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "comm/types.h"

namespace tandem::comm {

std::string Fingerprint::DebugString() const {
  std::string args;
  switch (op) {
    case OpKind::kBarrier:
      break;
    case OpKind::kAllReduce:
    case OpKind::kReduceScatter:
      args = absl::StrCat(DTypeName(dtype), " x ", count, ", ",
                          reduce_op.has_value() ? ReduceOpName(*reduce_op)
                                                : std::string("no reduce op"));
      break;
    case OpKind::kBroadcast:
      args = absl::StrCat(DTypeName(dtype), " x ", count, ", root ", root);
      break;
    case OpKind::kAllGather:
      args = absl::StrCat(DTypeName(dtype), " x ", count);
      break;
    case OpKind::kSend:
      args = absl::StrCat(DTypeName(dtype), " x ", count, ", to rank ", peer);
      break;
    case OpKind::kRecv:
      args = absl::StrCat(DTypeName(dtype), " x ", count, ", from rank ", peer);
      break;
  }
  return absl::StrCat("#", seq, " ", OpKindName(op), "(", args, ")");
}

bool SameCollective(const Fingerprint& a, const Fingerprint& b) {
  return a.seq == b.seq && a.op == b.op && a.dtype == b.dtype &&
         a.count == b.count && a.root == b.root && a.reduce_op == b.reduce_op;
}

bool MatchingPointToPoint(const Fingerprint& send, const Fingerprint& recv) {
  return send.dtype == recv.dtype && send.count == recv.count;
}

Fingerprint MakeFingerprint(OpKind op, DType dtype, int64_t count) {
  Fingerprint fp;
  fp.op = op;
  fp.dtype = dtype;
  fp.count = count;
  return fp;
}

EncodedFingerprint Encode(const Fingerprint& fp) {
  return {fp.seq,
          static_cast<int64_t>(fp.op),
          static_cast<int64_t>(fp.dtype),
          fp.count,
          fp.root,
          fp.reduce_op.has_value() ? static_cast<int64_t>(*fp.reduce_op) : -1,
          fp.peer};
}

bool Decode(const EncodedFingerprint& words, Fingerprint& fp) {
  const int64_t op = words[1], dtype = words[2], reduce_op = words[5];
  if (op < 0 || op > static_cast<int64_t>(OpKind::kBarrier)) return false;
  if (dtype < 0 || dtype >= static_cast<int64_t>(std::size(kAllDTypes))) {
    return false;
  }
  if (reduce_op < -1 ||
      reduce_op >= static_cast<int64_t>(std::size(kAllReduceOps))) {
    return false;
  }
  fp.seq = words[0];
  fp.op = static_cast<OpKind>(op);
  fp.dtype = static_cast<DType>(dtype);
  fp.count = words[3];
  fp.root = static_cast<int>(words[4]);
  fp.reduce_op = reduce_op < 0
                     ? std::nullopt
                     : std::optional(static_cast<ReduceOp>(reduce_op));
  fp.peer = static_cast<int>(words[6]);
  return true;
}

}  // namespace tandem::comm
