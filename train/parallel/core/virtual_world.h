// The virtual world on one rank: which virtual ranks it plays, and the two
// sums every step takes over them in the fixed order (the gradients, and
// small per-virtual-rank values such as losses and counts).
//
// Contract (docs/virtual_world.md): a run at W real ranks computes exactly
// what data-parallel training at K virtual ranks computes, for every allowed
// W (AllowedWorldSizes(K)). Real rank r plays the virtual ranks
// [r K/W, (r+1) K/W), one after the other; every sum over virtual ranks is
// the canonical tree over the K leaves in virtual-rank order
// (canonical_tree.h), whatever W.
//
//   TANDEM_ASSIGN_OR_RETURN(VirtualWorld vw,
//       PlaceVirtualWorld(/*virtual_world=*/8, comm.size(), comm.rank()));
//   TANDEM_ASSIGN_OR_RETURN(auto grads,
//       VirtualGradSum::Create(comm, vw, model.Parameters()));
//   for (int64_t v = 0; v < vw.local; ++v) {
//     ... ZeroGrad, forward and backward of virtual rank vw.first + v ...
//     TANDEM_RETURN_IF_ERROR(grads->Fold());
//   }
//   TANDEM_RETURN_IF_ERROR(grads->Reduce());  // grad() = DDP's at K
#ifndef TANDEM_TRAIN_PARALLEL_CORE_VIRTUAL_WORLD_H_
#define TANDEM_TRAIN_PARALLEL_CORE_VIRTUAL_WORLD_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/dtype.h"
#include "comm/communicator.h"
#include "comm/ordered/ordered_sum.h"
#include "tensor/device.h"
#include "tensor/tensor.h"
#include "train/parallel/core/canonical_tree.h"

namespace tandem::train {

// Where one real rank stands in the virtual world.
struct VirtualWorld {
  int64_t size = 0;   // K, the virtual world size; 0: the mode is off
  int64_t first = 0;  // the first virtual rank this rank plays
  int64_t local = 1;  // how many it plays (K / W); 1 when off
  bool on() const { return size > 0; }
  // The virtual rank of this rank's v-th (0 <= v < local); when off, the
  // real rank (first).
  int64_t rank_of(int64_t v) const { return first + v; }
};

// virtual_world = 0: off ({0, rank, 1}). Otherwise CheckVirtualWorld's
// refusal for a W that cannot play K, and rank's place: first = rank K/W,
// local = K/W. InvalidArgument for a negative K.
absl::StatusOr<VirtualWorld> PlaceVirtualWorld(int64_t virtual_world,
                                               int world_size, int rank);

// Collective: every rank passes the values of the virtual ranks it plays
// (vw.local, in order); every rank gets all vw.size of them in virtual-rank
// order, bit for bit (gathered as their bits, staged on the host through
// `device`). InvalidArgument when `local` has the wrong length.
absl::StatusOr<std::vector<double>> GatherVirtualRankValues(
    comm::Communicator& comm, Device device, const VirtualWorld& vw,
    absl::Span<const double> local);

// The canonical tree sum of `values` (at least one), in f64.
double CanonicalTreeSumF64(absl::Span<const double> values);

// Whether the 1/K of the gradients' average is applied once to the sum
// (K a power of two: multiplying by 2^-k is exact, so the bits are those of
// summing the scaled gradients, short of subnormals, as DDP's kAvg) rather
// than to each virtual rank's gradient before it is folded (any other K,
// DDP's ScaleInPlace by 1/K). fsdp's virtual world follows the same rule.
bool VirtualScaleAfterSum(int64_t virtual_world);

// Folds the gradients of the virtual ranks this rank plays into their
// subtree, then completes the sum across ranks with the ordered all-reduce:
// after Reduce every parameter's grad() holds
//   tree over k of (g_k * (1 / K))
// where g_k is virtual rank k's gradient, scaled as DDP scales a rank's
// gradient before its all-reduce (ScaleInPlace by 1 / world size; for a
// power-of-two K the sum is scaled instead, the same bits:
// VirtualScaleAfterSum). The bits are the same at every allowed W.
//
// Where the gradients live (CPU, `grads_in_place`): the parameters' grads
// are made views of the tree's own buffers (TreeAccumulator::NextLeafBuffer),
// marked zero, so each virtual rank's backward writes its leaf where the
// tree keeps it: no leaf is copied, only the tree's additions touch memory,
// and after Reduce the grads view the sum itself (no copy back). A gradient
// found elsewhere at Fold (replaced by someone, or the first step, before
// Fold bound them) is read where it is, as without the option. Without the
// option (ZeRO reads its gradients from DDP's flat buckets) or on a device,
// the leaves are read where they are and the sum is copied back into each
// parameter's own grad. Gradients on a device travel through a host buffer
// (the ordered collective runs on host memory), so any device works. One
// per rank; its thread only; collective in Reduce.
class VirtualGradSum {
 public:
  // `params`: the tensors whose gradients are summed (the model's
  // parameters that require grad, in one fixed order, the same on every
  // rank), all f32 or all f64. InvalidArgument otherwise, or when `vw` is
  // off.
  static absl::StatusOr<std::unique_ptr<VirtualGradSum>> Create(
      comm::Communicator& comm, const VirtualWorld& vw,
      std::vector<Tensor> params, bool grads_in_place = true);

  // After one virtual rank's backward (its micro-batches all accumulated):
  // scales every gradient by 1 / K in place (any other K than a power of
  // two) and folds it in as the next leaf (a parameter without a gradient:
  // zeros); then, in place, binds the grads to the next leaf's buffer,
  // marked zero. The caller zeroes the gradients before the next virtual
  // rank's backward (marking them zero suffices). FailedPrecondition when
  // every local virtual rank was folded already.
  absl::Status Fold();

  // After the last local virtual rank: the ordered all-reduce of this
  // rank's subtree; every parameter's grad() is set to its part of the sum
  // (created where it had none). Collective. FailedPrecondition, naming
  // how many are missing, before every local virtual rank was folded.
  // Ready for the next step afterwards.
  absl::Status Reduce();

  int64_t numel() const { return numel_; }
  // Whether the grads are views of the tree's buffer for the next leaf
  // (or, after Reduce, of the sum), for tests.
  bool grads_bound() const;

 private:
  VirtualGradSum(comm::Communicator& comm, const VirtualWorld& vw,
                 std::vector<Tensor> params, DType dtype, int64_t numel,
                 bool grads_in_place);
  // A flat CPU buffer for the tree, and every parameter's view of it.
  absl::StatusOr<void*> NewBuffer(int64_t bytes);
  // Makes the grads views of the buffer at `data` (one of the tree's);
  // marks them zero when `mark_zero`.
  absl::Status BindGrads(const void* data, bool mark_zero);
  // The folded leaf, read where the grads are (the copying path).
  absl::Status FoldCopying(double scale);

  comm::Communicator& comm_;
  VirtualWorld vw_;
  std::vector<Tensor> params_;
  DType dtype_;
  int64_t numel_;
  bool in_place_;  // grads_in_place and every parameter on the CPU
  std::optional<TreeAccumulator> sum_;
  bool scale_after_;                        // VirtualScaleAfterSum(K)
  std::vector<Tensor> flats_;               // the tree's buffers (in place)
  std::vector<std::vector<Tensor>> views_;  // views_[b][i]: param i in b
  int bound_ = -1;                          // the flats_ the grads view, or -1
  std::vector<char> zeros_;                 // a missing gradient's leaf
  std::vector<char> host_;  // a device's gradients, copied to the host
  comm::OrderedSumWorkspace workspace_;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_CORE_VIRTUAL_WORLD_H_
