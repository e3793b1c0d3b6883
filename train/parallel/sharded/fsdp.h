// train/parallel/sharded: data parallelism that shards what a replica
// holds: ZeRO-1/2 (zero_optimizer.h: optimizer state, then gradients) and
// FSDP / ZeRO-3 (this header: parameters too), their optimizer state in
// full form for checkpoints (sharded_optimizer_state.h) and gradient
// clipping over shards (grad_clip.h). Built on train/parallel/core's
// flat-parameter groups; docs/sharding.md.
//
// FullyShardedDataParallel (ZeRO stage 3), after PyTorch's FSDP with one
// unit per layer of a Sequential: the model's own layers (the model is an
// nn::Sequential), or, with FsdpOptions::unit_layers, the layers of a
// Sequential inside the model (GPT-2's blocks, "transformer.h": PyTorch's
// transformer_auto_wrap_policy), whose other parameters (GPT's embeddings,
// final LayerNorm and tied head) then form one more unit, the root. Each
// layer that has parameters is a unit:
// a FlatParamGroup (flat_param.h) whose parameters are flattened into one
// buffer of N * s elements (padded, s = ceil(numel / N)), and each rank keeps
// only its shard of s elements
// (the shard: a leaf tensor the optimizer steps) plus a gradient shard of
// the same size. The full parameters exist only around the unit's use:
//
//   forward:  all-gather the unit (prefetching the next unit's all-gather
//             so it overlaps this unit's compute), run it, free it;
//   backward: an identity op on the unit's output runs first: it all-gathers
//             the unit again (prefetching the previous unit) and binds the
//             parameters' gradients to a full-size gradient buffer; when the
//             last of the unit's gradients is accumulated, the unit's
//             parameters are freed and its gradient buffer is reduce-
//             scattered (averaged) into this rank's gradient shard, then
//             freed.
//
// Mixed precision (FsdpOptions::param_dtype, reduce_dtype: PyTorch's
// MixedPrecision(param_dtype, reduce_dtype)): the shards, their gradients
// and the optimizer state stay in the parameters' own dtype (the f32
// masters). Before a unit's all-gather each rank casts its shard to
// param_dtype, so the unit is gathered, held and computed in param_dtype
// (bf16: half the bytes on the wire and in memory); the module's parameters
// take that dtype (Tensor::SetDataWithDtype) and a unit's floating input is
// cast to it (PyTorch casts forward inputs the same way), so the output is
// in param_dtype. The gradients (param_dtype) are cast to reduce_dtype,
// divided by the pre-divide factor, reduce-scattered (sum), divided by the
// post-divide factor (FsdpGradientDivideFactors: PyTorch FSDP's split of the
// 1/N average, which keeps low-precision sums in range), cast to the
// master dtype and accumulated into the gradient shard. Composes with
// amp::Autocast (the parameters are already low precision; f32 ops of the
// policy table still run in f32) and with optim::GradScaler on the shards'
// optimizer; set FoundInfAcrossRanks as its combiner, since each rank sees
// only its gradient shard. f16 has a narrow range: use it with a GradScaler
// (bf16 needs none). Without mixed precision the average is DDP's (below),
// so the weights equal DDP's bit for bit.
//
// The root unit (unit_layers only) is gathered when Forward starts and, as
// PyTorch keeps its root unsharded after forward, stays gathered until its
// last gradient arrives at the end of backward (under NoGradGuard it is
// freed when Forward returns); its pre-backward runs first in backward and
// prefetches the last layer unit. A parameter used by two layers (a tied
// weight) must be outside unit_layers, in the root: it is one tensor of one
// unit, and its gradient, summed over both uses by autograd, is reduced
// once. A tensor listed twice in the model is InvalidArgument.
//
// Memory per rank: the shards (1/N of parameters, gradients and optimizer
// state) plus, transiently, the full parameters and gradients of at most two
// layer units at a time (the one running and the one prefetched or still
// reducing), and the root unit's full parameters (all of forward and
// backward) and gradients (all of backward).
//
//   TANDEM_ASSIGN_OR_RETURN(auto fsdp,
//                           FullyShardedDataParallel::Create(*model, comm));
//   TANDEM_ASSIGN_OR_RETURN(auto adam,
//                           optim::AdamW::Create(fsdp->ShardParameters()));
//   for (...) {  // the same steps on every rank
//     adam.ZeroGrad();                                   // the shards' grads
//     TANDEM_ASSIGN_OR_RETURN(Tensor y, fsdp->Forward(x));
//     ... loss ...
//     TANDEM_RETURN_IF_ERROR(fsdp->Backward(loss));      // grads averaged
//     TANDEM_RETURN_IF_ERROR(adam.Step());               // steps the shards
//   }
//
// Contract:
//   - The layers run through Sequential::SetLayerCall while wrapped: call
//     the wrapper's Forward, never the model's (a layer unit run outside it
//     is FailedPrecondition; the root's parameters hold no memory there).
//   - Collective: Create, Forward, Backward and FullStateDict issue the same
//     collectives on every rank in the same order.
//   - Create broadcasts rank 0's parameters, then makes every parameter of
//     a unit a view of the unit's full buffer (Tensor::SetData) and frees
//     that buffer: between steps the module's parameters hold no memory.
//     Read or write them only through FullStateDict / LoadFullStateDict.
//     Under mixed precision they have param_dtype from Create on.
//     After the wrapper is destroyed the parameters stay freed: save the
//     state first.
//   - Gradients: Backward leaves this rank's averaged gradient in the
//     shards' grad() (accumulated: zero them between steps, as with any
//     optimizer); the module's parameters have no gradient afterwards.
//     Every parameter must receive a gradient in every backward.
//   - Checkpoints: FullStateDict gathers the whole model (names as in
//     Module::NamedParameters, master dtype), so a checkpoint does not depend
//     on the world size; LoadFullStateDict takes each rank's slice of such a
//     state. Saved on N ranks, loaded on M.
//   - Errors: a unit whose parameters have different dtypes or devices
//     (InvalidArgument naming both); a module already wrapped
//     (FailedPrecondition: its parameters are freed); parameters changed
//     after wrapping (Forward fails with FailedPrecondition naming the
//     parameter); Backward without Forward; a failed collective.
//   - Blocking: every wait is bounded by FsdpOptions::timeout.
//   - Ownership and threads: the module and communicator outlive the
//     wrapper, the wrapper outlives the autograd graphs its Forward built;
//     everything belongs to the rank's thread.
#ifndef TANDEM_TRAIN_PARALLEL_SHARDED_FSDP_H_
#define TANDEM_TRAIN_PARALLEL_SHARDED_FSDP_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/dtype.h"
#include "comm/communicator.h"
#include "comm/ordered/ordered_sum.h"
#include "comm/work.h"
#include "tensor/autograd/autograd.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/nn/module.h"
#include "tensor/optim/clip_grad.h"
#include "tensor/tensor.h"
#include "train/parallel/core/canonical_tree.h"
#include "train/parallel/core/flat_param.h"
#include "train/parallel/sharded/sharded_optimizer_state.h"

namespace tandem::train {

struct FsdpOptions {
  // Launch the next unit's all-gather before running the current one (and,
  // in backward, the previous unit's), so communication overlaps compute.
  // False: gather each unit only when it is needed (less memory, no
  // overlap).
  bool prefetch = true;
  // Bound of every wait on a collective. Must be positive.
  absl::Duration timeout = absl::Minutes(30);
  // Mixed precision (see the header comment). The dtype a unit is gathered
  // and computed in; unset: the parameters' own. A floating dtype (bf16,
  // f16, f32, f64); an integer one is InvalidArgument at Create.
  std::optional<DType> param_dtype = std::nullopt;
  // The dtype gradients are reduce-scattered in; unset: param_dtype if set
  // (PyTorch's default), else the parameters' own. Floating, as above.
  std::optional<DType> reduce_dtype = std::nullopt;
  // Which layers are units (see the header comment): empty, every layer of
  // the model, which must be an nn::Sequential; otherwise the dotted name of
  // an nn::Sequential inside the model (as in its NamedParameters(), e.g.
  // "transformer.h"), each of whose layers is a unit, the model's other
  // parameters forming the root unit. A name that is not such a Sequential
  // is InvalidArgument at Create.
  std::string unit_layers = "";
  // The virtual world (docs/virtual_world.md), K > 0 virtual ranks over
  // this world (the caller checked that the world size can play K): a
  // backward then keeps each unit's full gradient, accumulated over the
  // virtual rank's micro-batches (PyTorch's no_sync), instead of
  // reduce-scattering it; FoldVirtualRank folds those, scaled by 1/K in
  // the master dtype, into the unit's canonical tree; FinishVirtualStep
  // sums the ranks' trees with the ordered all-reduce of the whole unit and
  // keeps this rank's shard. Memory: the full gradients of every unit and
  // up to log2(K/W) + 1 partial sums of each, for the step. 0: off.
  int64_t virtual_world = 0;
};

// PyTorch FSDP's split of the gradient average 1/N into a division before
// the reduce-scatter and one after: {pre, post}, pre = f starting at 1 and
// doubled while N % f == 0 and N / f > f; post = N / pre. N = 1: {1, 1};
// 2: {2, 1}; 3: {2, 1.5}; 4: {2, 2}; 8: {4, 2}. Used under mixed precision.
std::pair<double, double> FsdpGradientDivideFactors(int world_size);

// One unit, for introspection, tests and the memory benchmark.
struct FsdpUnitInfo {
  int64_t layer = 0;  // index in the unit Sequential; -1: the root unit
  std::vector<std::string> parameter_names;
  int64_t numel = 0;                  // parameter elements of the unit
  int64_t shard_numel = 0;            // s: elements per rank (padding included)
  DType master_dtype = DType::kF32;   // the shards and their gradients
  DType compute_dtype = DType::kF32;  // gathered, computed (param_dtype)
  DType reduce_dtype = DType::kF32;   // gradients on the wire
};

class FullyShardedDataParallel {
 public:
  static absl::StatusOr<std::unique_ptr<FullyShardedDataParallel>> Create(
      nn::Module& model, comm::Communicator& comm,
      const FsdpOptions& options = {});

  // Waits (bounded) for collectives still in flight and removes the hooks.
  ~FullyShardedDataParallel();
  FullyShardedDataParallel(const FullyShardedDataParallel&) = delete;
  FullyShardedDataParallel& operator=(const FullyShardedDataParallel&) = delete;

  // Runs the model unit by unit (see the header comment). In grad mode it
  // opens a step that Backward must close.
  absl::StatusOr<Tensor> Forward(const Tensor& input);

  // loss.Backward(), then waits for every unit's reduce-scatter.
  absl::Status Backward(const Tensor& loss);

  // This rank's parameter shards, one per unit, in layer order: what the
  // optimizer steps. Their grad() is the gradient shard.
  std::vector<Tensor> ShardParameters() const;

  // The virtual world (FsdpOptions::virtual_world): after each of this
  // rank's virtual ranks' backward(s), FoldVirtualRank (local); after the
  // last, FinishVirtualStep (collective) leaves the step's gradient in the
  // shards' grad() (added, as Backward's are). FailedPrecondition when the
  // mode is off, a unit has no gradient since the last fold, or the folds
  // and the virtual ranks do not match.
  absl::Status FoldVirtualRank();
  absl::Status FinishVirtualStep();

  // FullyShardedDataParallel.clip_grad_norm_: the whole model's gradient
  // norm from every rank's shards (grad_clip.h: one all-reduce of one
  // value), each gradient shard scaled by the same clip coefficient. In the
  // virtual world the norm is optim::ClipGradNorm's over the whole
  // gradients, bit for bit, from the parts FinishVirtualStep kept (no
  // communication; norm_type 2 only, InvalidArgument otherwise).
  // Returns the norm before clipping, the same on every rank. Collective;
  // call it after Backward and before the optimizer's step (under AMP:
  // after GradScaler::Unscale of the shards' optimizer).
  absl::StatusOr<double> ClipGradNorm(
      double max_norm, const optim::ClipGradNormOptions& options = {});

  // The whole model's parameters (gathered; names as NamedParameters) and
  // buffers, as fresh tensors. Collective.
  absl::StatusOr<nn::StateDict> FullStateDict();
  // Takes this rank's slice of every parameter from a full state (from
  // FullStateDict on any number of ranks, or from an unwrapped model's
  // StateDict) and copies the buffers. Local. InvalidArgument for a
  // missing key or a shape or dtype mismatch; nothing changes then.
  absl::Status LoadFullStateDict(const nn::StateDict& state);

  // How ShardParameters() map onto the model's parameters (one entry per
  // unit), for GatherFullOptimizerState / LoadFullOptimizerState
  // (sharded_optimizer_state.h) with the shards' optimizer.
  std::vector<FlatShard> ShardLayout() const;

  const std::vector<FsdpUnitInfo>& units() const { return infos_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

 private:
  struct Unit {
    int64_t layer = 0;  // -1: the root
    // The unit's layout (flat_param.h), in the master dtype: its parameters
    // (names as in the whole model, index = place in its
    // NamedParameters()), their offsets in `full` and `full_grad`, the
    // shard rule. Member k is the parameter whose gradient hook says k.
    FlatParamGroup group;
    int64_t shard = 0;  // group.ShardNumel(N)
    DType master_dtype = DType::kF32;
    DType compute_dtype = DType::kF32;
    DType reduce_dtype = DType::kF32;
    Tensor full;         // N * shard, compute dtype; freed unless gathered
    Tensor full_grad;    // N * shard, compute dtype; freed outside backward
    Tensor shard_param;  // leaf, shard elements, own storage, master dtype
    Tensor shard_grad;   // shard elements, own storage, master dtype
    // The shard cast to the compute dtype while its all-gather is in
    // flight (mixed precision only).
    Tensor gather_send;
    // The gradient being reduce-scattered (reduce dtype): full_grad itself,
    // or its cast; undefined outside a reduction.
    Tensor reduce_buf;
    std::unique_ptr<comm::Work> gather;  // in flight, or null
    std::unique_ptr<comm::Work> reduce;  // in flight, or null
    bool gathered = false;               // full holds the current parameters
    int64_t pending = 0;  // gradients still to come in this backward
    std::vector<HookHandle> hooks;
    // The virtual world: this step's tree over the rank's virtual ranks of
    // the unit's full gradient (padded, master dtype, host).
    std::optional<TreeAccumulator> virtual_sum;
  };

  FullyShardedDataParallel(nn::Module& model, comm::Communicator& comm,
                           const FsdpOptions& options);
  absl::Status Build();
  // Flattens, broadcasts and shards one unit's parameters (`layer` -1: the
  // root) and appends it to units_.
  absl::Status AddUnit(int64_t layer,
                       std::vector<FlatParamGroup::Entry> entries);
  // The Sequential layer call: runs layer i of layers_ as its unit.
  absl::StatusOr<Tensor> RunLayer(int64_t i, nn::Module& layer,
                                  const Tensor& input);
  // The unit whose pre-backward runs after `unit`'s in backward (the
  // reverse of forward: the root first, then the layers from the last),
  // -1 for none: what PreBackward prefetches.
  int64_t BackwardNext(int64_t unit) const;
  // "unit 3" or "the root unit", for messages.
  static std::string UnitName(const Unit& u);
  absl::Status CheckUnchanged() const;
  // A fresh N * shard buffer in the master dtype holding every rank's
  // shard (one all-gather). For FullStateDict.
  absl::StatusOr<Tensor> GatherMaster(Unit& u);
  // Reallocates u's full buffer and launches its all-gather (no-op when
  // gathered or in flight).
  absl::Status LaunchGather(Unit& u);
  absl::Status WaitGather(Unit& u);
  void Release(Unit& u);
  absl::StatusOr<Tensor> AttachPreBackward(const Tensor& y, int64_t unit);
  absl::Status PreBackward(int64_t unit);
  void OnGradAccumulated(int64_t unit, const Tensor& param, int64_t index);
  absl::Status LaunchReduce(Unit& u);
  absl::Status FinishReduce(Unit& u);
  absl::Status FinishBackward();
  // ClipGradNorm in the virtual world (fsdp_virtual_world.cc).
  absl::StatusOr<double> ClipVirtualGradNorm(
      const std::vector<Tensor>& grads, double max_norm,
      const optim::ClipGradNormOptions& options);
  absl::Status Annotate(const absl::Status& status,
                        const std::string& context) const;

  nn::Module* model_;
  nn::Sequential* layers_ = nullptr;  // whose layers are units
  comm::Communicator* comm_;
  FsdpOptions options_;
  int rank_;
  int world_size_;
  int64_t virtual_local_ = 0;  // the virtual world: virtual ranks here
  std::vector<Unit> units_;
  std::vector<FsdpUnitInfo> infos_;
  std::vector<int64_t> unit_of_layer_;  // -1 for layers without parameters
  int64_t root_ = -1;                   // the root's index in units_, or -1
  bool in_forward_ = false;             // inside this wrapper's Forward
  bool mixed_ = false;       // a unit computes or reduces in another dtype
  bool step_open_ = false;   // a grad-mode Forward awaits Backward
  absl::Status hook_error_;  // first error inside backward
  // The virtual world: the virtual ranks this rank plays (0: off), each
  // parameter's part of the gradient's 2-norm (optim::GradNormPart of its
  // whole gradient, by NamedParameters index) after FinishVirtualStep, and
  // the ordered all-reduce's staging.
  std::vector<double> virtual_parts_;
  comm::OrderedSumWorkspace virtual_workspace_;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_SHARDED_FSDP_H_
