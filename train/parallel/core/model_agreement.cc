#include "train/parallel/core/model_agreement.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "train/parallel/core/staged_all_gather.h"

namespace tandem::train {
namespace {

// `status` with "<who> on rank r: <context>: " in front, same code.
absl::Status Annotate(const absl::Status& status, const std::string& who,
                      int rank, const std::string& context) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(who, " on rank ", rank, ": ", context, ": ",
                                   status.message()));
}

absl::Duration Remaining(absl::Time deadline) {
  return std::max(deadline - absl::Now(), absl::ZeroDuration());
}

// ---- The description of a model that Create() compares across ranks.
// Encoded as int64 so one AllGather moves it: per list, the entry count,
// then per entry: name length, name bytes, dtype, requires_grad, ndim, dims.

struct EntryDesc {
  std::string name;
  int64_t dtype = 0;
  int64_t requires_grad = 0;
  std::vector<int64_t> shape;
};

std::string Describe(const EntryDesc& e) {
  return absl::StrCat(
      "\"", e.name, "\" ", DTypeName(static_cast<DType>(e.dtype)),
      ShapeToString(e.shape), e.requires_grad ? "" : " (requires_grad=false)");
}

void Encode(const std::vector<nn::NamedTensor>& entries,
            std::vector<int64_t>& out) {
  out.push_back(static_cast<int64_t>(entries.size()));
  for (const nn::NamedTensor& e : entries) {
    out.push_back(static_cast<int64_t>(e.name.size()));
    for (unsigned char c : e.name) out.push_back(c);
    out.push_back(static_cast<int64_t>(e.tensor.dtype()));
    out.push_back(e.tensor.requires_grad() ? 1 : 0);
    out.push_back(e.tensor.ndim());
    for (int64_t d : e.tensor.shape()) out.push_back(d);
  }
}

// Decodes one list starting at `pos`; false on malformed input.
bool Decode(const int64_t* data, int64_t size, int64_t& pos,
            std::vector<EntryDesc>& out) {
  auto next = [&](int64_t& v) {
    if (pos >= size) return false;
    v = data[pos++];
    return true;
  };
  int64_t n = 0;
  if (!next(n) || n < 0 || n > size) return false;
  for (int64_t i = 0; i < n; ++i) {
    EntryDesc e;
    int64_t len = 0;
    if (!next(len) || len < 0 || len > size - pos) return false;
    for (int64_t k = 0; k < len; ++k) {
      e.name.push_back(static_cast<char>(data[pos++]));
    }
    int64_t ndim = 0;
    if (!next(e.dtype) || !next(e.requires_grad) || !next(ndim) || ndim < 0 ||
        ndim > size - pos) {
      return false;
    }
    e.shape.assign(data + pos, data + pos + ndim);
    pos += ndim;
    out.push_back(std::move(e));
  }
  return true;
}

bool SameEntry(const EntryDesc& a, const EntryDesc& b) {
  return a.dtype == b.dtype && a.requires_grad == b.requires_grad &&
         a.shape == b.shape;
}

// "" when `other` (rank r) matches `ref` (rank 0); otherwise the difference.
std::string FirstDifference(const std::vector<EntryDesc>& ref,
                            const std::vector<EntryDesc>& other, int r,
                            const char* kind) {
  const size_t common = std::min(ref.size(), other.size());
  for (size_t i = 0; i < common; ++i) {
    if (!SameEntry(ref[i], other[i])) {
      return absl::StrCat(kind, " ", i, " is ", Describe(ref[i]),
                          " on rank 0 but ", Describe(other[i]), " on rank ",
                          r);
    }
  }
  if (ref.size() != other.size()) {
    const bool rank0_longer = ref.size() > other.size();
    const EntryDesc& extra = rank0_longer ? ref[common] : other[common];
    return absl::StrCat("rank ", r, " has ", other.size(), " ", kind,
                        "s but rank 0 has ", ref.size(), " (", kind, " ",
                        common, ", ", Describe(extra), ", exists only on rank ",
                        rank0_longer ? 0 : r, ")");
  }
  return "";
}

}  // namespace

absl::Status CheckSameModelOnEveryRank(const nn::Module& module,
                                       comm::Communicator& comm, Device device,
                                       const std::string& who,
                                       absl::Duration timeout) {
  const int rank = comm.rank();
  const int world_size = comm.size();
  if (world_size <= 1) return absl::OkStatus();
  std::vector<int64_t> mine;
  Encode(module.NamedParameters(), mine);
  Encode(module.NamedBuffers(), mine);
  const absl::Time deadline = absl::Now() + timeout;

  // 0. Do the descriptions agree (a hash, one small all-reduce: the same
  // cost per rank at any world size)? Only when they do not:
  // 1. everyone's description length, 2. everyone's description (padded),
  // to name the difference. Staged through the parameters' device when they
  // are not on the CPU.
  uint64_t hash = 14695981039346656037ull;  // FNV-1a over the words
  for (int64_t word : mine) {
    for (int b = 0; b < 8; ++b) {
      hash ^= static_cast<uint64_t>(word >> (8 * b)) & 0xff;
      hash *= 1099511628211ull;
    }
  }
  hash ^= static_cast<uint64_t>(mine.size());
  absl::StatusOr<bool> same = SameOnEveryRank(
      comm, device, static_cast<int64_t>(hash), Remaining(deadline));
  TANDEM_RETURN_IF_ERROR(
      Annotate(same.status(), who, rank, "comparing model descriptions"));
  if (*same) return absl::OkStatus();
  int64_t length = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lengths(world_size);
  TANDEM_RETURN_IF_ERROR(
      Annotate(AllGatherInt64(comm, device, absl::MakeSpan(&length, 1),
                              absl::MakeSpan(lengths), Remaining(deadline)),
               who, rank, "exchanging model descriptions"));
  const int64_t max_length = *std::max_element(lengths.begin(), lengths.end());
  mine.resize(max_length, 0);
  std::vector<int64_t> all(static_cast<size_t>(max_length) * world_size);
  TANDEM_RETURN_IF_ERROR(
      Annotate(AllGatherInt64(comm, device, absl::MakeSpan(mine),
                              absl::MakeSpan(all), Remaining(deadline)),
               who, rank, "exchanging model descriptions"));

  std::vector<std::vector<EntryDesc>> params(world_size);
  std::vector<std::vector<EntryDesc>> buffers(world_size);
  for (int r = 0; r < world_size; ++r) {
    const int64_t* data = all.data() + static_cast<int64_t>(r) * max_length;
    int64_t pos = 0;
    if (lengths[r] < 0 || lengths[r] > max_length ||
        !Decode(data, lengths[r], pos, params[r]) ||
        !Decode(data, lengths[r], pos, buffers[r])) {
      return absl::InternalError(absl::StrCat(who, " on rank ", rank,
                                              ": could not decode rank ", r,
                                              "'s model description"));
    }
  }
  for (int r = 1; r < world_size; ++r) {
    std::string diff = FirstDifference(params[0], params[r], r, "parameter");
    if (diff.empty()) {
      diff = FirstDifference(buffers[0], buffers[r], r, "buffer");
    }
    if (!diff.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          who, " (reported on rank ", rank,
          "): the ranks hold different models: ", diff,
          ". Every rank must build the same model (same layers, in the same "
          "order, with the same shapes and dtypes) before wrapping it"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::train
