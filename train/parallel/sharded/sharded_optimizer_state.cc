#include "train/parallel/sharded/sharded_optimizer_state.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <map>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "comm/work.h"
#include "tensor/autograd/autograd.h"
#include "train/parallel/core/staged_all_gather.h"
#include "train/parallel/core/tensor_comm.h"

namespace tandem::train {
namespace {

// The elementwise keys, then the scalar one; bit k of a key mask is kKeys[k].
constexpr std::array<const char*, 5> kKeys = {
    "momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"};
constexpr int kStepKey = 4;

int KeyIndex(const std::string& key) {
  for (size_t k = 0; k < kKeys.size(); ++k) {
    if (key == kKeys[k]) return static_cast<int>(k);
  }
  return -1;
}

// "<i>.<key>" -> (i, key); false when malformed.
bool SplitName(const std::string& name, int64_t& index, std::string& key) {
  const size_t dot = name.find('.');
  if (dot == std::string::npos || dot == 0) return false;
  const char* end = name.data() + dot;
  const std::from_chars_result r = std::from_chars(name.data(), end, index);
  if (r.ec != std::errc() || r.ptr != end || index < 0) return false;
  key = name.substr(dot + 1);
  return true;
}

std::string Desc(DType dtype, const Shape& shape) {
  return absl::StrCat(DTypeName(dtype), ShapeToString(shape));
}

// This rank's state per local parameter index and key index.
struct LocalState {
  std::map<int64_t, std::map<int, Tensor>> by_index;
  int64_t mask = -1;  // -1: no local optimizer
  int64_t step = 0;
};

absl::StatusOr<LocalState> ReadLocal(const optim::Optimizer* local, int rank) {
  LocalState out;
  if (local == nullptr) return out;
  out.mask = 0;
  for (const optim::StateEntry& e : local->ExportState()) {
    int64_t index = 0;
    std::string key;
    const int k = SplitName(e.name, index, key) ? KeyIndex(key) : -1;
    if (k < 0) {
      return absl::UnimplementedError(absl::StrCat(
          "rank ", rank, ": optimizer state entry \"", e.name,
          "\" is not one a sharded checkpoint can gather (known: "
          "momentum_buffer, exp_avg, exp_avg_sq, max_exp_avg_sq, step); "
          "use Sgd or AdamW, or --shard=none"));
    }
    out.by_index[index][k] = e.tensor;
    out.mask |= int64_t{1} << k;
    if (k == kStepKey) {
      TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> v,
                              e.tensor.ToVector<int64_t>());
      if (out.step != 0 && v[0] != out.step) {
        return absl::InternalError(absl::StrCat(
            "rank ", rank, ": the shards' optimizer steps differ (", out.step,
            " and ", v[0],
            "); a sharded optimizer steps every shard together"));
      }
      out.step = v[0];
    }
  }
  for (const auto& [index, keys] : out.by_index) {
    int64_t mine = 0;
    for (const auto& [k, t] : keys) mine |= int64_t{1} << k;
    if (mine != out.mask) {
      return absl::InternalError(absl::StrCat(
          "rank ", rank, ": shard ", index,
          " has other optimizer state keys than the rest; a sharded "
          "optimizer steps every shard together"));
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<optim::StateEntry>> GatherFullOptimizerState(
    comm::Communicator& comm, const std::vector<FlatShard>& layout,
    const optim::Optimizer* local, absl::Duration timeout) {
  const int rank = comm.rank();
  const int n = comm.size();
  TANDEM_ASSIGN_OR_RETURN(LocalState mine, ReadLocal(local, rank));
  const Device device =
      layout.empty() ? Device::CPU() : layout[0].group.device();
  std::vector<int64_t> all(2 * n);
  TANDEM_RETURN_IF_ERROR(AllGatherInt64(comm, device, {mine.mask, mine.step},
                                        absl::MakeSpan(all), timeout));
  const int64_t mask = all[0];
  const int64_t step = all[1];
  for (int r = 0; r < n; ++r) {
    if (all[2 * r] != -1 && (all[2 * r] != mask || all[2 * r + 1] != step)) {
      return absl::InternalError(absl::StrCat(
          "rank ", rank, ": the shard optimizers of ranks 0 and ", r,
          " hold different state (key masks ", mask, " and ", all[2 * r],
          ", steps ", step, " and ", all[2 * r + 1],
          "); every rank must step the same optimizer the same number of "
          "times"));
    }
  }
  if (mask <= 0) return std::vector<optim::StateEntry>();
  // param index -> key index -> tensor
  std::map<int64_t, std::map<int, Tensor>> full;
  NoGradGuard no_grad;
  for (const FlatShard& flat : layout) {
    for (int k = 0; k < kStepKey; ++k) {
      if ((mask & (int64_t{1} << k)) == 0) continue;
      TANDEM_ASSIGN_OR_RETURN(
          Tensor buffer, Tensor::Zeros({flat.shard * n}, flat.group.dtype(),
                                       flat.group.device()));
      if (flat.local_index >= 0) {
        auto it = mine.by_index.find(flat.local_index);
        if (it == mine.by_index.end() || !it->second.count(k)) {
          return absl::InternalError(
              absl::StrCat("rank ", rank, ": shard ", flat.local_index,
                           " has no \"", kKeys[k], "\" state"));
        }
        TANDEM_ASSIGN_OR_RETURN(
            Tensor slot,
            buffer.View(flat.local_begin, {flat.local_end - flat.local_begin}));
        TANDEM_RETURN_IF_ERROR(slot.CopyFrom(it->second[k]));
      }
      if (n > 1) {
        TANDEM_ASSIGN_OR_RETURN(Tensor send,
                                buffer.View(rank * flat.shard, {flat.shard}));
        TANDEM_ASSIGN_OR_RETURN(comm::BufferView send_view, ToBufferView(send));
        TANDEM_ASSIGN_OR_RETURN(comm::BufferView recv_view,
                                ToBufferView(buffer));
        absl::Status s = comm.AllGather(send_view, recv_view)->Wait(timeout);
        if (!s.ok()) {
          return absl::Status(
              s.code(),
              absl::StrCat("rank ", rank, ": gathering optimizer state \"",
                           kKeys[k], "\": ", s.message()));
        }
      }
      for (const FlatParamMember& m : flat.group.members()) {
        TANDEM_ASSIGN_OR_RETURN(Tensor view, buffer.View(m.offset, m.shape));
        TANDEM_ASSIGN_OR_RETURN(full[m.index][k], view.Clone());
      }
    }
    if ((mask & (int64_t{1} << kStepKey)) != 0) {
      for (const FlatParamMember& m : flat.group.members()) {
        TANDEM_ASSIGN_OR_RETURN(full[m.index][kStepKey],
                                Tensor::FromVector<int64_t>({step}, Shape{}));
      }
    }
  }
  std::vector<optim::StateEntry> out;
  for (const auto& [index, keys] : full) {
    for (const auto& [k, t] : keys) {
      out.push_back({absl::StrCat(index, ".", kKeys[k]), t});
    }
  }
  return out;
}

absl::Status LoadFullOptimizerState(const std::vector<FlatShard>& layout,
                                    const std::vector<optim::StateEntry>& full,
                                    optim::Optimizer* local, int rank) {
  std::map<int64_t, std::pair<const FlatShard*, const FlatParamMember*>>
      by_param;
  for (const FlatShard& flat : layout) {
    for (const FlatParamMember& m : flat.group.members()) {
      by_param[m.index] = {&flat, &m};
    }
  }
  const auto bad = [rank](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": optimizer state ", what));
  };
  // param index -> key index -> tensor; checked against the parameters.
  std::map<int64_t, std::map<int, Tensor>> state;
  for (const optim::StateEntry& e : full) {
    int64_t index = 0;
    std::string key;
    if (!SplitName(e.name, index, key)) {
      return bad(absl::StrCat("entry \"", e.name,
                              "\" is not named <parameter index>.<key>"));
    }
    auto it = by_param.find(index);
    if (it == by_param.end()) {
      return bad(absl::StrCat("entry \"", e.name, "\" names parameter ", index,
                              " but the model has ", by_param.size(),
                              " parameters: the checkpoint is of another "
                              "model"));
    }
    const FlatShard& flat = *it->second.first;
    const FlatParamMember& m = *it->second.second;
    const int k = KeyIndex(key);
    if (k < 0) {
      return bad(absl::StrCat("entry \"", e.name, "\" has the key \"", key,
                              "\", which a sharded optimizer cannot split "
                              "(known: momentum_buffer, exp_avg, exp_avg_sq, "
                              "max_exp_avg_sq, step)"));
    }
    if (k == kStepKey) {
      if (!e.tensor.defined() || e.tensor.ndim() != 0 ||
          e.tensor.dtype() != DType::kI64) {
        return bad(absl::StrCat("entry \"", e.name,
                                "\" must be an i64 scalar (the step)"));
      }
    } else if (!e.tensor.defined() || e.tensor.shape() != m.shape ||
               e.tensor.dtype() != flat.group.dtype()) {
      return bad(absl::StrCat("entry \"", e.name, "\" is ",
                              e.tensor.defined()
                                  ? Desc(e.tensor.dtype(), e.tensor.shape())
                                  : std::string("undefined"),
                              " but parameter ", index, " (\"", m.name,
                              "\") is ", Desc(flat.group.dtype(), m.shape),
                              ": the checkpoint does not match the model"));
    }
    state[index][k] = e.tensor;
  }
  // Parameters sharing a flat buffer share one optimizer tensor: same keys,
  // same step.
  std::vector<optim::StateEntry> entries;
  NoGradGuard no_grad;
  for (const FlatShard& flat : layout) {
    const FlatParamMember& first = flat.group.members().front();
    const std::map<int, Tensor> none;
    const auto keys_of = [&](const FlatParamMember& m) -> const auto& {
      auto it = state.find(m.index);
      return it == state.end() ? none : it->second;
    };
    const std::map<int, Tensor>& first_keys = keys_of(first);
    for (const FlatParamMember& m : flat.group.members()) {
      const std::map<int, Tensor>& keys = keys_of(m);
      bool same = keys.size() == first_keys.size();
      for (const auto& [k, t] : keys) {
        same = same && first_keys.count(k) > 0;
        if (same && k == kStepKey) {
          same = *t.Item() == *first_keys.at(k).Item();
        }
      }
      if (!same) {
        return bad(absl::StrCat(
            "of parameters ", first.index, " (\"", first.name, "\") and ",
            m.index, " (\"", m.name,
            "\") differ in keys or step, but they share one shard of the "
            "sharded optimizer; such a state (some parameters stepped more "
            "often than others) cannot be sharded"));
      }
    }
    if (flat.local_index < 0) continue;
    for (const auto& [k, t] : first_keys) {
      if (k == kStepKey) {
        entries.push_back({absl::StrCat(flat.local_index, ".step"), t});
        continue;
      }
      // Only [local_begin, local_end) is needed: copy the overlap of each
      // member with it.
      TANDEM_ASSIGN_OR_RETURN(
          Tensor piece, Tensor::Zeros({flat.local_end - flat.local_begin},
                                      flat.group.dtype(), flat.group.device()));
      for (const FlatParamMember& m : flat.group.members()) {
        const int64_t numel = state[m.index][k].numel();
        const int64_t lo = std::max(m.offset, flat.local_begin);
        const int64_t hi = std::min(m.offset + numel, flat.local_end);
        if (hi <= lo) continue;
        TANDEM_ASSIGN_OR_RETURN(Tensor flat_src,
                                state[m.index][k].Reshape({numel}));
        TANDEM_ASSIGN_OR_RETURN(Tensor src,
                                flat_src.View(lo - m.offset, {hi - lo}));
        TANDEM_ASSIGN_OR_RETURN(Tensor dst,
                                piece.View(lo - flat.local_begin, {hi - lo}));
        TANDEM_RETURN_IF_ERROR(dst.CopyFrom(src));
      }
      entries.push_back({absl::StrCat(flat.local_index, ".", kKeys[k]), piece});
    }
  }
  if (local == nullptr) return absl::OkStatus();
  absl::Status s = local->ImportState(entries);
  if (!s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("rank ", rank, ": ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace tandem::train
