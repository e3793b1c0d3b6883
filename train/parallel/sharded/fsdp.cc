#include "train/parallel/sharded/fsdp.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "comm/types.h"
#include "tensor/autograd/autograd.h"
#include "tensor/ops.h"
#include "train/parallel/core/model_agreement.h"
#include "train/parallel/core/tensor_comm.h"
#include "train/parallel/sharded/grad_clip.h"

namespace tandem::train {
namespace {

// The 1/N average rides on the reduction (kAvg) at power-of-two world sizes
// and is applied before a kSum otherwise: DDP's arithmetic (ddp.cc), so
// FSDP's gradients equal DDP's bit for bit.
bool AverageInReduction(int world_size) {
  return (world_size & (world_size - 1)) == 0;
}

// t /= divisor in place, as PyTorch's div_: computed in float and rounded
// to t's dtype (f16/bf16 too). No-op for 1.
absl::Status DivideInPlace(const Tensor& t, double divisor) {
  if (divisor == 1.0) return absl::OkStatus();
  NoGradGuard no_grad;
  TANDEM_ASSIGN_OR_RETURN(Tensor q, Div(t, divisor));
  return t.CopyFrom(q);
}

absl::Status CheckFloatingOption(const char* name,
                                 const std::optional<DType>& dtype, int rank) {
  if (!dtype.has_value() || IsFloatingPoint(*dtype)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "FullyShardedDataParallel on rank ", rank, ": FsdpOptions::", name,
      " is ", DTypeName(*dtype),
      ", not a floating dtype; parameters and gradients can only be "
      "gathered and reduced in bf16, f16, f32 or f64 (bf16 is the usual "
      "mixed-precision choice)"));
}

// Drops the unit's parameters' gradients (views of its full_grad).
void ClearGrads(const FlatParamGroup& group) {
  for (const FlatParamMember& m : group.members()) m.tensor.ClearGrad();
}

// The submodule at dotted `path` ("" is `root` itself), or null.
nn::Module* FindSubmodule(nn::Module& root, const std::string& path) {
  nn::Module* at = &root;
  if (path.empty()) return at;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    nn::Module* next = nullptr;
    for (const auto& [name, child] : at->NamedChildren()) {
      if (name == part) next = child;
    }
    if (next == nullptr) return nullptr;
    at = next;
  }
  return at;
}

std::string TensorDesc(const Tensor& t) {
  return absl::StrCat(DTypeName(t.dtype()), ShapeToString(t.shape()), " on ",
                      t.device().ToString());
}

}  // namespace

std::pair<double, double> FsdpGradientDivideFactors(int world_size) {
  int64_t factor = 1;
  while (world_size % factor == 0 && world_size / factor > factor) {
    factor *= 2;
  }
  return {static_cast<double>(factor),
          static_cast<double>(world_size) / static_cast<double>(factor)};
}

absl::Status FullyShardedDataParallel::Annotate(
    const absl::Status& status, const std::string& context) const {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("FullyShardedDataParallel on rank ", rank_,
                                   ": ", context, ": ", status.message()));
}

FullyShardedDataParallel::FullyShardedDataParallel(nn::Module& model,
                                                   comm::Communicator& comm,
                                                   const FsdpOptions& options)
    : model_(&model),
      comm_(&comm),
      options_(options),
      rank_(comm.rank()),
      world_size_(comm.size()),
      virtual_local_(
          options.virtual_world > 0 ? options.virtual_world / comm.size() : 0) {
}

absl::StatusOr<std::unique_ptr<FullyShardedDataParallel>>
FullyShardedDataParallel::Create(nn::Module& model, comm::Communicator& comm,
                                 const FsdpOptions& options) {
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("FullyShardedDataParallel on rank ", comm.rank(),
                     ": FsdpOptions::timeout must be positive, got ",
                     absl::FormatDuration(options.timeout)));
  }
  TANDEM_RETURN_IF_ERROR(
      CheckFloatingOption("param_dtype", options.param_dtype, comm.rank()));
  TANDEM_RETURN_IF_ERROR(
      CheckFloatingOption("reduce_dtype", options.reduce_dtype, comm.rank()));
  std::unique_ptr<FullyShardedDataParallel> fsdp(
      new FullyShardedDataParallel(model, comm, options));
  TANDEM_RETURN_IF_ERROR(fsdp->Build());
  return fsdp;
}

std::string FullyShardedDataParallel::UnitName(const Unit& u) {
  return u.layer < 0 ? "the root unit" : absl::StrCat("unit ", u.layer);
}

absl::Status FullyShardedDataParallel::Build() {
  // Rank 0's units are broadcast below: first make sure every rank built the
  // same model, so a different one fails here by name.
  const std::vector<nn::NamedTensor> all = model_->NamedParameters();
  if (!all.empty()) {
    TANDEM_RETURN_IF_ERROR(CheckSameModelOnEveryRank(
        *model_, *comm_, all.front().tensor.device(),
        "FullyShardedDataParallel", options_.timeout));
  }
  // The Sequential whose layers are units.
  const std::string& path = options_.unit_layers;
  nn::Module* found = FindSubmodule(*model_, path);
  layers_ = dynamic_cast<nn::Sequential*>(found);
  if (layers_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FullyShardedDataParallel on rank ", rank_, ": ",
        path.empty()
            ? absl::StrCat("without FsdpOptions::unit_layers the model must "
                           "be an nn::Sequential (one unit per layer); it is "
                           "a ",
                           std::string(model_->type_name()))
            : absl::StrCat("FsdpOptions::unit_layers is \"", path, "\", but ",
                           found == nullptr
                               ? "the model has no such submodule"
                               : absl::StrCat("that submodule is a ",
                                              std::string(found->type_name())),
                           "; name an nn::Sequential of the model (e.g. "
                           "GPT-2's \"transformer.h\")")));
  }
  // Each parameter goes to the unit of its layer (its name starts with the
  // Sequential's path and the layer's index), or to the root.
  const std::string prefix = path.empty() ? "" : path + ".";
  std::vector<std::vector<FlatParamGroup::Entry>> per_layer(layers_->size());
  std::vector<FlatParamGroup::Entry> root;
  std::map<const void*, std::string> seen;
  for (size_t j = 0; j < all.size(); ++j) {
    const nn::NamedTensor& p = all[j];
    auto [it, fresh] = seen.emplace(p.tensor.impl().get(), p.name);
    if (!fresh) {
      return absl::InvalidArgumentError(absl::StrCat(
          "FullyShardedDataParallel on rank ", rank_,
          ": the model lists one "
          "tensor twice, as \"",
          it->second, "\" and \"", p.name,
          "\"; register a shared (tied) weight once, in the module that "
          "holds both uses (GPT-2 keeps its tied head as "
          "transformer.wte.weight)"));
    }
    int64_t layer = -1;
    if (p.name.rfind(prefix, 0) == 0) {
      const std::string rest = p.name.substr(prefix.size());
      const size_t dot = rest.find('.');
      int64_t k = 0;
      if (dot != std::string::npos &&
          absl::SimpleAtoi(rest.substr(0, dot), &k) && k >= 0 &&
          k < layers_->size()) {
        layer = k;
      }
    }
    FlatParamGroup::Entry e{p.name, static_cast<int64_t>(j), p.tensor};
    (layer < 0 ? root : per_layer[layer]).push_back(std::move(e));
  }
  unit_of_layer_.assign(layers_->size(), -1);
  if (!root.empty()) {
    root_ = 0;
    TANDEM_RETURN_IF_ERROR(AddUnit(-1, std::move(root)));
  }
  for (int64_t i = 0; i < layers_->size(); ++i) {
    if (per_layer[i].empty()) continue;
    unit_of_layer_[i] = static_cast<int64_t>(units_.size());
    TANDEM_RETURN_IF_ERROR(AddUnit(i, std::move(per_layer[i])));
  }
  if (units_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FullyShardedDataParallel on rank ", rank_,
        ": the model has no layer with parameters; there is nothing to "
        "shard"));
  }
  layers_->SetLayerCall([this](int64_t i, nn::Module& layer,
                               const Tensor& x) -> absl::StatusOr<Tensor> {
    return RunLayer(i, layer, x);
  });
  return absl::OkStatus();
}

absl::Status FullyShardedDataParallel::AddUnit(
    int64_t layer, std::vector<FlatParamGroup::Entry> entries) {
  const int64_t n = world_size_;
  const int64_t i = layer;
  Unit u;
  u.layer = layer;
  const Tensor& first = entries.front().tensor;
  for (const FlatParamGroup::Entry& p : entries) {
    if (!p.tensor.storage()->is_allocated()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "FullyShardedDataParallel on rank ", rank_, ": parameter \"", p.name,
          "\" holds no memory: the model is already wrapped in a "
          "FullyShardedDataParallel (its parameters live in shards). Wrap "
          "a model once; to re-wrap, load a FullStateDict into a fresh "
          "model"));
    }
    if (p.tensor.dtype() != first.dtype() ||
        p.tensor.device() != first.device()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "FullyShardedDataParallel on rank ", rank_, ": ", UnitName(u),
          " mixes parameters: \"", entries.front().name, "\" is ",
          TensorDesc(first), " but \"", p.name, "\" is ", TensorDesc(p.tensor),
          ". A unit is flattened into one buffer, so its parameters must "
          "share one dtype and one device; convert the layer (Module::To) "
          "before wrapping"));
    }
  }
  // `first` refers into `entries`, which Create consumes: keep what is
  // needed of it before the move (reading it afterwards read freed memory).
  const DType dtype = first.dtype();
  const Device device = first.device();
  TANDEM_ASSIGN_OR_RETURN(
      u.group, FlatParamGroup::Create(dtype, device, std::move(entries)));
  u.shard = u.group.ShardNumel(n);
  u.master_dtype = dtype;
  u.compute_dtype = options_.param_dtype.value_or(u.master_dtype);
  u.reduce_dtype = options_.reduce_dtype.value_or(u.compute_dtype);
  if (u.compute_dtype != u.master_dtype || u.reduce_dtype != u.master_dtype) {
    mixed_ = true;
  }
  TANDEM_ASSIGN_OR_RETURN(u.full, u.group.NewBuffer(n));
  TANDEM_RETURN_IF_ERROR(u.group.Pack(u.full));
  if (world_size_ > 1) {
    TANDEM_ASSIGN_OR_RETURN(comm::BufferView view, ToBufferView(u.full));
    TANDEM_RETURN_IF_ERROR(
        Annotate(comm_->Broadcast(view, /*root=*/0)->Wait(options_.timeout),
                 absl::StrCat("broadcasting ", UnitName(u), " from rank 0")));
  }
  // This rank's shard (padding included) becomes a leaf of its own.
  TANDEM_ASSIGN_OR_RETURN(const FlatShardRange range, u.group.Shard(rank_, n));
  TANDEM_ASSIGN_OR_RETURN(Tensor mine,
                          u.full.View(range.begin, {range.numel()}));
  TANDEM_ASSIGN_OR_RETURN(u.shard_param, mine.Clone());
  u.shard_param = u.shard_param.Detach();
  if (u.compute_dtype != u.master_dtype) {
    // The unit is gathered in the compute dtype: the parameters take it.
    TANDEM_ASSIGN_OR_RETURN(
        u.full, u.group.NewBuffer(n, u.compute_dtype, /*zeroed=*/false));
  }
  ClearGrads(u.group);
  TANDEM_RETURN_IF_ERROR(u.group.BindParams(u.full));
  TANDEM_RETURN_IF_ERROR(u.shard_param.set_requires_grad(true));
  TANDEM_ASSIGN_OR_RETURN(u.shard_grad,
                          Tensor::Zeros({u.shard}, u.master_dtype, device));
  TANDEM_RETURN_IF_ERROR(u.shard_param.set_grad(u.shard_grad));
  TANDEM_ASSIGN_OR_RETURN(
      u.full_grad, u.group.NewBuffer(n, u.compute_dtype, /*zeroed=*/false));
  u.full_grad.storage()->Free();
  u.full.storage()->Free();

  const int64_t index = static_cast<int64_t>(units_.size());
  for (int64_t member = 0; member < u.group.size(); ++member) {
    TANDEM_ASSIGN_OR_RETURN(
        HookHandle h,
        u.group.members()[member].tensor.AddPostAccumulateGradHook(
            [this, index, member](Tensor& param) {
              OnGradAccumulated(index, param, member);
            }));
    u.hooks.push_back(h);
  }
  FsdpUnitInfo info;
  info.layer = i;
  for (const FlatParamMember& m : u.group.members()) {
    info.parameter_names.push_back(m.name);
  }
  info.numel = u.group.numel();
  info.shard_numel = u.shard;
  info.master_dtype = u.master_dtype;
  info.compute_dtype = u.compute_dtype;
  info.reduce_dtype = u.reduce_dtype;
  infos_.push_back(std::move(info));
  units_.push_back(std::move(u));
  return absl::OkStatus();
}

FullyShardedDataParallel::~FullyShardedDataParallel() {
  if (layers_ != nullptr) layers_->SetLayerCall(nullptr);
  for (Unit& u : units_) {
    for (size_t k = 0; k < u.hooks.size(); ++k) {
      u.group.members()[k].tensor.RemovePostAccumulateGradHook(u.hooks[k]);
    }
    if (u.gather) u.gather->Wait(options_.timeout).IgnoreError();
    if (u.reduce) u.reduce->Wait(options_.timeout).IgnoreError();
  }
}

absl::Status FullyShardedDataParallel::CheckUnchanged() const {
  // Each member's index is its place in the model's parameters at Create.
  const std::vector<nn::NamedTensor> now = model_->NamedParameters();
  std::vector<const FlatParamMember*> wrapped;
  for (const Unit& u : units_) {
    for (const FlatParamMember& m : u.group.members()) {
      if (m.index >= static_cast<int64_t>(wrapped.size())) {
        wrapped.resize(m.index + 1, nullptr);
      }
      wrapped[m.index] = &m;
    }
  }
  for (size_t j = 0; j < now.size(); ++j) {
    if (j >= wrapped.size() ||
        wrapped[j]->tensor.impl() != now[j].tensor.impl()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "FullyShardedDataParallel on rank ", rank_, ": parameter \"",
          now[j].name,
          "\" was added or replaced after the model was wrapped. FSDP "
          "shards the parameters it found at Create; build the model "
          "completely, then wrap it"));
    }
  }
  if (now.size() != wrapped.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "FullyShardedDataParallel on rank ", rank_, ": the model has ",
        now.size(), " parameters but had ", wrapped.size(),
        " when it was wrapped; build the model completely, then wrap it"));
  }
  for (const Unit& u : units_) {
    if (const std::optional<int64_t> k = u.group.FirstUnbound(u.full)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "FullyShardedDataParallel on rank ", rank_, ": parameter \"",
          u.group.members()[*k].name,
          "\" no longer views its unit's flat buffer: it was moved "
          "(Module::To) or given new memory after wrapping, so updates "
          "would be lost. Move or change the model before wrapping it"));
    }
  }
  return absl::OkStatus();
}

absl::Status FullyShardedDataParallel::LaunchGather(Unit& u) {
  if (u.gathered || u.gather != nullptr) return absl::OkStatus();
  TANDEM_RETURN_IF_ERROR(u.full.storage()->Reallocate());
  Tensor send_tensor = u.shard_param.Detach();
  if (u.compute_dtype != u.master_dtype) {
    // Each rank casts its own shard: 1/N of the casts, half the bytes.
    TANDEM_ASSIGN_OR_RETURN(send_tensor, send_tensor.To(u.compute_dtype));
  }
  if (world_size_ == 1) {
    TANDEM_RETURN_IF_ERROR(u.full.CopyFrom(send_tensor));
    u.gathered = true;
    return absl::OkStatus();
  }
  u.gather_send = send_tensor;  // alive until the all-gather completes
  TANDEM_ASSIGN_OR_RETURN(comm::BufferView send, ToBufferView(send_tensor));
  TANDEM_ASSIGN_OR_RETURN(comm::BufferView recv, ToBufferView(u.full));
  u.gather = comm_->AllGather(send, recv);
  return absl::OkStatus();
}

absl::Status FullyShardedDataParallel::WaitGather(Unit& u) {
  TANDEM_RETURN_IF_ERROR(LaunchGather(u));
  if (u.gather != nullptr) {
    absl::Status s = u.gather->Wait(options_.timeout);
    u.gather.reset();
    u.gather_send = Tensor();
    TANDEM_RETURN_IF_ERROR(
        Annotate(s, absl::StrCat("all-gather of ", UnitName(u))));
    u.gathered = true;
  }
  return absl::OkStatus();
}

void FullyShardedDataParallel::Release(Unit& u) {
  if (u.gather != nullptr) return;  // never free a buffer a collective uses
  u.full.storage()->Free();
  u.gathered = false;
}

absl::StatusOr<Tensor> FullyShardedDataParallel::Forward(const Tensor& input) {
  if (step_open_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "FullyShardedDataParallel on rank ", rank_,
        ": Forward called while the previous grad-mode Forward still awaits "
        "its Backward; call fsdp.Backward(loss) once per Forward (or run "
        "evaluation under NoGradGuard)"));
  }
  TANDEM_RETURN_IF_ERROR(CheckUnchanged());
  const bool grad = IsGradEnabled();
  if (root_ >= 0) {
    TANDEM_RETURN_IF_ERROR(WaitGather(units_[root_]));
    if (options_.prefetch && root_ + 1 < static_cast<int64_t>(units_.size())) {
      TANDEM_RETURN_IF_ERROR(LaunchGather(units_[root_ + 1]));
    }
  }
  // The model runs its layers through RunLayer (Sequential::SetLayerCall).
  in_forward_ = true;
  absl::StatusOr<Tensor> y = model_->Forward(input);
  in_forward_ = false;
  if (root_ >= 0 && (!grad || !y.ok())) Release(units_[root_]);
  if (!y.ok()) return y.status();
  Tensor x = *std::move(y);
  if (grad) {
    // The root stays gathered for backward (PyTorch keeps its root
    // unsharded after forward); its pre-backward runs first.
    if (root_ >= 0) {
      TANDEM_ASSIGN_OR_RETURN(x, AttachPreBackward(x, root_));
    }
    step_open_ = true;
    for (Unit& u : units_) u.pending = u.group.size();
  }
  return x;
}

absl::StatusOr<Tensor> FullyShardedDataParallel::RunLayer(int64_t i,
                                                          nn::Module& layer,
                                                          const Tensor& input) {
  if (!in_forward_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "FullyShardedDataParallel on rank ", rank_, ": layer ", i,
        " of a wrapped model ran outside the wrapper's Forward; its "
        "parameters live in shards, so run the model through "
        "fsdp.Forward(x)"));
  }
  const int64_t index = unit_of_layer_[i];
  if (index < 0) return layer.Forward(input);
  Tensor x = input;
  Unit& u = units_[index];
  if (u.compute_dtype != u.master_dtype && IsFloatingPoint(x.dtype()) &&
      x.dtype() != u.compute_dtype) {
    // PyTorch's cast of forward inputs to param_dtype (differentiable:
    // the input's gradient comes back in its own dtype).
    TANDEM_ASSIGN_OR_RETURN(x, x.To(u.compute_dtype));
  }
  TANDEM_RETURN_IF_ERROR(WaitGather(u));
  if (options_.prefetch && index + 1 < static_cast<int64_t>(units_.size())) {
    TANDEM_RETURN_IF_ERROR(LaunchGather(units_[index + 1]));
  }
  absl::StatusOr<Tensor> y = layer.Forward(x);
  Release(u);
  if (!y.ok()) return Annotate(y.status(), absl::StrCat("layer ", i));
  if (!IsGradEnabled()) return y;
  return AttachPreBackward(*y, index);
}

int64_t FullyShardedDataParallel::BackwardNext(int64_t unit) const {
  const int64_t last = static_cast<int64_t>(units_.size()) - 1;
  if (unit == root_) return last > root_ ? last : -1;
  return unit - 1 > root_ ? unit - 1 : -1;
}

absl::StatusOr<Tensor> FullyShardedDataParallel::AttachPreBackward(
    const Tensor& y, int64_t unit) {
  if (!y.requires_grad()) return y;
  Tensor out = y.Detach();
  RecordOp("FsdpPreBackward", out, {y},
           [this, unit](const Tensor& gy, GradSink& sink) -> absl::Status {
             absl::Status s = PreBackward(unit);
             if (!s.ok()) {
               if (hook_error_.ok()) hook_error_ = s;
               return s;
             }
             return sink.Add(0, gy);
           });
  return out;
}

absl::Status FullyShardedDataParallel::PreBackward(int64_t unit) {
  Unit& u = units_[unit];
  TANDEM_RETURN_IF_ERROR(WaitGather(u));
  if (const int64_t next = BackwardNext(unit); options_.prefetch && next >= 0) {
    TANDEM_RETURN_IF_ERROR(LaunchGather(units_[next]));
  }
  // In the virtual world a later micro-batch of the same virtual rank adds
  // to the gradient its earlier ones left (FoldVirtualRank frees it).
  if (virtual_local_ == 0 || !u.full_grad.storage()->is_allocated()) {
    TANDEM_RETURN_IF_ERROR(u.full_grad.storage()->Reallocate());
    TANDEM_RETURN_IF_ERROR(FillInPlace(u.full_grad, 0.0));
  }
  // The parameters have no gradient here (cleared after every reduction).
  TANDEM_RETURN_IF_ERROR(u.group.BindGrads(u.full_grad));
  return absl::OkStatus();
}

void FullyShardedDataParallel::OnGradAccumulated(int64_t unit,
                                                 const Tensor& param,
                                                 int64_t index) {
  if (!step_open_) return;
  Unit& u = units_[unit];
  absl::Status s;
  // Autograd may have replaced the gradient (none was bound): move it in.
  const Tensor grad = param.grad();
  if (!u.full_grad.storage()->is_allocated()) {
    s = absl::InternalError("gradient arrived before the unit's pre-backward");
  } else if (grad.storage() != u.full_grad.storage()) {
    absl::StatusOr<Tensor> view = u.group.View(u.full_grad, index);
    s = view.ok() ? view->CopyFrom(grad) : view.status();
    if (s.ok()) s = param.set_grad(*view);
  }
  if (s.ok() && --u.pending == 0 && virtual_local_ > 0) {
    Release(u);  // the gradient stays for FoldVirtualRank
  } else if (s.ok() && u.pending == 0) {
    Release(u);
    // At most one reduce-scatter in flight besides this one: finish the
    // previous unit's (it frees its full-size gradient buffer).
    for (Unit& other : units_) {
      if (&other != &u && other.reduce != nullptr && s.ok()) {
        s = FinishReduce(other);
      }
    }
    if (s.ok()) s = LaunchReduce(u);
  }
  if (!s.ok() && hook_error_.ok()) {
    hook_error_ = Annotate(s, UnitName(u));
  }
}

absl::Status FullyShardedDataParallel::LaunchReduce(Unit& u) {
  comm::ReduceOp op = comm::ReduceOp::kSum;
  u.reduce_buf = u.full_grad;
  if (!mixed_) {
    // DDP's arithmetic: the weights equal DDP's bit for bit.
    if (AverageInReduction(world_size_)) {
      op = comm::ReduceOp::kAvg;
    } else {
      TANDEM_RETURN_IF_ERROR(
          ScaleInPlace(u.full_grad, 1.0 / static_cast<double>(world_size_)));
    }
  } else {
    // PyTorch FSDP: cast to reduce_dtype, divide by the pre-divide factor,
    // sum; the post-divide factor is applied in FinishReduce.
    if (u.reduce_dtype != u.compute_dtype) {
      NoGradGuard no_grad;
      TANDEM_ASSIGN_OR_RETURN(u.reduce_buf, u.full_grad.To(u.reduce_dtype));
      ClearGrads(u.group);
      u.full_grad.storage()->Free();
    }
    TANDEM_RETURN_IF_ERROR(DivideInPlace(
        u.reduce_buf, FsdpGradientDivideFactors(world_size_).first));
  }
  if (world_size_ == 1) return FinishReduce(u);
  TANDEM_ASSIGN_OR_RETURN(comm::BufferView send, ToBufferView(u.reduce_buf));
  TANDEM_ASSIGN_OR_RETURN(Tensor mine,
                          u.reduce_buf.View(rank_ * u.shard, {u.shard}));
  TANDEM_ASSIGN_OR_RETURN(comm::BufferView recv, ToBufferView(mine));
  u.reduce = comm_->ReduceScatter(send, recv, op);
  return absl::OkStatus();
}

absl::Status FullyShardedDataParallel::FinishReduce(Unit& u) {
  if (u.reduce != nullptr) {
    absl::Status s = u.reduce->Wait(options_.timeout);
    u.reduce.reset();
    TANDEM_RETURN_IF_ERROR(
        Annotate(s, absl::StrCat("reduce-scatter of ", UnitName(u))));
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor mine,
                          u.reduce_buf.View(rank_ * u.shard, {u.shard}));
  if (mixed_) {
    TANDEM_RETURN_IF_ERROR(
        DivideInPlace(mine, FsdpGradientDivideFactors(world_size_).second));
    if (mine.dtype() != u.master_dtype) {
      NoGradGuard no_grad;
      TANDEM_ASSIGN_OR_RETURN(mine, mine.To(u.master_dtype));
    }
  }
  // Accumulate like any gradient: the shard's grad is zeroed by the user.
  TANDEM_RETURN_IF_ERROR(AddInPlace(u.shard_grad, mine));
  ClearGrads(u.group);
  u.full_grad.storage()->Free();
  u.reduce_buf = Tensor();
  return absl::OkStatus();
}

absl::Status FullyShardedDataParallel::Backward(const Tensor& loss) {
  if (!step_open_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "FullyShardedDataParallel on rank ", rank_,
        ": Backward(loss) without a grad-mode Forward; compute the loss from "
        "fsdp.Forward(x) with grad mode on, once per Forward"));
  }
  absl::Status status = loss.Backward();
  absl::Status finished = FinishBackward();
  if (status.ok()) status = finished;
  if (!status.ok() && status.message().find("FullyShardedDataParallel") ==
                          absl::string_view::npos) {
    status = Annotate(status, "backward");
  }
  return status;
}

absl::Status FullyShardedDataParallel::FinishBackward() {
  absl::Status status = hook_error_;
  for (Unit& u : units_) {
    if (status.ok() && u.pending != 0) {
      status = absl::FailedPreconditionError(absl::StrCat(
          "FullyShardedDataParallel on rank ", rank_, ": ", UnitName(u),
          " received ", u.group.size() - u.pending, " of ", u.group.size(),
          " parameter gradients in this backward; FSDP reduces every unit "
          "in every step, so make the loss depend on every parameter"));
    }
  }
  // Drain: every collective launched must finish before the buffers go.
  for (Unit& u : units_) {
    if (u.reduce != nullptr) {
      absl::Status s = FinishReduce(u);
      if (status.ok()) status = s;
    }
    if (u.gather != nullptr) {  // a prefetch nobody consumed
      absl::Status s = u.gather->Wait(options_.timeout);
      u.gather.reset();
      u.gather_send = Tensor();
      if (status.ok()) status = s;
    }
    Release(u);
    if (u.full_grad.storage()->is_allocated() &&
        (virtual_local_ == 0 || !status.ok())) {
      ClearGrads(u.group);
      u.full_grad.storage()->Free();
    }
    u.reduce_buf = Tensor();
  }
  step_open_ = false;
  hook_error_ = absl::OkStatus();
  return status;
}

absl::StatusOr<double> FullyShardedDataParallel::ClipGradNorm(
    double max_norm, const optim::ClipGradNormOptions& options) {
  std::vector<Tensor> grads;
  for (const Unit& u : units_) {
    if (u.shard_param.has_grad()) grads.push_back(u.shard_param.grad());
  }
  if (virtual_local_ > 0) {
    return ClipVirtualGradNorm(grads, max_norm, options);
  }
  const Device device =
      units_.empty() ? Device::CPU() : units_.front().shard_param.device();
  return ClipShardedGradNorm(*comm_, device, grads, max_norm, options,
                             options_.timeout);
}

}  // namespace tandem::train
