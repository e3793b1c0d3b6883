// train/parallel/core: what every parallel wrapper (ddp/, sharded/,
// pipeline/) shares and none owns: this flat-parameter core and its buckets
// (flat_buckets.h), the one tensor -> comm::BufferView bridge
// (tensor_comm.h), the staged all-gather of small host values, and the
// cross-rank checks (finite_check.h, found_inf.h, model_agreement.h).
// Nothing here depends on a wrapper.
//
// FlatParamGroup: the one flat-parameter core of the parallel wrappers (the
// role of PyTorch FSDP's FlatParamHandle). A group lays a list of tensors of
// one dtype and device back to back in a 1-d buffer and says where each one
// lives (offset, shape, name, the caller's index); it makes parameter and
// gradient views into such a buffer, and it owns the shard rule: shard k of
// N is an equal slice of the buffer padded with zeros to a multiple of N,
// and the group says which element range that is and which members (and
// which of their elements) it covers. DDP's gradient buckets, ZeRO-1/2's
// shards and FSDP's units are all groups:
//
//   DDP      one group per bucket (flat_buckets.h); the gradient buffer is
//            the bucket (padded to N for ZeRO-2's reduce-scatter);
//   ZeRO     the same groups; a parameter buffer per group (BindParams) and
//            this rank's Shard(rank, N) of each;
//   FSDP     one group per unit; the unit's full parameter and gradient
//            buffers, and this rank's Shard(rank, N) as the optimizer's
//            shard.
//
// Shard rule (PyTorch's FlatParamHandle._get_shard): with numel elements
// and N shards, s = ceil(numel / N) elements per shard, the buffer holds
// N * s elements (numel, then zero padding), and shard k is [k * s,
// (k + 1) * s). Its elements below numel belong to members; a member may
// straddle two or more shards, and with more shards than elements the last
// shards are padding only. An empty group has s = 0.
//
//   TANDEM_ASSIGN_OR_RETURN(
//       FlatParamGroup group,
//       FlatParamGroup::Create(DType::kF32, Device::CPU(),
//                              {{"0.weight", 0, w}, {"0.bias", 1, b}}));
//   TANDEM_ASSIGN_OR_RETURN(Tensor flat, group.NewBuffer(world_size));
//   TANDEM_RETURN_IF_ERROR(group.Pack(flat));        // values in
//   TANDEM_RETURN_IF_ERROR(group.BindParams(flat));  // w, b view `flat`
//   TANDEM_ASSIGN_OR_RETURN(FlatShardRange mine,
//                           group.Shard(rank, world_size));
//
// A group is a value (copyable; it holds handles to its tensors, never their
// data, and no buffer). The buffers belong to the caller; one group may
// describe several buffers (parameters, gradients, a cast copy). Functions
// only read the group; those that take a buffer write only that buffer or
// the members' data/grad pointers, as documented. Used by one thread at a
// time, like any Tensor.
#ifndef TANDEM_TRAIN_PARALLEL_CORE_FLAT_PARAM_H_
#define TANDEM_TRAIN_PARALLEL_CORE_FLAT_PARAM_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "tensor/device.h"
#include "tensor/tensor.h"

namespace tandem::train {

// One tensor of a group.
struct FlatParamMember {
  std::string name;  // for messages and introspection ("0.weight")
  // The caller's index of the tensor: DDP, ZeRO and FSDP use its place in
  // the module's NamedParameters() (what optimizer checkpoints key on);
  // flat buckets of plain tensors use its place in their input.
  int64_t index = 0;
  Tensor tensor;  // a handle to the tensor (its identity, not its data)
  Shape shape;
  int64_t numel = 0;
  int64_t offset = 0;  // its first element in the flat buffer
};

// The part of one member inside one shard (PyTorch's _ShardParamInfo).
struct FlatShardPiece {
  int64_t member = 0;        // index into FlatParamGroup::members()
  int64_t member_begin = 0;  // first of the member's flattened elements here
  int64_t shard_offset = 0;  // where that element sits in the shard
  int64_t numel = 0;         // how many of the member's elements (> 0)
};

// Shard k of N of a group: elements [begin, end) of the padded buffer.
struct FlatShardRange {
  int64_t begin = 0;  // k * s
  int64_t end = 0;    // (k + 1) * s
  // [begin, data_end) are members' elements, [data_end, end) padding;
  // data_end = clamp(numel, begin, end).
  int64_t data_end = 0;
  std::vector<FlatShardPiece> pieces;  // in layout order
  int64_t numel() const { return end - begin; }
  int64_t data_numel() const { return data_end - begin; }
};

class FlatParamGroup {
 public:
  // What Create lays out: a name, the caller's index, the tensor.
  struct Entry {
    std::string name;
    int64_t index = 0;
    Tensor tensor;
  };

  // Lays `entries` out back to back in the given order. Every tensor must be
  // defined, of `dtype` and on `device` (InvalidArgument naming the entry
  // and both dtypes/devices otherwise). Zero entries make an empty group.
  static absl::StatusOr<FlatParamGroup> Create(DType dtype, Device device,
                                               std::vector<Entry> entries);

  // An empty f32 group on the CPU.
  FlatParamGroup() = default;

  DType dtype() const { return dtype_; }
  const Device& device() const { return device_; }
  const std::vector<FlatParamMember>& members() const { return members_; }
  int64_t size() const { return static_cast<int64_t>(members_.size()); }
  bool empty() const { return members_.empty(); }
  // The members' elements, without padding.
  int64_t numel() const { return numel_; }

  // s = ceil(numel / num_shards), and the padded length N * s. num_shards
  // must be >= 1 (callers check; Shard and NewBuffer return the error).
  int64_t ShardNumel(int64_t num_shards) const;
  int64_t PaddedNumel(int64_t num_shards) const;
  // Shard k of N (see the header comment). InvalidArgument for N < 1 or k
  // outside [0, N).
  absl::StatusOr<FlatShardRange> Shard(int64_t k, int64_t num_shards) const;

  // A new 1-d buffer of PaddedNumel(num_shards) elements of `dtype` (the
  // group's when unset) on the group's device: zero-filled, or with
  // `zeroed` false uninitialised (a buffer about to be filled whole).
  absl::StatusOr<Tensor> NewBuffer(int64_t num_shards,
                                   std::optional<DType> dtype = std::nullopt,
                                   bool zeroed = true) const;
  // Member m's slice of `flat`, shaped like the member; it aliases `flat`.
  // `flat` must be 1-d with at least numel() elements, on the group's device
  // (any dtype: a buffer may hold a cast copy). InvalidArgument otherwise.
  absl::StatusOr<Tensor> View(const Tensor& flat, int64_t member) const;
  // Every member's View, in member order.
  absl::StatusOr<std::vector<Tensor>> Views(const Tensor& flat) const;

  // Copies each member's current values into its slice of `flat`.
  absl::Status Pack(const Tensor& flat) const;
  // Makes each member's data its slice of `flat` (Tensor::SetData; when
  // `flat` has another dtype, SetDataWithDtype, which needs members without
  // gradients). Values are not copied: Pack first to keep them.
  absl::Status BindParams(const Tensor& flat) const;
  // Makes each member's grad() its slice of `flat`, member by member in
  // layout order, first copying a gradient it already had into the slice.
  // Backward then accumulates into `flat`.
  absl::Status BindGrads(const Tensor& flat) const;
  // The first member whose data is no longer its slice of `flat` (given new
  // memory or moved since BindParams); nullopt when all still are.
  std::optional<int64_t> FirstUnbound(const Tensor& flat) const;

 private:
  DType dtype_ = DType::kF32;
  Device device_ = Device::CPU();
  std::vector<FlatParamMember> members_;
  int64_t numel_ = 0;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_CORE_FLAT_PARAM_H_
