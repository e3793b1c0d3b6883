#include "comm/fingerprint.h"

#include <cstdlib>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
  if (dtype < 0 || dtype >= static_cast<int64_t>(std::size(kEveryDType))) {
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

absl::Status CompareGatheredFingerprints(std::string_view backend, int rank,
                                         int size,
                                         absl::Span<const int64_t> gathered,
                                         const EncodedFingerprint& mine) {
  bool same = gathered.size() == static_cast<size_t>(size) *
                                     static_cast<size_t>(kFingerprintWords);
  for (size_t i = 0; i < gathered.size() && same; ++i) {
    if (gathered[i] != mine[i % kFingerprintWords]) same = false;
  }
  if (same) return absl::OkStatus();
  // Group ranks by what they issued, in order of first appearance.
  std::map<EncodedFingerprint, std::vector<int>> ranks_of;
  std::vector<EncodedFingerprint> order;
  for (int r = 0; r < size; ++r) {
    EncodedFingerprint words{};
    for (int w = 0; w < kFingerprintWords; ++w) {
      const size_t at = static_cast<size_t>(r) * kFingerprintWords + w;
      words[w] = at < gathered.size() ? gathered[at] : -1;
    }
    auto [it, inserted] = ranks_of.try_emplace(words);
    if (inserted) order.push_back(words);
    it->second.push_back(r);
  }
  std::vector<std::string> parts;
  for (const EncodedFingerprint& words : order) {
    Fingerprint fp;
    const std::string what = Decode(words, fp)
                                 ? fp.DebugString()
                                 : absl::StrCat("unreadable fingerprint [",
                                                absl::StrJoin(words, ","), "]");
    const std::vector<int>& ranks = ranks_of[words];
    parts.push_back(absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ",
                                 absl::StrJoin(ranks, ", "), " issued ", what));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      std::string(backend), ": collective mismatch seen on rank ", rank, ": ",
      absl::StrJoin(parts, "; "),
      ". Every rank must issue the same collectives in the same order with "
      "the same dtype, count, root and reduce op; no data was moved, and every "
      "rank fails this operation."));
}

bool CollectiveCheckRequested(bool requested) {
  const char* debug = std::getenv("TANDEM_DISTRIBUTED_DEBUG");
  if (debug != nullptr && std::string_view(debug) == "DETAIL") return true;
  if (debug != nullptr && std::string_view(debug) == "OFF") return false;
  return requested;
}

}  // namespace tandem::comm
