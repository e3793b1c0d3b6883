// DistributedDataParallel: data-parallel training of one nn::Module replica
// per rank, after torch.nn.parallel.DistributedDataParallel.
//
// Each rank builds the same model, wraps it, and runs forward and backward on
// its own shard of the batch; DDP keeps the replicas identical by averaging
// the gradients across ranks, overlapping that communication with backward:
//
//   absl::Status Train(comm::Communicator& comm) {   // runs on every rank
//     tandem::Generator gen(123);
//     TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> model,
//     Build(gen)); TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
//                             optim::Sgd::Create(model->Parameters(),
//                             /*lr=*/0.5));
//     TANDEM_ASSIGN_OR_RETURN(auto ddp,
//                             train::DistributedDataParallel::Create(*model,
//                             comm));
//     for (const Batch& batch : ...) {
//       TANDEM_ASSIGN_OR_RETURN(Tensor logits, ddp->Forward(batch.features));
//       TANDEM_ASSIGN_OR_RETURN(Tensor loss, CrossEntropy(logits,
//       batch.labels)); sgd.ZeroGrad();                               // in
//       place: keeps the bucket views
//       TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));  // grads now averaged
//       TANDEM_RETURN_IF_ERROR(sgd.Step());
//     }
//     return absl::OkStatus();
//   }
//
// What Create() does (collectives, in this order, on every rank):
//   1. Checks that every rank holds the same parameters and buffers: the same
//      count, shapes and dtypes, in the same order (two AllGathers of a
//      description). A difference fails every rank with a message naming the
//      first rank and parameter that differ from rank 0.
//   2. Broadcasts every parameter, then every buffer, from rank 0.
//   3. Assigns the parameters that require grad to buckets, in REVERSE
//      registration order (the order backward produces their gradients):
//      a bucket holds parameters of one dtype up to `first_bucket_cap_bytes`
//      (the first bucket of each dtype) or `bucket_cap_bytes` (the others); a
//      parameter larger than the cap gets a bucket of its own. Each bucket
//      owns one flat tensor, and each parameter's grad() is set to a view into
//      it, so backward accumulates straight into the bucket: no copies.
//   4. Hangs a post-accumulate-grad hook on each of those parameters.
//
// One training step:
//   * Forward(x) runs the module. With grad mode on it arms this iteration's
//     synchronisation (unless inside NoSync()); it also broadcasts the
//     module's buffers from rank 0 first when there are any (PyTorch's
//     broadcast_buffers=True).
//   * During loss.Backward(), as each parameter's gradient becomes final its
//     hook marks it ready and, when that completes a bucket and every earlier
//     bucket has been launched, launches the bucket's in-place all-reduce —
//     in bucket order, the same order on every rank, while backward
//     continues (DdpOptions::overlap = false defers the launches to
//     FinishGradientSync). The average is PyTorch's arithmetic, bit for bit:
//     PyTorch multiplies each gradient by 1/world_size and sums. When the
//     world size is a power of two that equals summing and then dividing
//     (scaling by 2^-k is exact), so the bucket is all-reduced with
//     ReduceOp::kAvg and no scaling pass runs; otherwise the hook scales the
//     gradient in its bucket view and the bucket is all-reduced with Sum.
//   * FinishGradientSync() marks unused parameters ready (with
//     find_unused_parameters), waits for every bucket's AllReduce (bounded by
//     `timeout`) and leaves the averaged gradients in the parameters' grad().
//   Backward(loss) is loss.Backward() followed by FinishGradientSync(): the
//   explicit end of the step, which PyTorch performs implicitly at the end of
//   backward. Use it; call the two halves yourself only when something else
//   (e.g. a custom backward) drives autograd.
//
// The module can still be called directly (module.Forward): its gradients
// then stay local, like calling the inner module of a PyTorch DDP. Zero the
// gradients IN PLACE (Module::ZeroGrad(), the default, or an optimizer's
// zero_grad): ClearGrad() drops the bucket views, which DDP then re-installs
// with one copy at the next backward.
//
// Gradient accumulation:
//
//   {
//     auto no_sync = ddp->NoSync();
//     for (each micro-batch but the last) {
//       ... loss = f(ddp->Forward(x)) ...; ddp->Backward(loss);   // local only
//     }
//   }
//   ... loss = f(ddp->Forward(last)) ...; ddp->Backward(loss);  // reduces the
//   sum
//
// Misuse is reported, never silently wrong:
//   * a parameter that got no gradient in a synchronised step, without
//     find_unused_parameters: FinishGradientSync fails, naming the parameters
//     and telling you to pass find_unused_parameters = true (the other ranks
//     then fail too: the collective order is broken);
//   * a Forward after a backward whose reduction was not finished:
//     FailedPrecondition telling you to call FinishGradientSync (or use
//     Backward(loss));
//   * a second backward before the first one's reduction finished (a
//     parameter made ready twice): FinishGradientSync fails and says to use
//     NoSync() for accumulation. The gradients of that iteration are
//     unspecified (the second backward wrote into buckets being reduced).
//   * Backward(loss) / FinishGradientSync() without a DDP Forward in grad
//     mode: FailedPrecondition.
//
// With world size 1 DDP does no communication at all (no collectives, no
// Works): it keeps the bookkeeping, so misuse errors are the same as on N
// ranks, and skips the scaling by 1/1.
//
// Differences from PyTorch: a parameter unused on EVERY rank (with
// find_unused_parameters) ends with a zero gradient where PyTorch leaves its
// .grad untouched; buckets are closed before they would exceed their cap
// (PyTorch closes them just after); a missing gradient is reported by
// FinishGradientSync rather than at the next forward. At world sizes that
// are not a power of two gradients are scaled in place with ScaleInPlace,
// so parameters must then be f32 or f64.
//
// On GPUs (the nccl backend), as in PyTorch: move the model to the rank's
// device first, then wrap it:
//
//   TANDEM_RETURN_IF_ERROR(model->To(Device::CUDA(local_rank)));
//   TANDEM_ASSIGN_OR_RETURN(auto ddp,
//                           train::DistributedDataParallel::Create(*model,
//                           comm));
//
//   * Every parameter and buffer must be on one device (InvalidArgument
//     otherwise); moving the module after wrapping it is reported by the
//     next Forward (FailedPrecondition), since the buckets would stay behind.
//   * Memory follows the parameters: the buckets are made on their device,
//     the broadcasts and bucket all-reduces move the device tensors directly,
//     and the small int64 model descriptions that Create() exchanges are
//     staged through device tensors when the parameters are not on the CPU
//     (NCCL moves device memory only). So the communicator must accept the
//     parameters' memory.
//   * The 1/world_size scaling (kAvg's division, or ScaleInPlace on the
//     bucket views) is a kernel queued on a stream; nothing in the grad hooks
//     blocks the host: launching a bucket enqueues the collective, polling it
//     is an event query (NCCL). FinishGradientSync waits on the host for each
//     bucket's Work (the end of the step: the optimizer reads the gradients
//     next, on the compute stream, after the reductions completed).
//   * Ordering: a communicator with its own stream must order each
//     collective after the stream that computed the gradients. DDP does not
//     know streams; whoever creates the communicator sets it up. For NCCL
//     that is comm.set_compute_stream(cuda::CurrentStream(device)) on the
//     rank's thread before Create (train::RunOnBackend does it for the
//     examples); every collective then waits, on the GPU, for the kernels
//     the rank queued before it (an event, not a host synchronisation).
//
// Thread-safety: a DistributedDataParallel belongs to its rank's thread, like
// its module and communicator; the hooks run on that thread inside Backward.
// The module and the communicator must outlive it, and the module must not
// gain or lose parameters while wrapped.
#ifndef TANDEM_TRAIN_PARALLEL_DDP_H_
#define TANDEM_TRAIN_PARALLEL_DDP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/work.h"
#include "tensor/dtype.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"
#include "train/parallel/ddp_step.h"

namespace tandem::train {

struct DdpOptions {
  // Bucket caps in bytes (PyTorch: dist._DEFAULT_FIRST_BUCKET_BYTES and
  // bucket_cap_mb = 25). Both must be positive.
  int64_t first_bucket_cap_bytes = int64_t{1} << 20;
  int64_t bucket_cap_bytes = int64_t{25} << 20;
  // Let a synchronised step leave parameters without a gradient: they
  // contribute zeros (or what NoSync steps accumulated) to the average.
  bool find_unused_parameters = false;
  // Broadcast the module's buffers from rank 0 at every Forward.
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
};

// One gradient bucket, for introspection and tests.
struct DdpBucket {
  DType dtype = DType::kF32;
  // The flat storage every member's grad() views.
  Tensor flat;
  // Members in layout order (reverse registration order): names as in
  // Module::NamedParameters(), and each one's element offset in `flat`.
  std::vector<std::string> parameter_names;
  std::vector<int64_t> offsets;
};

class DistributedDataParallel {
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
  ~DistributedDataParallel();

  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // Runs the module (see the header comment for what it arms). Fails with
  // FailedPrecondition when the previous iteration's backward ran but its
  // reduction was not finished, or when the module was moved to another
  // device after it was wrapped.
  absl::StatusOr<Tensor> Forward(const Tensor& input);
  absl::StatusOr<Tensor> operator()(const Tensor& input) {
    return Forward(input);
  }

  // loss.Backward() then FinishGradientSync(). `loss` must come from this
  // DDP's Forward in grad mode. Inside NoSync() it only accumulates.
  absl::Status Backward(const Tensor& loss);

  // Ends the step after a backward: see the header comment. Blocks until
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

  nn::Module& module() const { return *module_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  const DdpOptions& options() const { return options_; }
  const std::vector<DdpBucket>& buckets() const { return buckets_; }
  // Buckets whose AllReduce was launched in the current iteration (counts
  // at world size 1 too, where launching is a no-op). For tests of overlap.
  int64_t num_buckets_launched() const { return next_launch_; }
  // Where the current step is (see ddp_step.h). For tests and diagnostics.
  DdpStepState step_state() const { return step_; }

 private:
  struct ParamState {
    std::string name;
    Tensor param;
    int64_t bucket = 0;
    int64_t offset = 0;  // in the bucket's flat tensor, elements
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
  };

  DistributedDataParallel(nn::Module& module, comm::Communicator& comm,
                          const DdpOptions& options);

  absl::Status VerifyAcrossRanks();
  absl::Status BroadcastFromRank0(const std::vector<nn::NamedTensor>& tensors,
                                  const char* what);
  absl::Status BuildBuckets();
  void OnGradReady(int64_t index);
  absl::Status EnsureGradIsView(ParamState& p);
  absl::Status MarkReady(int64_t index);
  void LaunchCompleteBuckets();
  // Average with ReduceOp::kAvg instead of scaling every gradient first:
  // bit-identical to PyTorch's arithmetic at power-of-two world sizes, and
  // it saves a pass over the gradients (see ddp.cc).
  bool AverageInReduction() const;
  void PollInFlight();
  // Waits for every launched bucket before `deadline`; the first error.
  absl::Status WaitLaunched(absl::Time deadline);
  void ResetIteration();
  std::string BucketDescription(int64_t b) const;

  nn::Module* module_;
  comm::Communicator* comm_;
  DdpOptions options_;
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
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_DDP_H_
