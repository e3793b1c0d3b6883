// Grad mode, op recording, the backward engine, and Tensor's autograd
// methods.
//
// The engine (Tensor::Backward) works on one graph with state on the
// caller's stack:
//   1. Walk the graph from the root (iterative DFS over inputs that require
//      grad), counting for every tensor how many edges lead into it.
//   2. Run nodes in Kahn order: a node is ready once every consumer has
//      delivered its contribution; among ready nodes the newest runs first
//      (sequence_nr, as in PyTorch), so leaves finish roughly in reverse
//      order of use — the order DDP's buckets expect.
//   3. A leaf's contributions go straight into its grad (in place when one
//      exists); when its last edge is delivered its hooks fire.
#include "tensor/autograd/autograd.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/fiber_local.h"
#include "base/status_macros.h"
#include "base/trace/trace.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "tensor/tensor_impl.h"

namespace tandem {
namespace {

thread_local bool grad_enabled = true;
// Grad mode is a rank's: it follows the rank when ranks are fibers.
[[maybe_unused]] const bool kGradModeIsFiberLocal =
    base::RegisterFiberLocal<bool>([]() -> bool& { return grad_enabled; },
                                   true);
std::atomic<uint64_t> next_sequence_nr{0};

bool IsLeaf(const TensorImpl& impl) { return impl.grad_fn == nullptr; }

// True when `t` is the only handle to its impl and its storage (and to the
// storage that one aliases, see Storage::Alias), so the engine may keep it
// and later write into it.
bool IsUniquelyOwned(const Tensor& t) {
  if (t.impl().use_count() != 1 || t.storage().use_count() != 1) return false;
  for (const Storage* s = t.storage().get(); s->base() != nullptr;
       s = s->base().get()) {
    if (s->base().use_count() != 1) return false;
  }
  return true;
}

absl::StatusOr<Tensor> CopyOf(const Tensor& t) {
  TANDEM_ASSIGN_OR_RETURN(Tensor out,
                          Tensor::Empty(t.shape(), t.dtype(), t.device()));
  TANDEM_RETURN_IF_ERROR(out.CopyFrom(t));
  return out;
}

// What a node holds for a non-leaf input: the input's storage-less twin
// (TensorImpl::graph_edge), made once per grad_fn and shared by every
// consumer, so that all of them meet in one slot of the engine.
Tensor GraphEdge(const Tensor& t) {
  TensorImpl& impl = *t.impl();
  if (impl.graph_edge == nullptr || impl.graph_edge->grad_fn != impl.grad_fn) {
    auto edge = std::make_shared<TensorImpl>();
    edge->storage = Storage::Empty(impl.storage->device());
    edge->shape = impl.shape;
    edge->numel = impl.numel;
    edge->dtype = impl.dtype;
    edge->requires_grad = true;
    edge->grad_fn = impl.grad_fn;
    impl.graph_edge = std::move(edge);
  }
  return Tensor(impl.graph_edge);
}

}  // namespace

namespace internal {

// Per-tensor bookkeeping of one Backward call.
struct Slot {
  std::shared_ptr<TensorImpl> impl;
  int64_t pending = 0;  // edges whose contribution has not arrived yet
  Tensor buffer;        // non-leaves: the gradient accumulated so far
  bool owned = false;   // buffer may be written in place
};

struct BackwardState {
  std::unordered_map<TensorImpl*, Slot> slots;
};

}  // namespace internal

bool IsGradEnabled() { return grad_enabled; }

NoGradGuard::NoGradGuard() : previous_(grad_enabled) { grad_enabled = false; }
NoGradGuard::~NoGradGuard() { grad_enabled = previous_; }
EnableGradGuard::EnableGradGuard() : previous_(grad_enabled) {
  grad_enabled = true;
}
EnableGradGuard::~EnableGradGuard() { grad_enabled = previous_; }

bool ShouldRecord(std::initializer_list<Tensor> inputs) {
  if (!grad_enabled) return false;
  for (const Tensor& t : inputs) {
    if (t.requires_grad()) return true;
  }
  return false;
}

bool ShouldRecord(const std::vector<Tensor>& inputs) {
  if (!grad_enabled) return false;
  for (const Tensor& t : inputs) {
    if (t.requires_grad()) return true;
  }
  return false;
}

namespace {
// The innermost ScopedModuleLabel of this thread (nullptr: none).
thread_local const std::string* t_module_label = nullptr;
[[maybe_unused]] const bool kModuleLabelIsFiberLocal =
    base::RegisterFiberLocal<const std::string*>(
        []() -> const std::string*& { return t_module_label; }, nullptr);
}  // namespace

ScopedModuleLabel::ScopedModuleLabel(std::string label)
    : label_(std::move(label)), previous_(t_module_label) {
  t_module_label = &label_;
}

ScopedModuleLabel::~ScopedModuleLabel() { t_module_label = previous_; }

void RecordOp(std::string_view name, const Tensor& output,
              std::vector<Tensor> inputs, BackwardFn backward) {
  if (!output.defined() || !ShouldRecord(inputs)) return;
  auto node = std::make_shared<Node>();
  node->name = std::string(name);
  if (t_module_label != nullptr && trace::Enabled()) {
    node->module = *t_module_label;
  }
  node->sequence_nr = next_sequence_nr.fetch_add(1, std::memory_order_relaxed);
  for (Tensor& t : inputs) {
    if (!t.requires_grad()) {
      t = Tensor();  // don't keep what needs no grad
    } else if (!IsLeaf(*t.impl())) {
      t = GraphEdge(t);  // don't keep a non-leaf's memory alive
    }
  }
  node->inputs = std::move(inputs);
  node->backward = std::move(backward);
  output.impl()->requires_grad = true;
  output.impl()->grad_fn = std::move(node);
}

namespace {

// Fills a leaf's gradient marked zero (MarkGradZero) with zeros and drops
// the mark; nothing to do otherwise.
absl::Status WriteMarkedZero(TensorImpl& impl) {
  if (!impl.grad_marked_zero) return absl::OkStatus();
  impl.grad_marked_zero = false;
  return FillInPlace(impl.grad, 0.0);
}

}  // namespace

// ---- GradSink.

bool GradSink::needs(int i) const {
  return i >= 0 && i < static_cast<int>(node_->inputs.size()) &&
         node_->inputs[i].defined();
}

absl::Status GradSink::Add(int i, Tensor g) {
  if (!needs(i)) return absl::OkStatus();
  const Tensor& input = node_->inputs[i];
  if (!g.defined() || g.shape() != input.shape() ||
      g.dtype() != input.dtype()) {
    return absl::InternalError(absl::StrCat(
        "the backward of ", node_->name, " produced a gradient ",
        g.defined()
            ? absl::StrCat(DTypeName(g.dtype()), ShapeToString(g.shape()))
            : "(undefined)",
        " for input ", i, " of ", DTypeName(input.dtype()),
        ShapeToString(input.shape()), "; this is a bug in that op"));
  }
  internal::Slot& slot = state_->slots.at(input.impl().get());
  TensorImpl& impl = *slot.impl;
  if (IsLeaf(impl)) {
    if (impl.grad.defined()) {
      // A gradient marked zero is filled first: 0 + g, the bits of
      // ZeroGrad then Backward (only kernels writing in place skip it).
      TANDEM_RETURN_IF_ERROR(WriteMarkedZero(impl));
      return AddInPlace(impl.grad, g);
    }
    if (IsUniquelyOwned(g)) {
      impl.grad = std::move(g);
    } else {
      TANDEM_ASSIGN_OR_RETURN(impl.grad, CopyOf(g));
    }
    return absl::OkStatus();
  }
  if (!slot.buffer.defined()) {
    slot.owned = IsUniquelyOwned(g);
    slot.buffer = std::move(g);
  } else if (slot.owned) {
    TANDEM_RETURN_IF_ERROR(AddInPlace(slot.buffer, g));
  } else if (IsUniquelyOwned(g)) {
    TANDEM_RETURN_IF_ERROR(AddInPlace(g, slot.buffer));
    slot.buffer = std::move(g);
    slot.owned = true;
  } else {
    TANDEM_ASSIGN_OR_RETURN(slot.buffer, ::tandem::Add(slot.buffer, g));
    slot.owned = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<GradSink::Buffer> GradSink::GetBuffer(int i) {
  if (!needs(i)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the backward of ", node_->name, " asked for a gradient buffer for ",
        "input ", i, ", which does not require grad; check needs(i) first"));
  }
  const Tensor& input = node_->inputs[i];
  internal::Slot& slot = state_->slots.at(input.impl().get());
  TensorImpl& impl = *slot.impl;
  Tensor& target = IsLeaf(impl) ? impl.grad : slot.buffer;
  if (target.defined() && IsLeaf(impl) && impl.grad_marked_zero) {
    // Marked zero (MarkGradZero): the kernel overwrites it in place.
    impl.grad_marked_zero = false;
    return Buffer{target, /*accumulate=*/false};
  }
  if (target.defined()) {
    if (!IsLeaf(impl) && !slot.owned) {
      TANDEM_ASSIGN_OR_RETURN(target, CopyOf(target));
      slot.owned = true;
    }
    return Buffer{target, /*accumulate=*/true};
  }
  TANDEM_ASSIGN_OR_RETURN(
      target, Tensor::Empty(input.shape(), input.dtype(), input.device()));
  slot.owned = true;
  return Buffer{target, /*accumulate=*/false};
}

// ---- The engine.

namespace {

void FireHooks(const std::shared_ptr<TensorImpl>& impl) {
  if (impl->hooks.empty()) return;
  // A copy: a hook may add or remove hooks.
  auto hooks = impl->hooks;
  Tensor param(impl);
  for (auto& [handle, hook] : hooks) hook(param);
}

absl::Status RunBackward(const Tensor& root, const Tensor& seed,
                         const BackwardOptions& options) {
  NoGradGuard no_grad;
  internal::BackwardState state;

  // 1. Discover the graph and count incoming edges.
  std::vector<TensorImpl*> stack;
  state.slots[root.impl().get()].impl = root.impl();
  stack.push_back(root.impl().get());
  while (!stack.empty()) {
    TensorImpl* impl = stack.back();
    stack.pop_back();
    if (IsLeaf(*impl)) continue;
    const Node& node = *impl->grad_fn;
    if (node.released) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Backward through ", node.name,
          " a second time: the previous Backward released its saved "
          "tensors; pass BackwardOptions{.retain_graph = true} to the "
          "first Backward if you need to run it twice"));
    }
    for (const Tensor& input : node.inputs) {
      if (!input.defined()) continue;
      internal::Slot& slot = state.slots[input.impl().get()];
      if (slot.impl == nullptr) {
        slot.impl = input.impl();
        stack.push_back(input.impl().get());
      }
      ++slot.pending;
    }
  }

  // 2. Seed the root.
  internal::Slot& root_slot = state.slots.at(root.impl().get());
  if (IsLeaf(*root.impl())) {
    TensorImpl& impl = *root.impl();
    if (impl.grad.defined()) {
      TANDEM_RETURN_IF_ERROR(WriteMarkedZero(impl));
      TANDEM_RETURN_IF_ERROR(AddInPlace(impl.grad, seed));
    } else {
      TANDEM_ASSIGN_OR_RETURN(impl.grad, CopyOf(seed));
    }
    FireHooks(root.impl());
    return absl::OkStatus();
  }
  root_slot.buffer = seed;
  root_slot.owned = false;

  // 3. Run nodes newest first among those whose gradient is complete.
  using Ready = std::pair<uint64_t, TensorImpl*>;
  std::priority_queue<Ready> ready;
  ready.push({root.impl()->grad_fn->sequence_nr, root.impl().get()});
  while (!ready.empty()) {
    TensorImpl* impl = ready.top().second;
    ready.pop();
    internal::Slot& slot = state.slots.at(impl);
    Node& node = *impl->grad_fn;
    Tensor grad = std::move(slot.buffer);
    slot.buffer = Tensor();
    if (!grad.defined()) {
      // No consumer produced a contribution (e.g. all were skipped).
      TANDEM_ASSIGN_OR_RETURN(grad, Tensor::Zeros(impl->shape, impl->dtype,
                                                  impl->storage->device()));
    }
    GradSink sink(&state, &node);
    absl::Status status;
    if (trace::Enabled()) {
      // One event per op, named after the module that recorded it.
      trace::Scope event(node.module.empty()
                             ? node.name
                             : absl::StrCat(node.module, " backward"),
                         "backward");
      event.set_args(trace::Args().Add("op", node.name).str());
      status = node.backward(grad, sink);
    } else {
      status = node.backward(grad, sink);
    }
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("in the backward of ", node.name, ": ",
                                       status.message()));
    }
    grad = Tensor();
    for (const Tensor& input : node.inputs) {
      if (!input.defined()) continue;
      internal::Slot& in = state.slots.at(input.impl().get());
      if (--in.pending > 0) continue;
      if (IsLeaf(*in.impl)) {
        FireHooks(in.impl);
      } else {
        ready.push({in.impl->grad_fn->sequence_nr, in.impl.get()});
      }
    }
    if (!options.retain_graph) {
      node.backward = nullptr;
      node.released = true;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Tensor::Backward(BackwardOptions options) const {
  return Backward(Tensor(), options);
}

absl::Status Tensor::Backward(const Tensor& grad,
                              BackwardOptions options) const {
  if (!defined()) {
    return absl::FailedPreconditionError("Backward on an undefined tensor");
  }
  if (!requires_grad()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Backward on a tensor of shape ", ShapeToString(shape()),
        " that does not require grad: no input of the ops that produced it "
        "requires grad (set_requires_grad(true) on the parameters), or it "
        "was computed under NoGradGuard"));
  }
  Tensor seed = grad;
  if (!seed.defined()) {
    if (numel() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Backward() without a gradient needs a scalar (one element); this "
          "tensor has shape ",
          ShapeToString(shape()),
          ". Reduce it first (Sum, Mean) or call Backward(grad) with a "
          "gradient of that shape"));
    }
    TANDEM_ASSIGN_OR_RETURN(seed, Tensor::Ones(shape(), dtype(), device()));
  } else if (seed.shape() != shape() || seed.dtype() != dtype() ||
             seed.device() != device()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Backward(grad): grad is ", DTypeName(seed.dtype()),
        ShapeToString(seed.shape()), " on ", seed.device().ToString(),
        " but the tensor is ", DTypeName(dtype()), ShapeToString(shape()),
        " on ", device().ToString(), "; they must match"));
  }
  return RunBackward(*this, seed, options);
}

// ---- Tensor's autograd accessors.

bool Tensor::requires_grad() const { return impl_ && impl_->requires_grad; }

absl::Status Tensor::set_requires_grad(bool requires_grad) const {
  if (!impl_) {
    return absl::FailedPreconditionError(
        "set_requires_grad on an undefined tensor");
  }
  if (requires_grad && !IsFloatingPoint(impl_->dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "only floating-point tensors can require grad; this one is ",
        DTypeName(impl_->dtype), ShapeToString(impl_->shape)));
  }
  if (!IsLeaf(*impl_)) {
    if (requires_grad) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot turn off requires_grad on a non-leaf (output of ",
                     impl_->grad_fn->name,
                     "); use Detach() for a tensor outside the graph"));
  }
  impl_->requires_grad = requires_grad;
  return absl::OkStatus();
}

bool Tensor::is_leaf() const { return !impl_ || IsLeaf(*impl_); }

std::string Tensor::grad_fn_name() const {
  return impl_ && impl_->grad_fn ? impl_->grad_fn->name : std::string();
}

Tensor Tensor::grad() const {
  if (!impl_) return Tensor();
  // CPU grads always succeed; a device fill fails only on a broken device,
  // which the next synchronising call reports.
  WriteMarkedZero(*impl_).IgnoreError();
  return impl_->grad;
}

bool Tensor::has_grad() const { return impl_ && impl_->grad.defined(); }

bool Tensor::GradIsViewOf(const Tensor& view) const {
  if (!has_grad() || !view.defined()) return false;
  const Tensor& g = impl_->grad;
  return g.storage() == view.storage() &&
         g.storage_offset() == view.storage_offset();
}

absl::Status Tensor::set_grad(const Tensor& grad) const {
  if (!impl_) {
    return absl::FailedPreconditionError("set_grad on an undefined tensor");
  }
  if (!grad.defined()) {
    impl_->grad = Tensor();
    impl_->grad_marked_zero = false;
    return absl::OkStatus();
  }
  if (grad.shape() != shape() || grad.dtype() != dtype() ||
      grad.device() != device()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "set_grad: the gradient is ", DTypeName(grad.dtype()),
        ShapeToString(grad.shape()), " on ", grad.device().ToString(),
        " but the tensor is ", DTypeName(dtype()), ShapeToString(shape()),
        " on ", device().ToString(), "; they must match"));
  }
  impl_->grad = grad.Detach();  // same storage, no autograd history
  impl_->grad_marked_zero = false;
  return absl::OkStatus();
}

void Tensor::ClearGrad() const {
  if (!impl_) return;
  impl_->grad = Tensor();
  impl_->grad_marked_zero = false;
}

void Tensor::ZeroGrad() const {
  if (impl_ && impl_->grad.defined()) {
    impl_->grad_marked_zero = false;
    // CPU grads always succeed; a device fill fails only on a broken
    // device, which the next synchronising call reports.
    FillInPlace(impl_->grad, 0.0).IgnoreError();
  }
}

void Tensor::MarkGradZero() const {
  if (impl_ && impl_->grad.defined()) impl_->grad_marked_zero = true;
}

absl::StatusOr<HookHandle> Tensor::AddPostAccumulateGradHook(
    PostAccumulateGradHook hook) const {
  if (!impl_ || !IsLeaf(*impl_) || !impl_->requires_grad) {
    return absl::FailedPreconditionError(absl::StrCat(
        "post-accumulate-grad hooks go on leaves that require grad; this "
        "tensor ",
        !impl_ ? "is undefined"
        : !IsLeaf(*impl_)
            ? absl::StrCat("is the output of ", impl_->grad_fn->name)
            : "does not require grad"));
  }
  const HookHandle handle = impl_->next_hook_handle++;
  impl_->hooks.emplace_back(handle, std::move(hook));
  return handle;
}

bool Tensor::RemovePostAccumulateGradHook(HookHandle handle) const {
  if (!impl_) return false;
  auto& hooks = impl_->hooks;
  for (auto it = hooks.begin(); it != hooks.end(); ++it) {
    if (it->first == handle) {
      hooks.erase(it);
      return true;
    }
  }
  return false;
}

}  // namespace tandem
