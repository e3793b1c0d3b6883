// Flat buckets: many tensors packed into a few flat buffers, one buffer per
// run of same-dtype, same-device tensors up to a byte cap, so that one
// collective moves a whole bucket. Each bucket is a FlatParamGroup
// (flat_param.h: the layout, views, the shard rule) plus its buffer. DDP packs
// its gradients this way (one all-reduce per bucket), and ZeRO shards the
// same groups; DDP also packs its buffers for their broadcast.
//
// Contract of MakeFlatBuckets(entries, caps):
//   - Assignment walks `entries` in reverse order (the order backward
//     produces gradients in) and keeps one open bucket per (dtype, device).
//     A tensor joins its open bucket when the bucket's bytes plus its own
//     stay within the cap, and opens a new bucket otherwise; the cap is
//     caps.first_bucket_cap_bytes for the first bucket of each
//     (dtype, device) and caps.bucket_cap_bytes for the later ones. A tensor
//     larger than the cap gets a bucket of its own. Buckets are numbered in
//     the order they are opened, members listed in the order they joined.
//   - Each bucket's `group` lays its members out back to back (member k of
//     the group is input members[k]; its name and index are the entry's) and
//     its `flat` is a new zero-filled 1-d tensor of the bucket's dtype on its
//     device; `slots[i]` says where input i lives and holds a view of that
//     slice shaped like it (the slice aliases `flat`: writes through either
//     show in both). With caps.pad_to_multiple = k, `flat` ends in zero
//     padding up to the next multiple of k elements (the group's
//     NewBuffer(k)).
//   - Only dtype, device, shape and size of the inputs are read; their data
//     is neither read nor aliased (the groups keep handles to them). Errors:
//     a cap <= 0, pad_to_multiple < 1, an undefined tensor (InvalidArgument,
//     naming its index), an allocation failure.
// BindGradsToBuckets(params, set) then makes every params[i].grad() the
// view slots[i].view, copying a gradient it already had into the bucket.
//
//   TANDEM_ASSIGN_OR_RETURN(
//       FlatBucketSet set,
//       MakeFlatBuckets(params, {.first_bucket_cap_bytes = 1 << 20,
//                                .bucket_cap_bytes = 25 << 20}));
//   TANDEM_RETURN_IF_ERROR(BindGradsToBuckets(params, set));
//   // backward now accumulates into set.buckets[b].flat
//
// Functions only; the results are plain values (tensors alias as above) used
// by one thread at a time, like any Tensor.
#ifndef TANDEM_TRAIN_PARALLEL_CORE_FLAT_BUCKETS_H_
#define TANDEM_TRAIN_PARALLEL_CORE_FLAT_BUCKETS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/dtype.h"
#include "tensor/device.h"
#include "tensor/tensor.h"
#include "train/parallel/core/flat_param.h"

namespace tandem::train {

struct FlatBucketCaps {
  int64_t first_bucket_cap_bytes = int64_t{1} << 20;
  int64_t bucket_cap_bytes = int64_t{25} << 20;
  // Each bucket's `flat` is padded with zeros to a multiple of this many
  // elements (>= 1), so that a reduce-scatter or all-gather can split it
  // into equal shards, one per rank. No slot views the padding.
  int64_t pad_to_multiple = 1;
};

struct FlatBucket {
  FlatParamGroup group;          // the layout: dtype, device, members
  Tensor flat;                   // 1-d: the members, then any padding
  std::vector<int64_t> members;  // member k of `group` is input members[k]
};

// Where one input tensor lives.
struct FlatSlot {
  int64_t bucket = 0;  // index into FlatBucketSet::buckets
  int64_t member = 0;  // its member index in that bucket's group
  int64_t offset = 0;  // first element in that bucket's `flat`
  Tensor view;         // the slice, shaped like the input tensor
};

struct FlatBucketSet {
  std::vector<FlatBucket> buckets;
  std::vector<FlatSlot> slots;  // one per input tensor, input order
};

absl::StatusOr<FlatBucketSet> MakeFlatBuckets(
    absl::Span<const FlatParamGroup::Entry> entries,
    const FlatBucketCaps& caps);
// The same for plain tensors: entry i is named "" with index i.
absl::StatusOr<FlatBucketSet> MakeFlatBuckets(absl::Span<const Tensor> tensors,
                                              const FlatBucketCaps& caps);

// params[i].set_grad(set.slots[i].view) for every i, after copying a
// gradient params[i] already had into the view. `params` must be the
// tensors `set` was made from (InvalidArgument on a count mismatch).
absl::Status BindGradsToBuckets(absl::Span<const Tensor> params,
                                const FlatBucketSet& set);

// Whether `tensors` still fit `set`: as many as it was made from, each with
// its slot's shape, dtype and device. A caller that keeps a set across steps
// (DDP's buffer broadcast) remakes it when a module's tensors were replaced.
bool FitsFlatBuckets(absl::Span<const Tensor> tensors,
                     const FlatBucketSet& set);

// Copies each tensors[i] into its slot (pack), or each slot into tensors[i]
// (unpack): one collective per bucket then moves many small tensors (PyTorch's
// _broadcast_coalesced). `tensors` must fit `set` (InvalidArgument
// otherwise, before any copy).
absl::Status PackIntoFlatBuckets(absl::Span<const Tensor> tensors,
                                 const FlatBucketSet& set);
absl::Status UnpackFromFlatBuckets(const FlatBucketSet& set,
                                   absl::Span<const Tensor> tensors);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_CORE_FLAT_BUCKETS_H_
