#include "train/parallel/ddp/ddp.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "base/trace/trace.h"
#include "comm/types.h"
#include "tensor/autograd/autograd.h"
#include "tensor/device.h"
#include "tensor/ops.h"
#include "train/parallel/core/flat_buckets.h"
#include "train/parallel/core/model_agreement.h"
#include "train/parallel/core/staged_all_gather.h"
#include "train/parallel/core/tensor_comm.h"
#include "train/parallel/ddp/ddp_step.h"
#include "train/parallel/ddp/join.h"

namespace tandem::train {
namespace {

// `status` with "rank r: <context>: " in front of its message, same code.
absl::Status Annotate(const absl::Status& status, int rank,
                      const std::string& context) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("DistributedDataParallel on rank ", rank,
                                   ": ", context, ": ", status.message()));
}

absl::Duration Remaining(absl::Time deadline) {
  return std::max(deadline - absl::Now(), absl::ZeroDuration());
}

}  // namespace

// ---- Construction.

DistributedDataParallel::DistributedDataParallel(nn::Module& module,
                                                 comm::Communicator& comm,
                                                 const DdpOptions& options)
    : module_(&module),
      comm_(&comm),
      options_(options),
      rank_(comm.rank()),
      world_size_(comm.size()),
      divisor_(comm.size()) {}

absl::StatusOr<std::unique_ptr<DistributedDataParallel>>
DistributedDataParallel::Create(nn::Module& module, comm::Communicator& comm,
                                const DdpOptions& options) {
  if (options.first_bucket_cap_bytes <= 0 || options.bucket_cap_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedDataParallel: bucket caps must be positive; got "
        "first_bucket_cap_bytes = ",
        options.first_bucket_cap_bytes,
        " and bucket_cap_bytes = ", options.bucket_cap_bytes));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("DistributedDataParallel: timeout must be positive; got ",
                     absl::FormatDuration(options.timeout)));
  }
  if (comm.size() < 1 || comm.rank() < 0 || comm.rank() >= comm.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedDataParallel: the communicator reports rank ", comm.rank(),
        " of world size ", comm.size(), "; expected 0 <= rank < size"));
  }
  auto ddp = std::unique_ptr<DistributedDataParallel>(
      new DistributedDataParallel(module, comm, options));

  const std::vector<nn::NamedTensor> params = module.NamedParameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const nn::NamedTensor& p = params[i];
    if (p.tensor.device() != params.front().tensor.device()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DistributedDataParallel on rank ", ddp->rank_, ": parameter \"",
          p.name, "\" is on ", p.tensor.device().ToString(), " but \"",
          params.front().name, "\" is on ",
          params.front().tensor.device().ToString(),
          "; move the whole module to one device before wrapping it"));
    }
    if (p.tensor.requires_grad()) {
      ParamState state;
      state.name = p.name;
      state.index = static_cast<int64_t>(i);
      state.param = p.tensor;
      ddp->params_.push_back(std::move(state));
    }
  }
  for (const nn::NamedTensor& b : module.NamedBuffers()) {
    if (!params.empty() &&
        b.tensor.device() != params.front().tensor.device()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DistributedDataParallel on rank ", ddp->rank_, ": buffer \"", b.name,
          "\" is on ", b.tensor.device().ToString(), " but parameter \"",
          params.front().name, "\" is on ",
          params.front().tensor.device().ToString(),
          "; move the whole module to one device (Module::To) before "
          "wrapping it"));
    }
  }
  if (ddp->params_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("DistributedDataParallel on rank ", ddp->rank_,
                     ": the module (", std::string(module.type_name()),
                     ") has no parameter that requires a gradient, so "
                     "there is nothing to synchronise; train it without DDP"));
  }

  if (ddp->world_size_ > 1) {
    TANDEM_RETURN_IF_ERROR(
        CheckSameModelOnEveryRank(module, comm, params.front().tensor.device(),
                                  "DistributedDataParallel", options.timeout));
    TANDEM_RETURN_IF_ERROR(ddp->BroadcastFrom(params, 0, "parameter"));
    TANDEM_RETURN_IF_ERROR(
        ddp->BroadcastFrom(module.NamedBuffers(), 0, "buffer"));
  }
  TANDEM_RETURN_IF_ERROR(ddp->BuildBuckets());
  return ddp;
}

absl::Status DistributedDataParallel::BroadcastFrom(
    const std::vector<nn::NamedTensor>& tensors, int root, const char* what) {
  const absl::Time deadline = absl::Now() + options_.timeout;
  std::vector<std::unique_ptr<comm::Work>> works;
  works.reserve(tensors.size());
  for (const nn::NamedTensor& t : tensors) {
    TANDEM_ASSIGN_OR_RETURN(comm::BufferView view, ToBufferView(t.tensor));
    works.push_back(comm_->Broadcast(view, root));
  }
  // Wait for all of them even after an error: the buffers must not be in
  // use when we return.
  absl::Status first;
  for (size_t i = 0; i < works.size(); ++i) {
    absl::Status s = works[i]->Wait(Remaining(deadline));
    if (first.ok() && !s.ok()) {
      first = Annotate(s, rank_,
                       absl::StrCat("broadcasting ", what, " \"",
                                    tensors[i].name, "\" from rank ", root));
    }
  }
  return first;
}

absl::Status DistributedDataParallel::BroadcastBuffers(int root) {
  const std::vector<Tensor> buffers = module_->Buffers();
  if (!FitsFlatBuckets(buffers, buffer_buckets_)) {
    // First use, or a buffer was replaced. PyTorch's broadcast_bucket_size
    // (250 MiB) caps each bucket.
    TANDEM_ASSIGN_OR_RETURN(
        buffer_buckets_,
        MakeFlatBuckets(buffers, {.first_bucket_cap_bytes = int64_t{250} << 20,
                                  .bucket_cap_bytes = int64_t{250} << 20}));
  }
  if (rank_ == root) {
    TANDEM_RETURN_IF_ERROR(PackIntoFlatBuckets(buffers, buffer_buckets_));
  }
  // One Broadcast per bucket (per dtype, short of 250 MiB).
  std::vector<nn::NamedTensor> flats;
  for (const FlatBucket& bucket : buffer_buckets_.buckets) {
    flats.push_back({absl::StrCat("bucket ", flats.size(), " (",
                                  DTypeName(bucket.group.dtype()), ", ",
                                  bucket.members.size(), " buffers)"),
                     bucket.flat});
  }
  TANDEM_RETURN_IF_ERROR(BroadcastFrom(flats, root, "the module's buffers in"));
  if (rank_ == root) return absl::OkStatus();
  return UnpackFromFlatBuckets(buffer_buckets_, buffers);
}

absl::Status DistributedDataParallel::BuildBuckets() {
  std::vector<FlatParamGroup::Entry> entries;
  std::vector<Tensor> params;
  entries.reserve(params_.size());
  params.reserve(params_.size());
  for (const ParamState& p : params_) {
    entries.push_back({p.name, p.index, p.param});
    params.push_back(p.param);
  }
  TANDEM_ASSIGN_OR_RETURN(
      FlatBucketSet set,
      MakeFlatBuckets(
          entries, {.first_bucket_cap_bytes = options_.first_bucket_cap_bytes,
                    .bucket_cap_bytes = options_.bucket_cap_bytes}));
  TANDEM_RETURN_IF_ERROR(BindGradsToBuckets(params, set));
  for (FlatBucket& flat : set.buckets) {
    BucketState state;
    state.pending = static_cast<int64_t>(flat.members.size());
    state.members = flat.members;
    bucket_states_.push_back(std::move(state));
    buckets_.push_back({std::move(flat.group), flat.flat});
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i].bucket = set.slots[i].bucket;
    params_[i].member = set.slots[i].member;
    params_[i].view = set.slots[i].view;
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t index = static_cast<int64_t>(i);
    TANDEM_ASSIGN_OR_RETURN(
        params_[i].hook, params_[i].param.AddPostAccumulateGradHook(
                             [this, index](Tensor&) { OnGradReady(index); }));
    params_[i].hooked = true;
  }
  return absl::OkStatus();
}

absl::Status DistributedDataParallel::ReduceScatterGradients() {
  if (WireDType(options_.comm_hook).has_value()) {
    // The compression hooks all-reduce a narrowed copy of the whole bucket;
    // a reduce-scattered bucket would need its own compressed shard path.
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedDataParallel on rank ", rank_,
        ": reduce_scatter_gradients (ZeRO-2) does not combine with a "
        "compressing comm_hook (fp16/bf16); use DdpCommHook::kAllReduce "
        "with it"));
  }
  if (step_ != DdpStepState::kIdle) {
    return absl::FailedPreconditionError(absl::StrCat(
        "DistributedDataParallel on rank ", rank_,
        ": ReduceScatterGradients during a step (state ",
        DdpStepStateName(step_),
        "); switch to reduce-scatter (create the ZeroRedundancyOptimizer) "
        "between steps"));
  }
  if (reduce_scatter_) return absl::OkStatus();
  for (DdpBucket& bucket : buckets_) {
    // Padded to a multiple of the world size, so the reduce-scatter splits
    // it into equal shards; the gradients move over.
    TANDEM_ASSIGN_OR_RETURN(Tensor flat, bucket.group.NewBuffer(world_size_));
    TANDEM_RETURN_IF_ERROR(bucket.group.BindGrads(flat));
    bucket.flat = std::move(flat);
  }
  for (ParamState& p : params_) {
    TANDEM_ASSIGN_OR_RETURN(p.view, buckets_[p.bucket].group.View(
                                        buckets_[p.bucket].flat, p.member));
  }
  reduce_scatter_ = true;
  return absl::OkStatus();
}

DistributedDataParallel::~DistributedDataParallel() {
  for (ParamState& p : params_) {
    if (p.hooked) p.param.RemovePostAccumulateGradHook(p.hook);
  }
  WaitLaunched(absl::Now() + options_.timeout).IgnoreError();
}

// ---- The step.

absl::StatusOr<Tensor> DistributedDataParallel::Forward(const Tensor& input) {
  TANDEM_RETURN_IF_ERROR(OpenStep());
  trace::Scope event("forward", "ddp");
  return module_->Forward(input);
}

absl::Status DistributedDataParallel::PrepareForBackward() {
  if (!IsGradEnabled()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "DistributedDataParallel on rank ", rank_,
        ": PrepareForBackward with grad mode off; call it in grad mode, "
        "right before the backward whose gradients should be reduced"));
  }
  return OpenStep();
}

absl::Status DistributedDataParallel::OpenStep() {
  const DdpStepCall call = !IsGradEnabled() ? DdpStepCall::kForwardNoGrad
                           : require_sync_  ? DdpStepCall::kForwardSync
                                            : DdpStepCall::kForwardLocal;
  const absl::StatusOr<DdpStepState> next = NextDdpStepState(step_, call);
  if (!next.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "DistributedDataParallel on rank ", rank_,
        ": Forward called before the previous iteration's gradient reduction "
        "finished (",
        next_launch_, " of ", buckets_.size(),
        " buckets launched, none waited for). After loss.Backward() call "
        "ddp.FinishGradientSync(), or use ddp.Backward(loss), which does "
        "both; to accumulate gradients over several backward passes without "
        "reducing, run them inside ddp.NoSync() (",
        next.status().message(), ")"));
  }
  const Device device = params_.front().param.device();
  if (device != buckets_.front().flat.device()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "DistributedDataParallel on rank ", rank_,
        ": the module's "
        "parameters are on ",
        device.ToString(), " but its gradient buckets were made on ",
        buckets_.front().flat.device().ToString(),
        ": the module was moved (Module::To) after it was wrapped. Move it "
        "first, then create the DistributedDataParallel"));
  }
  const bool syncs = call == DdpStepCall::kForwardSync;
  const bool broadcasts = options_.broadcast_buffers && world_size_ > 1 &&
                          require_forward_param_sync_ &&
                          !module_->Buffers().empty();
  divisor_ = world_size_;
  int buffer_root = 0;
  // Inside a Join: tell the finished ranks what this step does (they shadow
  // it), and learn how many ranks still train.
  TANDEM_ASSIGN_OR_RETURN(std::optional<JoinStep> join_step,
                          NotifyJoinContext(syncs, broadcasts));
  if (join_step.has_value()) {
    TANDEM_RETURN_IF_ERROR(CheckJoinStep(*join_step, rank_));
    if (!divide_by_initial_world_size_) divisor_ = join_step->active_ranks;
    if (broadcasts) {
      TANDEM_ASSIGN_OR_RETURN(buffer_root, HighestRankWhere(true));
    }
  }
  if (broadcasts) TANDEM_RETURN_IF_ERROR(BroadcastBuffers(buffer_root));
  require_forward_param_sync_ = syncs;
  // A sharded optimizer (ZeRO-2) may have freed the buckets after taking
  // its gradient shards (Storage::Free); backward needs them again, zeroed.
  for (const DdpBucket& bucket : buckets_) {
    if (!bucket.flat.storage()->is_allocated()) {
      TANDEM_RETURN_IF_ERROR(bucket.flat.storage()->Reallocate());
      TANDEM_RETURN_IF_ERROR(FillInPlace(bucket.flat, 0.0));
    }
  }
  step_ = *next;
  return absl::OkStatus();
}

absl::Status DistributedDataParallel::Backward(const Tensor& loss) {
  const absl::StatusOr<DdpStepState> next =
      NextDdpStepState(step_, DdpStepCall::kBackward);
  if (!next.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "DistributedDataParallel on rank ", rank_,
        ": Backward(loss) without a Forward to synchronise; compute the loss "
        "from ddp.Forward(x) with grad mode on (not module.Forward(x), and "
        "not under NoGradGuard), and call Backward once per Forward (",
        next.status().message(), ")"));
  }
  absl::Status status;
  {
    trace::Scope event("backward", "ddp");
    status = loss.Backward();
  }
  if (!status.ok()) {
    // The collective order of this step is broken; leave no Work behind.
    WaitLaunched(absl::Now() + options_.timeout).IgnoreError();
    ResetIteration();
    return Annotate(status, rank_, "backward failed");
  }
  return FinishGradientSync();
}

void DistributedDataParallel::OnGradReady(int64_t index) {
  // The module was run directly (no step open): local gradients only.
  if (step_ == DdpStepState::kIdle) return;
  ParamState& p = params_[index];
  if (step_ == DdpStepState::kArmedLocal && options_.no_sync_keeps_gradients) {
    p.has_local_grad = true;
    return;
  }
  absl::Status s = EnsureGradIsView(p);
  if (!s.ok()) {
    if (hook_error_.ok()) hook_error_ = Annotate(s, rank_, p.name);
    return;
  }
  p.has_local_grad = true;
  if (step_ == DdpStepState::kArmedLocal) return;  // NoSync: nothing to reduce
  step_ = NextDdpStepState(step_, DdpStepCall::kGradReady).value_or(step_);
  if (p.ready) {
    if (hook_error_.ok()) {
      hook_error_ = absl::FailedPreconditionError(absl::StrCat(
          "DistributedDataParallel on rank ", rank_, ": parameter \"", p.name,
          "\" received a gradient twice in one synchronised step: a second "
          "backward ran before the first one's reduction was finished, so "
          "this step's gradients are unspecified. Call ddp.Backward(loss) "
          "(or loss.Backward() then ddp.FinishGradientSync()) once per "
          "ddp.Forward; to accumulate gradients over several backward "
          "passes, run all but the last inside ddp.NoSync()"));
    }
    return;
  }
  s = MarkReady(index);
  if (!s.ok() && hook_error_.ok()) hook_error_ = Annotate(s, rank_, p.name);
  PollInFlight();
}

absl::Status DistributedDataParallel::EnsureGradIsView(ParamState& p) {
  const Tensor grad = p.param.grad();
  if (grad.defined() && grad.storage() == p.view.storage() &&
      grad.storage_offset() == p.view.storage_offset()) {
    return absl::OkStatus();
  }
  // The gradient was replaced (e.g. ClearGrad()): move it into the bucket.
  if (grad.defined()) {
    TANDEM_RETURN_IF_ERROR(p.view.CopyFrom(grad));
  } else {
    TANDEM_RETURN_IF_ERROR(FillInPlace(p.view, 0.0));
  }
  return p.param.set_grad(p.view);
}

absl::Status DistributedDataParallel::MarkReady(int64_t index) {
  ParamState& p = params_[index];
  p.ready = true;
  if (world_size_ > 1 && !AverageInReduction() &&
      !WireDType(options_.comm_hook).has_value()) {
    // PyTorch multiplies by 1 / world_size (inside a Join: 1 / divisor_),
    // then sums across ranks (a compressing hook divides the compressed
    // bucket instead).
    TANDEM_RETURN_IF_ERROR(
        ScaleInPlace(p.view, 1.0 / static_cast<double>(divisor_)));
  }
  if (--bucket_states_[p.bucket].pending == 0 && options_.overlap) {
    LaunchCompleteBuckets();
  }
  return absl::OkStatus();
}

// The 1/world_size scaling can ride on the reduction (ReduceOp::kAvg: sum,
// then divide) without changing a bit of PyTorch's result exactly when the
// world size is a power of two: multiplying by 2^-k is exact (short of
// underflow to subnormals), so sum_r(g_r * 2^-k) == (sum_r g_r) * 2^-k in
// floating point, for the same summation order.
bool DistributedDataParallel::AverageInReduction() const {
  return divisor_ == world_size_ && (world_size_ & (world_size_ - 1)) == 0;
}

void DistributedDataParallel::LaunchCompleteBuckets() {
  const int64_t n = static_cast<int64_t>(buckets_.size());
  const comm::ReduceOp op =
      AverageInReduction() ? comm::ReduceOp::kAvg : comm::ReduceOp::kSum;
  while (next_launch_ < n && bucket_states_[next_launch_].pending == 0) {
    if (world_size_ > 1) {
      BucketState& state = bucket_states_[next_launch_];
      absl::StatusOr<comm::BufferView> view =
          ToBufferView(buckets_[next_launch_].flat);
      if (!view.ok()) {
        state.work = comm::MakeCompletedWork(view.status());
      } else if (const std::optional<DType> wire =
                     WireDType(options_.comm_hook)) {
        // Compressing hook: sum the divided wire tensor; the wait widens it
        // back into the bucket (WaitLaunched).
        absl::StatusOr<Tensor> compressed =
            CompressBucket(buckets_[next_launch_].flat, *wire, world_size_);
        absl::StatusOr<comm::BufferView> wire_view =
            compressed.ok()
                ? ToBufferView(*compressed)
                : absl::StatusOr<comm::BufferView>(compressed.status());
        if (compressed.ok()) state.wire = *std::move(compressed);
        state.work = wire_view.ok()
                         ? comm_->AllReduce(*wire_view, comm::ReduceOp::kSum)
                         : comm::MakeCompletedWork(wire_view.status());
      } else if (reduce_scatter_) {
        // In place: this rank's shard is its slice of the padded bucket.
        const DdpBucket& bucket = buckets_[next_launch_];
        const int64_t s = bucket.group.ShardNumel(world_size_);
        absl::StatusOr<Tensor> mine = bucket.flat.View(rank_ * s, {s});
        absl::StatusOr<comm::BufferView> shard =
            mine.ok() ? ToBufferView(*mine) : mine.status();
        state.work = shard.ok() ? comm_->ReduceScatter(*view, *shard, op)
                                : comm::MakeCompletedWork(shard.status());
      } else {
        state.work = comm_->AllReduce(*view, op);
      }
    }
    ++next_launch_;
  }
}

void DistributedDataParallel::PollInFlight() {
  // Backends without a progress thread (MPI) advance a nonblocking
  // collective only inside calls such as IsCompleted(); polling the oldest
  // unfinished bucket from every hook lets its reduction proceed while
  // backward computes the next gradients. One cheap call per hook.
  while (first_unfinished_ < next_launch_) {
    const std::unique_ptr<comm::Work>& work =
        bucket_states_[first_unfinished_].work;
    if (work != nullptr && !work->IsCompleted()) return;
    ++first_unfinished_;
  }
}

absl::Status DistributedDataParallel::FinishGradientSync() {
  const absl::StatusOr<DdpStepState> next =
      NextDdpStepState(step_, DdpStepCall::kFinish);
  if (!next.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "DistributedDataParallel on rank ", rank_,
        ": FinishGradientSync without a step to finish; call it once after "
        "each loss.Backward() on a loss computed from ddp.Forward(x) in grad "
        "mode (ddp.Backward(loss) does both) (",
        next.status().message(), ")"));
  }
  if (step_ == DdpStepState::kArmedLocal) {  // NoSync: gradients stay local
    absl::Status status = hook_error_;
    step_ = *next;
    hook_error_ = absl::OkStatus();
    return status;
  }

  absl::Status status = hook_error_;
  if (status.ok()) {
    std::vector<int64_t> unused;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!params_[i].ready) unused.push_back(static_cast<int64_t>(i));
    }
    if (!unused.empty() && !options_.find_unused_parameters) {
      std::vector<std::string> names;
      for (size_t k = 0; k < unused.size() && k < 10; ++k) {
        names.push_back(absl::StrCat("\"", params_[unused[k]].name, "\""));
      }
      if (unused.size() > 10) names.push_back("...");
      status = absl::FailedPreconditionError(absl::StrCat(
          "DistributedDataParallel on rank ", rank_, ": ", unused.size(),
          " of ", params_.size(),
          " parameters received no gradient in this step: ",
          absl::StrJoin(names, ", "), ".",
          step_ == DdpStepState::kReducing
              ? ""
              : " No gradient arrived at all: run loss.Backward() on a loss "
                "computed from ddp.Forward's output before finishing.",
          " DDP reduces every parameter in every synchronised step; if some "
          "parameters are legitimately unused in the forward pass, create "
          "DDP with DdpOptions{.find_unused_parameters = true}; otherwise "
          "make the loss depend on every parameter"));
    } else {
      for (int64_t i : unused) {
        ParamState& p = params_[i];
        // Nothing local to contribute unless NoSync steps accumulated some.
        if (!p.has_local_grad) {
          status = FillInPlace(p.view, 0.0);
          if (status.ok()) status = p.param.set_grad(p.view);
        } else {
          // NoSync steps accumulated into the view, but a gradient marked
          // zero since (Tensor::MarkGradZero) still holds them in memory:
          // grad() writes the zeros the bucket's reduction must read.
          p.param.grad();
        }
        if (status.ok()) status = MarkReady(i);
        if (!status.ok()) {
          status = Annotate(status, rank_, p.name);
          break;
        }
      }
    }
  }
  // Without overlap nothing was launched during backward; with it, this
  // launches what the unused parameters completed. Either way exactly the
  // complete buckets go out, in bucket order, the same on every rank.
  LaunchCompleteBuckets();
  absl::Status waited;
  {
    trace::Scope event("wait for gradient all-reduces", "ddp");
    last_sync_ = SyncStats();
    const absl::Time wait_start = absl::Now();
    waited = WaitLaunched(absl::Now() + options_.timeout);
    last_sync_.wait_seconds = absl::ToDoubleSeconds(absl::Now() - wait_start);
  }
  if (status.ok()) status = waited;
  ResetIteration();
  return status;
}

absl::Status DistributedDataParallel::WaitLaunched(absl::Time deadline) {
  absl::Status first;
  for (int64_t b = 0; b < static_cast<int64_t>(bucket_states_.size()); ++b) {
    std::unique_ptr<comm::Work>& work = bucket_states_[b].work;
    if (work == nullptr) continue;
    absl::Status s = work->Wait(Remaining(deadline));
    if (work->record().completed()) {
      ++last_sync_.all_reduces;
      last_sync_.bytes += work->record().bytes;
      last_sync_.all_reduce_seconds +=
          absl::ToDoubleSeconds(work->record().end - work->record().start);
    }
    if (trace::Enabled() && work->record().completed()) {
      // The bucket's all-reduce from launch to the completion this rank saw,
      // on its rank's comm track (it overlaps backward there).
      const comm::WorkRecord& r = work->record();
      trace::Record(absl::StrCat("AllReduce bucket ", b), "comm", r.start,
                    r.end, trace::Track::kComm,
                    trace::Args()
                        .Add("bucket", b)
                        .Add("bytes", r.bytes)
                        .Add("seq", r.fp.seq)
                        .Add("ok", s.ok() ? "yes" : "no")
                        .str());
      // When the device's communication stream actually ran it (nccl).
      if (r.has_device_span()) {
        trace::Record(absl::StrCat("AllReduce bucket ", b), "device",
                      r.device_start, r.device_end, trace::Track::kDevice,
                      trace::Args()
                          .Add("bucket", b)
                          .Add("bytes", r.bytes)
                          .Add("seq", r.fp.seq)
                          .str());
      }
    }
    if (s.ok() && bucket_states_[b].wire.defined()) {
      s = DecompressBucket(bucket_states_[b].wire, buckets_[b].flat);
      bucket_states_[b].wire = Tensor();
    }
    if (!s.ok() && first.ok()) {
      first = Annotate(s, rank_,
                       absl::StrCat(reduce_scatter_ ? "reduce-scatter of "
                                                    : "all-reduce of ",
                                    BucketDescription(b)));
    }
  }
  return first;
}

void DistributedDataParallel::ResetIteration() {
  for (ParamState& p : params_) {
    p.ready = false;
    p.has_local_grad = false;
  }
  for (BucketState& b : bucket_states_) {
    b.pending = static_cast<int64_t>(b.members.size());
    b.work.reset();
    b.wire = Tensor();
  }
  next_launch_ = 0;
  first_unfinished_ = 0;
  step_ = NextDdpStepState(step_, DdpStepCall::kReset)
              .value_or(DdpStepState::kIdle);
  hook_error_ = absl::OkStatus();
}

std::string DistributedDataParallel::BucketDescription(int64_t b) const {
  const DdpBucket& bucket = buckets_[b];
  std::vector<std::string> names;
  for (const FlatParamMember& m : bucket.group.members()) {
    names.push_back(m.name);
  }
  return absl::StrCat("gradient bucket ", b, " (",
                      DTypeName(bucket.group.dtype()), "[", bucket.flat.numel(),
                      "]: ", absl::StrJoin(names, ", "), ")");
}

// ---- NoSync.

DistributedDataParallel::NoSyncGuard DistributedDataParallel::NoSync() {
  return NoSyncGuard(this);
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(DistributedDataParallel* ddp)
    : ddp_(ddp), previous_(ddp->require_sync_) {
  ddp_->require_sync_ = false;
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(NoSyncGuard&& other) noexcept
    : ddp_(other.ddp_), previous_(other.previous_) {
  other.ddp_ = nullptr;
}

DistributedDataParallel::NoSyncGuard::~NoSyncGuard() {
  if (ddp_ != nullptr) ddp_->require_sync_ = previous_;
}

}  // namespace tandem::train
