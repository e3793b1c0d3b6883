// train/parallel/ddp: data parallelism with a full replica per rank: DDP
// (this header), its step state machine (ddp_step.h), gradient compression
// hooks (comm_hook.h), uneven inputs (join.h, ddp_join.cc) and SyncBatchNorm
// (sync_batch_norm.h). Built on train/parallel/core; docs/ddp.md.
//
// DistributedDataParallel: data-parallel training of one nn::Module replica
// per rank, after torch.nn.parallel.DistributedDataParallel. Each rank runs
// forward and backward on its own shard of the batch; DDP keeps the replicas
// identical by averaging the gradients across ranks (bit for bit PyTorch's
// arithmetic), overlapping that communication with backward. The design —
// buckets, the step's state machine, the average, GPUs, differences from
// PyTorch — is in docs/ddp.md.
//
//   TANDEM_ASSIGN_OR_RETURN(auto ddp,
//                           train::DistributedDataParallel::Create(*model,
//                                                                   comm));
//   for (const Batch& batch : batches) {  // the same steps on every rank
//     TANDEM_ASSIGN_OR_RETURN(Tensor logits, ddp->Forward(batch.features));
//     TANDEM_ASSIGN_OR_RETURN(Tensor loss,
//                             CrossEntropy(logits, batch.labels));
//     sgd.ZeroGrad();                               // in place: keeps views
//     TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));  // grads now averaged
//     TANDEM_RETURN_IF_ERROR(sgd.Step());
//   }
//
// Contract:
//   - Collective: Create, and every synchronised step (Forward in grad mode,
//     Backward / FinishGradientSync) issue collectives, so every rank makes
//     the same calls in the same order. Create checks that the ranks hold
//     the same model, broadcasts rank 0's parameters and buffers, and points
//     each parameter's grad() into a flat gradient bucket.
//   - A step is Forward, then Backward(loss) (= loss.Backward() then
//     FinishGradientSync()). Calls out of that order (Backward or
//     FinishGradientSync without a DDP Forward in grad mode, Forward while a
//     reduction is unfinished) fail with FailedPrecondition naming the call,
//     the step state (ddp_step.h) and what to do. Inside NoSync() backward
//     only accumulates locally.
//   - Ownership: the module and the communicator must outlive the wrapper;
//     the module must not gain or lose parameters, or move to another device,
//     while wrapped. Zero gradients in place (Module::ZeroGrad()) to keep the
//     bucket views. The wrapper owns the buckets; the parameters keep their
//     bucket-view gradients after it is destroyed.
//   - Blocking: Create blocks on its checks and broadcasts; Forward on the
//     buffer broadcast (with DdpOptions::broadcast_buffers and buffers to
//     send) and, inside a Join, on its per-step all-reduce; the gradient hooks
//     only launch and poll collectives; FinishGradientSync waits for every
//     bucket's reduction. Every wait is bounded by DdpOptions::timeout.
//   - Thread-safety: a DistributedDataParallel belongs to its rank's thread,
//     like its module and communicator; the hooks run on that thread inside
//     backward.
//   - Errors are absl::Status values naming the rank; nothing here aborts.
//   - Uneven inputs: DDP is a Joinable (join.h). Inside a train::Join a rank
//     that ran out of batches answers the others' steps (buffer broadcast,
//     zero gradients) and the divisor follows
//     JoinOptions::divide_by_initial_world_size; see docs/ddp.md.
#ifndef TANDEM_TRAIN_PARALLEL_DDP_DDP_H_
#define TANDEM_TRAIN_PARALLEL_DDP_DDP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/dtype.h"
#include "comm/communicator.h"
#include "comm/work.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"
#include "train/parallel/core/flat_buckets.h"
#include "train/parallel/core/flat_param.h"
#include "train/parallel/ddp/comm_hook.h"
#include "train/parallel/ddp/ddp_step.h"
#include "train/parallel/ddp/join.h"

namespace tandem::train {

struct DdpOptions {
  // Bucket caps in bytes (PyTorch: dist._DEFAULT_FIRST_BUCKET_BYTES and
  // bucket_cap_mb = 25). Both must be positive.
  int64_t first_bucket_cap_bytes = int64_t{1} << 20;
  int64_t bucket_cap_bytes = int64_t{25} << 20;
  // Let a synchronised step leave parameters without a gradient: they
  // contribute zeros (or what NoSync steps accumulated) to the average.
  bool find_unused_parameters = false;
  // Broadcast the module's buffers (Module::Buffers(): BatchNorm's running
  // statistics, ...) from rank 0 to every rank before the module runs, in
  // one collective per dtype (the buffers packed into flat buckets), so
  // every rank trains and evaluates with rank 0's. PyTorch's rule for when:
  // at a Forward whose previous DDP Forward (or PrepareForBackward) opened a
  // synchronised step — grad mode on, outside NoSync() — and at the first
  // one. So the first evaluation Forward after training broadcasts, later
  // ones do not; inside NoSync() only the first micro-batch does. Inside a
  // Join the source is the highest rank still training (PyTorch's
  // _find_common_rank), since a finished rank's buffers are stale.
  // False: each rank keeps its own buffers.
  bool broadcast_buffers = true;
  // Launch each bucket's all-reduce from the gradient hooks as soon as the
  // bucket is complete, overlapping communication with the rest of backward
  // (PyTorch's behaviour). False: launch them all in FinishGradientSync,
  // after backward — the same collectives in the same order, for measuring
  // what overlap buys (bench/ddp_benchmark's ddp_nooverlap) or for backends
  // where concurrent communication slows compute down.
  bool overlap = true;
  // Bound of every wait on a collective (Create's checks and broadcasts, the
  // buffer broadcast, FinishGradientSync). Must be positive.
  absl::Duration timeout = absl::Minutes(30);
  // How each bucket travels (train/parallel/ddp/comm_hook.h): the plain
  // all-reduce, or PyTorch's fp16/bf16 compression hooks (half the bytes).
  DdpCommHook comm_hook = DdpCommHook::kAllReduce;
  // A backward under NoSync leaves each gradient where it is instead of
  // moving it into its bucket view (a synchronised backward still moves
  // it). For the virtual world, whose gradients are views of its own
  // summation tree and never reduced by DDP (train/parallel/core/
  // virtual_world.h): without it every backward would copy them back.
  bool no_sync_keeps_gradients = false;
};

// One gradient bucket: a FlatParamGroup (flat_param.h) of parameters and the
// gradient buffer their grad() views. ZeRO shards the same groups.
struct DdpBucket {
  // Members in layout order (reverse registration order): names as in
  // Module::NamedParameters(), index = the place in that list, offsets in
  // `flat`.
  FlatParamGroup group;
  // The flat storage every member's grad() views: group.NewBuffer(1), or
  // group.NewBuffer(world size) after ReduceScatterGradients.
  Tensor flat;
};

class DistributedDataParallel : public Joinable {
 public:
  // Wraps `module` for `comm`'s rank; every rank calls it (collective). Both
  // must outlive the result. Errors: bad options; a module without
  // parameters that require grad; parameters or buffers on different
  // devices; ranks
  // whose parameters differ (every rank fails, naming the rank and the
  // parameter); a failed collective.
  static absl::StatusOr<std::unique_ptr<DistributedDataParallel>> Create(
      nn::Module& module, comm::Communicator& comm,
      const DdpOptions& options = {});

  // Removes the hooks and waits (bounded) for reductions still in flight.
  // The parameters keep their bucket-view gradients.
  ~DistributedDataParallel() override;

  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // Runs the module; in grad mode it opens a step (armed-sync, or
  // armed-local inside NoSync()), and it first broadcasts the module's
  // buffers from rank 0 when DdpOptions::broadcast_buffers. Fails with
  // FailedPrecondition when the previous iteration's backward ran but its
  // reduction was not finished, or when the module was moved to another
  // device after it was wrapped.
  absl::StatusOr<Tensor> Forward(const Tensor& input);
  absl::StatusOr<Tensor> operator()(const Tensor& input) {
    return Forward(input);
  }

  // Opens a step as Forward does (the same checks, buffer broadcast and
  // state change) without running the module: PyTorch's
  // reducer.prepare_for_backward. For callers that run the module's forward
  // themselves and back-propagate several times, wanting only the last
  // backward reduced: a rank pipeline (pipeline.h) runs every micro-batch
  // through module.Forward directly (local accumulation, no step open),
  // calls this right before the last backward, then FinishGradientSync().
  // In NoSync() it opens a local step. Errors as Forward's, and
  // FailedPrecondition with grad mode off.
  absl::Status PrepareForBackward();

  // loss.Backward() then FinishGradientSync(). `loss` must come from this
  // DDP's Forward in grad mode. Inside NoSync() it only accumulates.
  absl::Status Backward(const Tensor& loss);

  // Ends the step after a backward: marks unused parameters ready (with
  // find_unused_parameters, else fails naming them), launches what is left
  // and waits for every bucket's all-reduce. Blocks until
  // every bucket is reduced or `timeout` passes. After it returns, the next
  // iteration may start, whatever the outcome.
  absl::Status FinishGradientSync();

  // While a guard lives, Forward arms no synchronisation: backward only
  // accumulates local gradients. The first synchronised step afterwards
  // reduces everything accumulated. Guards nest; destroy them on this thread
  // in reverse order.
  class [[nodiscard]] NoSyncGuard {
   public:
    ~NoSyncGuard();
    NoSyncGuard(NoSyncGuard&& other) noexcept;
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(NoSyncGuard&&) = delete;

   private:
    friend class DistributedDataParallel;
    explicit NoSyncGuard(DistributedDataParallel* ddp);
    DistributedDataParallel* ddp_;
    bool previous_;
  };
  NoSyncGuard NoSync();
  // False inside NoSync().
  bool require_gradient_sync() const { return require_sync_; }

  // ZeRO stage 2 (zero_optimizer.h; ZeroRedundancyOptimizer::Create calls it
  // for ZeroOptions::reduce_scatter_gradients): from now on reduce-scatter
  // each bucket instead of all-reducing it. Each bucket's buffer is remade
  // padded with zeros to a multiple of the world size (its group's
  // NewBuffer(world size); gradients already there are kept); after
  // FinishGradientSync rank r's shard (its group's Shard(r, world size)) of
  // each bucket holds the averaged gradient, and the rest of the bucket
  // holds partial sums that mean nothing. So only an optimizer that reads
  // its own shard (ZeroRedundancyOptimizer) may step after it. Same averaging
  // arithmetic as the all-reduce, same overlap with backward. That optimizer
  // frees the buckets after taking its shard (Storage::Free, parameters'
  // gradients cleared); Forward reallocates and zeroes freed buckets. Local;
  // call it between steps (FailedPrecondition otherwise). InvalidArgument
  // with a compressing comm_hook. Calling it again changes nothing.
  absl::Status ReduceScatterGradients();
  bool reduce_scatter_gradients() const { return reduce_scatter_; }

  nn::Module& module() const { return *module_; }
  comm::Communicator& comm() const { return *comm_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  const DdpOptions& options() const { return options_; }
  const std::vector<DdpBucket>& buckets() const { return buckets_; }
  // Buckets whose AllReduce was launched in the current iteration (counts
  // at world size 1 too, where launching is a no-op). For tests of overlap.
  int64_t num_buckets_launched() const { return next_launch_; }
  // Where the current step is (see ddp_step.h). For tests and diagnostics.
  DdpStepState step_state() const { return step_; }

  // The gradient all-reduces of the last FinishGradientSync (or Backward),
  // from this rank's Work records: how many, their bytes, the sum of their
  // launch-to-completion times (overlapping backward when overlap is on),
  // and how long FinishGradientSync blocked for them (the communication
  // backward did not hide). Zero before the first step, in NoSync steps and
  // at world size 1. For progress lines, metrics and benchmarks.
  struct SyncStats {
    int64_t all_reduces = 0;
    int64_t bytes = 0;
    double all_reduce_seconds = 0;
    double wait_seconds = 0;
  };
  const SyncStats& last_sync_stats() const { return last_sync_; }

  // Joinable (join.h). The hook shadows a step of the ranks still training
  // (the buffer broadcast, then every bucket's reduction with zeros) and,
  // once all have finished, broadcasts the model (parameters, then buffers)
  // from the highest of the last ranks to finish, whose optimizer stepped
  // through every step. Errors: JoinOptions that DDP cannot honour
  // (divide_by_initial_world_size = false with a compressing comm_hook,
  // which divides by the world size as PyTorch's hooks do), or
  // ReduceScatterGradients (ZeRO-2: the sharded optimizer's own
  // collectives have no shadow).
  absl::StatusOr<std::unique_ptr<JoinHook>> MakeJoinHook(
      const JoinOptions& options) override;
  comm::Communicator& join_comm() const override { return *comm_; }
  Device join_device() const override;

 private:
  friend class DdpJoinHook;

  struct ParamState {
    std::string name;
    int64_t index = 0;  // in the module's NamedParameters()
    Tensor param;
    int64_t bucket = 0;
    int64_t member = 0;  // in the bucket's group
    Tensor view;         // the grad view into the bucket
    HookHandle hook = 0;
    bool hooked = false;          // `hook` is registered
    bool ready = false;           // marked ready in this synchronised step
    bool has_local_grad = false;  // a backward reached it since the last sync
  };
  struct BucketState {
    int64_t pending = 0;           // members not yet ready in this step
    std::vector<int64_t> members;  // indices into params_
    std::unique_ptr<comm::Work> work;
    Tensor wire;  // the compressed bucket in flight (compressing hooks)
  };

  DistributedDataParallel(nn::Module& module, comm::Communicator& comm,
                          const DdpOptions& options);

  // One Broadcast per tensor from `root`, all waited for.
  absl::Status BroadcastFrom(const std::vector<nn::NamedTensor>& tensors,
                             int root, const char* what);
  // The module's buffers from `root`, packed into buffer_buckets_ (one
  // Broadcast per bucket).
  absl::Status BroadcastBuffers(int root);
  // All-reduce (max) of `rank_` where `candidate`, else -1: the highest
  // candidate rank. Collective.
  absl::StatusOr<int> HighestRankWhere(bool candidate);
  // Join's shadow of one step on a finished rank, and the final model sync.
  absl::Status ShadowStep(const JoinStep& step);
  absl::Status SyncFinalModel(bool is_last_joiner);
  // The per-step all-reduce's sums must say that every active rank makes
  // the same kind of step; FailedPrecondition naming the difference.
  static absl::Status CheckJoinStep(const JoinStep& step, int rank);
  absl::Status BuildBuckets();
  void OnGradReady(int64_t index);
  // Forward's part before the module runs: the step-state change and its
  // checks, the buffer broadcast, bucket reallocation.
  absl::Status OpenStep();
  absl::Status EnsureGradIsView(ParamState& p);
  absl::Status MarkReady(int64_t index);
  void LaunchCompleteBuckets();
  // Average with ReduceOp::kAvg instead of scaling every gradient first:
  // bit-identical to PyTorch's arithmetic at power-of-two world sizes, and
  // it saves a pass over the gradients (see ddp.cc).
  // (Only when this step's divisor is the world size: see divisor_.)
  bool AverageInReduction() const;
  void PollInFlight();
  // Waits for every launched bucket before `deadline`; the first error.
  absl::Status WaitLaunched(absl::Time deadline);
  void ResetIteration();
  std::string BucketDescription(int64_t b) const;

  nn::Module* module_;
  comm::Communicator* comm_;
  DdpOptions options_;
  bool reduce_scatter_ = false;  // ZeRO-2: ReduceScatterGradients was called
  int rank_;
  int world_size_;

  std::vector<ParamState> params_;  // managed parameters, registration order
  std::vector<DdpBucket> buckets_;
  std::vector<BucketState> bucket_states_;

  bool require_sync_ = true;  // false inside NoSync()
  // Where the current step is (ddp_step.h); moved only by NextDdpStepState.
  DdpStepState step_ = DdpStepState::kIdle;
  int64_t next_launch_ = 0;
  int64_t first_unfinished_ = 0;  // buckets before it have completed
  absl::Status hook_error_;       // first error found inside a hook
  SyncStats last_sync_;

  // The buffers packed for their broadcast; remade when they change.
  FlatBucketSet buffer_buckets_;
  // PyTorch's require_forward_param_sync: the last DDP Forward opened a
  // synchronised step (true before the first), so this one broadcasts.
  bool require_forward_param_sync_ = true;
  // What this step's summed gradients are divided by: the world size, or
  // inside a Join with divide_by_initial_world_size = false the number of
  // ranks still training.
  int64_t divisor_ = 1;
  bool divide_by_initial_world_size_ = true;  // set by MakeJoinHook
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_DDP_DDP_H_
