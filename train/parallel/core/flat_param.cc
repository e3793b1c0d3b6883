#include "train/parallel/core/flat_param.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/dtype.h"
#include "base/status_macros.h"
#include "tensor/device.h"
#include "tensor/tensor.h"

namespace tandem::train {

absl::StatusOr<FlatParamGroup> FlatParamGroup::Create(
    DType dtype, Device device, std::vector<Entry> entries) {
  FlatParamGroup group;
  group.dtype_ = dtype;
  group.device_ = device;
  group.members_.reserve(entries.size());
  for (size_t k = 0; k < entries.size(); ++k) {
    Entry& e = entries[k];
    if (!e.tensor.defined()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "FlatParamGroup: tensor ", k, " (\"", e.name, "\", index ", e.index,
          ") of ", entries.size(),
          " is undefined; expected every tensor to have a dtype, device and "
          "shape"));
    }
    if (e.tensor.dtype() != dtype || e.tensor.device() != device) {
      return absl::InvalidArgumentError(absl::StrCat(
          "FlatParamGroup: tensor ", k, " (\"", e.name, "\") is ",
          DTypeName(e.tensor.dtype()), " on ", e.tensor.device().ToString(),
          " but the group is ", DTypeName(dtype), " on ", device.ToString(),
          "; a group is one flat buffer, so its tensors share one dtype and "
          "one device"));
    }
    FlatParamMember m;
    m.name = std::move(e.name);
    m.index = e.index;
    m.shape = e.tensor.shape();
    m.numel = e.tensor.numel();
    m.offset = group.numel_;
    m.tensor = std::move(e.tensor);
    group.numel_ += m.numel;
    group.members_.push_back(std::move(m));
  }
  return group;
}

int64_t FlatParamGroup::ShardNumel(int64_t num_shards) const {
  if (num_shards < 1) return 0;
  return (numel_ + num_shards - 1) / num_shards;
}

int64_t FlatParamGroup::PaddedNumel(int64_t num_shards) const {
  return ShardNumel(num_shards) * std::max<int64_t>(num_shards, 0);
}

absl::StatusOr<FlatShardRange> FlatParamGroup::Shard(int64_t k,
                                                     int64_t num_shards) const {
  if (num_shards < 1 || k < 0 || k >= num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("FlatParamGroup::Shard: shard ", k, " of ", num_shards,
                     "; expected num_shards >= 1 and 0 <= k < num_shards"));
  }
  const int64_t s = ShardNumel(num_shards);
  FlatShardRange range;
  range.begin = k * s;
  range.end = range.begin + s;
  range.data_end = std::clamp(numel_, range.begin, range.end);
  for (size_t m = 0; m < members_.size(); ++m) {
    const FlatParamMember& member = members_[m];
    const int64_t lo = std::max(member.offset, range.begin);
    const int64_t hi = std::min(member.offset + member.numel, range.data_end);
    if (hi <= lo) continue;
    range.pieces.push_back({.member = static_cast<int64_t>(m),
                            .member_begin = lo - member.offset,
                            .shard_offset = lo - range.begin,
                            .numel = hi - lo});
  }
  return range;
}

absl::StatusOr<Tensor> FlatParamGroup::NewBuffer(int64_t num_shards,
                                                 std::optional<DType> dtype,
                                                 bool zeroed) const {
  if (num_shards < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("FlatParamGroup::NewBuffer: num_shards must be >= 1 (1: "
                     "no padding); got ",
                     num_shards));
  }
  const Shape shape = {PaddedNumel(num_shards)};
  const DType type = dtype.value_or(dtype_);
  return zeroed ? Tensor::Zeros(shape, type, device_)
                : Tensor::Empty(shape, type, device_);
}

absl::StatusOr<Tensor> FlatParamGroup::View(const Tensor& flat,
                                            int64_t member) const {
  if (member < 0 || member >= size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("FlatParamGroup::View: member ", member, " of a group of ",
                     size(), "; expected 0 <= member < ", size()));
  }
  if (!flat.defined() || flat.ndim() != 1 || flat.numel() < numel_ ||
      flat.device() != device_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FlatParamGroup::View: the buffer is ",
        flat.defined()
            ? absl::StrCat(DTypeName(flat.dtype()), ShapeToString(flat.shape()),
                           " on ", flat.device().ToString())
            : "undefined",
        " but the group needs a 1-d buffer of at least ", numel_,
        " elements on ", device_.ToString(),
        "; make it with FlatParamGroup::NewBuffer"));
  }
  const FlatParamMember& m = members_[member];
  return flat.View(m.offset, m.shape);
}

absl::StatusOr<std::vector<Tensor>> FlatParamGroup::Views(
    const Tensor& flat) const {
  std::vector<Tensor> out;
  out.reserve(members_.size());
  for (int64_t m = 0; m < size(); ++m) {
    TANDEM_ASSIGN_OR_RETURN(Tensor view, View(flat, m));
    out.push_back(std::move(view));
  }
  return out;
}

absl::Status FlatParamGroup::Pack(const Tensor& flat) const {
  for (int64_t m = 0; m < size(); ++m) {
    TANDEM_ASSIGN_OR_RETURN(Tensor view, View(flat, m));
    TANDEM_RETURN_IF_ERROR(view.CopyFrom(members_[m].tensor));
  }
  return absl::OkStatus();
}

absl::Status FlatParamGroup::BindParams(const Tensor& flat) const {
  for (int64_t m = 0; m < size(); ++m) {
    TANDEM_ASSIGN_OR_RETURN(Tensor view, View(flat, m));
    const Tensor& t = members_[m].tensor;
    absl::Status s =
        view.dtype() == t.dtype() ? t.SetData(view) : t.SetDataWithDtype(view);
    if (!s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("\"", members_[m].name, "\": ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status FlatParamGroup::BindGrads(const Tensor& flat) const {
  for (int64_t m = 0; m < size(); ++m) {
    TANDEM_ASSIGN_OR_RETURN(Tensor view, View(flat, m));
    const Tensor& t = members_[m].tensor;
    const Tensor existing = t.grad();
    if (existing.defined()) TANDEM_RETURN_IF_ERROR(view.CopyFrom(existing));
    TANDEM_RETURN_IF_ERROR(t.set_grad(view));
  }
  return absl::OkStatus();
}

std::optional<int64_t> FlatParamGroup::FirstUnbound(const Tensor& flat) const {
  for (int64_t m = 0; m < size(); ++m) {
    const Tensor& t = members_[m].tensor;
    if (t.storage() != flat.storage() ||
        t.storage_offset() != flat.storage_offset() + members_[m].offset) {
      return m;
    }
  }
  return std::nullopt;
}

}  // namespace tandem::train
