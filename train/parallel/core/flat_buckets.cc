#include "train/parallel/core/flat_buckets.h"

#include <cstdint>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/dtype.h"
#include "base/status_macros.h"
#include "tensor/device.h"
#include "tensor/tensor.h"

namespace tandem::train {
namespace {

// What a bucket may hold: tensors of one dtype on one device.
struct BucketKey {
  DType dtype;
  DeviceType type;
  int index;
  friend bool operator<(const BucketKey& a, const BucketKey& b) {
    return std::tie(a.dtype, a.type, a.index) <
           std::tie(b.dtype, b.type, b.index);
  }
};

// The open bucket of one key.
struct OpenBucket {
  int64_t bucket = 0;  // index into the result
  int64_t bytes = 0;   // bytes assigned to it so far
  int64_t opened = 0;  // buckets opened for this key, this one included
};

}  // namespace

absl::StatusOr<FlatBucketSet> MakeFlatBuckets(
    absl::Span<const FlatParamGroup::Entry> entries,
    const FlatBucketCaps& caps) {
  if (caps.first_bucket_cap_bytes <= 0 || caps.bucket_cap_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("MakeFlatBuckets: bucket caps must be positive; got "
                     "first_bucket_cap_bytes = ",
                     caps.first_bucket_cap_bytes,
                     " and bucket_cap_bytes = ", caps.bucket_cap_bytes));
  }
  if (caps.pad_to_multiple < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("MakeFlatBuckets: pad_to_multiple must be >= 1 (1: no "
                     "padding); got ",
                     caps.pad_to_multiple));
  }
  FlatBucketSet set;
  set.slots.resize(entries.size());
  std::map<BucketKey, OpenBucket> open;
  for (int64_t i = static_cast<int64_t>(entries.size()) - 1; i >= 0; --i) {
    const Tensor& t = entries[i].tensor;
    if (!t.defined()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "MakeFlatBuckets: tensor ", i, " of ", entries.size(),
          " is undefined; expected every tensor to have a dtype, device and "
          "shape"));
    }
    const BucketKey key{t.dtype(), t.device().type(), t.device().index()};
    auto it = open.find(key);
    const bool fits = it != open.end() &&
                      it->second.bytes + t.nbytes() <=
                          (it->second.opened == 1 ? caps.first_bucket_cap_bytes
                                                  : caps.bucket_cap_bytes);
    if (!fits) {
      const int64_t opened = it == open.end() ? 1 : it->second.opened + 1;
      open[key] =
          OpenBucket{static_cast<int64_t>(set.buckets.size()), 0, opened};
      set.buckets.emplace_back();
    }
    OpenBucket& o = open[key];
    o.bytes += t.nbytes();
    std::vector<int64_t>& members = set.buckets[o.bucket].members;
    set.slots[i].bucket = o.bucket;
    set.slots[i].member = static_cast<int64_t>(members.size());
    members.push_back(i);
  }

  for (FlatBucket& bucket : set.buckets) {
    std::vector<FlatParamGroup::Entry> laid_out;
    laid_out.reserve(bucket.members.size());
    for (int64_t i : bucket.members) laid_out.push_back(entries[i]);
    const Tensor first = laid_out.front().tensor;
    TANDEM_ASSIGN_OR_RETURN(
        bucket.group, FlatParamGroup::Create(first.dtype(), first.device(),
                                             std::move(laid_out)));
    TANDEM_ASSIGN_OR_RETURN(bucket.flat,
                            bucket.group.NewBuffer(caps.pad_to_multiple));
    for (int64_t i : bucket.members) {
      FlatSlot& slot = set.slots[i];
      slot.offset = bucket.group.members()[slot.member].offset;
      TANDEM_ASSIGN_OR_RETURN(slot.view,
                              bucket.group.View(bucket.flat, slot.member));
    }
  }
  return set;
}

absl::StatusOr<FlatBucketSet> MakeFlatBuckets(absl::Span<const Tensor> tensors,
                                              const FlatBucketCaps& caps) {
  std::vector<FlatParamGroup::Entry> entries;
  entries.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    entries.push_back({"", static_cast<int64_t>(i), tensors[i]});
  }
  return MakeFlatBuckets(entries, caps);
}

absl::Status BindGradsToBuckets(absl::Span<const Tensor> params,
                                const FlatBucketSet& set) {
  if (params.size() != set.slots.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BindGradsToBuckets: got ", params.size(),
        " parameters but the buckets were made from ", set.slots.size(),
        " tensors; pass the tensors given to MakeFlatBuckets"));
  }
  // Bucket by bucket, members in layout order (the order DDP always used).
  for (const FlatBucket& bucket : set.buckets) {
    TANDEM_RETURN_IF_ERROR(bucket.group.BindGrads(bucket.flat));
  }
  return absl::OkStatus();
}

bool FitsFlatBuckets(absl::Span<const Tensor> tensors,
                     const FlatBucketSet& set) {
  if (tensors.size() != set.slots.size()) return false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& view = set.slots[i].view;
    if (!tensors[i].defined() || tensors[i].shape() != view.shape() ||
        tensors[i].dtype() != view.dtype() ||
        tensors[i].device() != view.device()) {
      return false;
    }
  }
  return true;
}

namespace {

absl::Status CheckFits(absl::Span<const Tensor> tensors,
                       const FlatBucketSet& set, const char* what) {
  if (FitsFlatBuckets(tensors, set)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": the ", tensors.size(),
      " tensors do not fit the buckets made from ", set.slots.size(),
      " tensors (count, shape, dtype or device changed); remake the buckets "
      "with MakeFlatBuckets"));
}

}  // namespace

absl::Status PackIntoFlatBuckets(absl::Span<const Tensor> tensors,
                                 const FlatBucketSet& set) {
  TANDEM_RETURN_IF_ERROR(CheckFits(tensors, set, "PackIntoFlatBuckets"));
  for (size_t i = 0; i < tensors.size(); ++i) {
    TANDEM_RETURN_IF_ERROR(set.slots[i].view.CopyFrom(tensors[i]));
  }
  return absl::OkStatus();
}

absl::Status UnpackFromFlatBuckets(const FlatBucketSet& set,
                                   absl::Span<const Tensor> tensors) {
  TANDEM_RETURN_IF_ERROR(CheckFits(tensors, set, "UnpackFromFlatBuckets"));
  for (size_t i = 0; i < tensors.size(); ++i) {
    TANDEM_RETURN_IF_ERROR(tensors[i].CopyFrom(set.slots[i].view));
  }
  return absl::OkStatus();
}

}  // namespace tandem::train
