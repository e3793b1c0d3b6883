#include "comm/front.h"

#include <memory>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "comm/fingerprint.h"
#include "comm/types.h"
#include "comm/validate.h"
#include "comm/work.h"

namespace tandem::comm {

std::unique_ptr<Work> EngineFront::Issue(const Operation& op,
                                         absl::Status valid) {
  const OpKind kind = op.fp.op;
  const bool two_buffers =
      kind == OpKind::kAllGather || kind == OpKind::kReduceScatter;
  const std::string_view engine = engine_name();
  const absl::string_view name(engine.data(), engine.size());
  if (valid.ok()) {
    valid = ValidateMemorySpace(kind, two_buffers ? "send" : "buf", op.buf,
                                memory_space(), name, rank());
  }
  if (valid.ok() && two_buffers) {
    valid = ValidateMemorySpace(kind, "recv", op.recv, memory_space(), name,
                                rank());
  }
  if (valid.ok() && op.fp.reduce_op == ReduceOp::kTreeSum &&
      !native_tree_sum()) {
    valid = absl::UnimplementedError(absl::StrCat(
        OpKindName(kind), " on rank ", rank(), ": the '", name,
        "' engine has no native tree_sum (only sim's does); "
        "comm::OrderedAllReduce / OrderedReduceScatter give the same sum on "
        "every engine"));
  }
  if (valid.ok()) valid = CheckOperation(op);
  if (!valid.ok()) return MakeRejectedWork(std::move(valid), op.fp, size());
  return Post(op);
}

std::unique_ptr<Work> EngineFront::AllReduce(BufferView buf, ReduceOp op) {
  Operation o{
      MakeFingerprint(OpKind::kAllReduce, buf.dtype, buf.count), buf, {}};
  o.fp.reduce_op = op;
  return Issue(o, ValidateAllReduce(buf, op, rank(), size()));
}

std::unique_ptr<Work> EngineFront::Broadcast(BufferView buf, int root) {
  Operation o{
      MakeFingerprint(OpKind::kBroadcast, buf.dtype, buf.count), buf, {}};
  o.fp.root = root;
  return Issue(o, ValidateBroadcast(buf, root, rank(), size()));
}

std::unique_ptr<Work> EngineFront::AllGather(BufferView send, BufferView recv) {
  Operation o{MakeFingerprint(OpKind::kAllGather, send.dtype, send.count), send,
              recv};
  return Issue(o, ValidateAllGather(send, recv, rank(), size()));
}

std::unique_ptr<Work> EngineFront::ReduceScatter(BufferView send,
                                                 BufferView recv, ReduceOp op) {
  Operation o{MakeFingerprint(OpKind::kReduceScatter, recv.dtype, recv.count),
              send, recv};
  o.fp.reduce_op = op;
  return Issue(o, ValidateReduceScatter(send, recv, op, rank(), size()));
}

std::unique_ptr<Work> EngineFront::Send(BufferView buf, int peer) {
  Operation o{MakeFingerprint(OpKind::kSend, buf.dtype, buf.count), buf, {}};
  o.fp.peer = peer;
  return Issue(o,
               ValidatePointToPoint(OpKind::kSend, buf, peer, rank(), size()));
}

std::unique_ptr<Work> EngineFront::Recv(BufferView buf, int peer) {
  Operation o{MakeFingerprint(OpKind::kRecv, buf.dtype, buf.count), buf, {}};
  o.fp.peer = peer;
  return Issue(o,
               ValidatePointToPoint(OpKind::kRecv, buf, peer, rank(), size()));
}

absl::Status EngineFront::Barrier() {
  Operation o{MakeFingerprint(OpKind::kBarrier, DType::kF32, 0), {}, {}};
  return Post(o)->Wait();
}

std::unique_ptr<Work> PerOperationFront::Post(const Operation& op) {
  switch (op.fp.op) {
    case OpKind::kAllReduce:
      return PostAllReduce(op.buf, *op.fp.reduce_op);
    case OpKind::kBroadcast:
      return PostBroadcast(op.buf, op.fp.root);
    case OpKind::kAllGather:
      return PostAllGather(op.buf, op.recv);
    case OpKind::kReduceScatter:
      return PostReduceScatter(op.buf, op.recv, *op.fp.reduce_op);
    case OpKind::kSend:
      return PostSend(op.buf, op.fp.peer);
    case OpKind::kRecv:
      return PostRecv(op.buf, op.fp.peer);
    case OpKind::kBarrier:
      break;
  }
  return PostBarrier();
}

}  // namespace tandem::comm
