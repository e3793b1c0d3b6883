// tandem::nn::Module — the base of every layer and model, after
// torch.nn.Module.
//
// A Module owns named parameters (leaf tensors that require grad), named
// buffers (state that is saved but not trained) and named submodules, each in
// registration order. Names of nested entries are dotted paths, exactly as in
// PyTorch: a Sequential's first Linear contributes "0.weight" and "0.bias".
// That order is the contract DDP (bucketing, broadcast) and checkpoints rely
// on, and it matches PyTorch's named_parameters() / state_dict().
//
// Parameters are handles (tandem::Tensor aliases), so what Parameters()
// returns IS the module's storage: an optimizer that updates them in place,
// or DDP that points their grads into a flat bucket, changes the module.
//
// Writing a model:
//
//   class Mlp : public tandem::nn::Module {
//    public:
//     static absl::StatusOr<std::unique_ptr<Mlp>> Create(tandem::Generator&
//     gen) {
//       auto m = std::unique_ptr<Mlp>(new Mlp());
//       TANDEM_ASSIGN_OR_RETURN(m->fc1_, m->RegisterModule(
//           "fc1", tandem::nn::Linear::Create(2, 30, gen)));
//       TANDEM_ASSIGN_OR_RETURN(m->fc2_, m->RegisterModule(
//           "fc2", tandem::nn::Linear::Create(30, 2, gen)));
//       return m;
//     }
//     absl::StatusOr<tandem::Tensor> Forward(const tandem::Tensor& x) override
//     {
//       TANDEM_ASSIGN_OR_RETURN(tandem::Tensor h, fc1_->Forward(x));
//       TANDEM_ASSIGN_OR_RETURN(h, tandem::Relu(h));
//       return fc2_->Forward(h);
//     }
//     std::string_view type_name() const override { return "Mlp"; }
//    private:
//     Mlp() = default;
//     tandem::nn::Linear* fc1_ = nullptr;  // owned by the Module base
//     tandem::nn::Linear* fc2_ = nullptr;
//   };
//
// Modules are neither copyable nor movable: submodule pointers and parameter
// handles held elsewhere (optimizers, DDP) must stay valid. Hold them in a
// std::unique_ptr.
//
// Thread-safety: a module is used by one thread at a time (each simulated
// rank builds its own model).
#ifndef TANDEM_TENSOR_NN_MODULE_H_
#define TANDEM_TENSOR_NN_MODULE_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/device.h"
#include "tensor/tensor.h"

namespace tandem::nn {

// One entry of a parameter list or state dict.
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// A state dict: parameters and buffers in PyTorch's state_dict() order.
// The tensors alias the module's storage (like PyTorch, which returns
// detached views): Clone() them to keep a snapshot that later training
// doesn't change.
using StateDict = std::vector<NamedTensor>;

// A copy of `state` with every tensor cloned into fresh storage.
absl::StatusOr<StateDict> CloneStateDict(const StateDict& state);

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The computation. Errors (shape or dtype mismatch) come back as Status
  // naming the module and the shapes involved.
  virtual absl::StatusOr<Tensor> Forward(const Tensor& input) = 0;
  absl::StatusOr<Tensor> operator()(const Tensor& input) {
    return Forward(input);
  }

  // The class name, as PyTorch prints it: "Linear", "Sequential", ...
  virtual std::string_view type_name() const = 0;
  // The part between the parentheses of PyTorch's repr, e.g.
  // "in_features=2, out_features=30, bias=True". Empty by default.
  virtual std::string ExtraRepr() const { return ""; }
  // PyTorch's repr(module), children indented on their own lines:
  //   Sequential(
  //     (0): Linear(in_features=2, out_features=30, bias=True)
  //     (1): ReLU()
  //   )
  std::string ToString() const;

  // ---- Introspection, in registration order (depth first: a module's own
  // parameters come before its children's, as in PyTorch).
  std::vector<NamedTensor> NamedParameters() const;
  std::vector<Tensor> Parameters() const;
  std::vector<NamedTensor> NamedBuffers() const;
  std::vector<Tensor> Buffers() const;
  // Direct children only.
  std::vector<std::pair<std::string, Module*>> NamedChildren() const;
  int64_t NumParameters() const;  // total element count of Parameters()

  // ---- Mode. Recursive, like module.train(mode) / module.eval().
  void Train(bool on = true);
  void Eval() { Train(false); }
  bool is_training() const { return training_; }

  // ---- State dict.
  // Parameters and buffers of this module and its descendants, each
  // module's own parameters, then its own buffers, then its children's
  // entries (PyTorch's order). Tensors are Detach()ed aliases.
  // (Inside this class the type is spelled nn::StateDict, because this
  // method shares its name.)
  nn::StateDict StateDict() const;
  // Copies `state`'s values into this module's parameters and buffers in
  // place (their storage and any views of it, e.g. DDP buckets, stay). All
  // problems are collected and reported at once, and nothing is copied
  // unless every check passes:
  //   - a key the module has but `state` lacks (missing),
  //   - with `strict`, a key `state` has but the module lacks (unexpected),
  //   - a shape or dtype different from the module's.
  // InvalidArgument names the module type, every offending key and both
  // shapes/dtypes.
  absl::Status LoadStateDict(const nn::StateDict& state, bool strict = true);

  // Gradients of all parameters: by default zeroed in place (keeping
  // aliases such as DDP bucket views: PyTorch 1.13's
  // zero_grad(set_to_none=False)); with set_to_none, dropped.
  void ZeroGrad(bool set_to_none = false);
  // Gradients of all parameters marked zero without being written
  // (Tensor::MarkGradZero): the next backward overwrites them, sparing the
  // fill and the GEMMs' read of the old gradient. For a step whose
  // gradients only autograd writes (a local or DDP step; not ZeRO's or
  // FSDP's shards, which those write themselves).
  void MarkGradsZero();

  // ---- Placement.
  // Moves every parameter and buffer of this module and its descendants,
  // and the parameters' gradients, to `device` IN PLACE, like PyTorch's
  // module.to(device):
  //
  //   TANDEM_RETURN_IF_ERROR(model->To(Device::CUDA(rank)));
  //
  // Each tensor keeps its identity (its TensorImpl) and only the memory
  // behind it is replaced, so every handle to a parameter follows: an
  // optimizer created before or after, Parameters() results held elsewhere,
  // registered hooks. Tensors that share one allocation (views of one flat
  // buffer, a gradient viewing a bucket) still share one allocation
  // afterwards, at the same offsets. Tensors already on `device` are left
  // alone. Blocks until the copies are complete.
  //
  // All or nothing: every allocation and copy is made before any tensor is
  // changed, so an error (no allocator for the device, e.g. CUDA without a
  // GPU or in a build without CUDA; out of memory) leaves the module as it
  // was; the message names the device and the first tensor that could not
  // move.
  //
  // What does NOT follow: other tensors that view the same memory through
  // their own handle (a Detach()ed alias, a View taken earlier, the flat
  // buckets of a DistributedDataParallel) and optimizer state that already
  // exists (momentum buffers are made at the first Step()). So move the model
  // first, then wrap it in DDP and step the optimizer, as in PyTorch.
  absl::Status To(Device device);

  // ---- Replacing a child (e.g. ConvertSyncBatchNorm, train/parallel).
  // Swaps the direct child `name` for `replacement` (which takes its place,
  // name and position, so state-dict names stay) and returns the old child,
  // now owned by the caller. `replacement` gets this module's training mode.
  // Only children for which CanReplaceChild(name) is true: a module that
  // keeps its own pointers to its children (Sequential's layer list, a
  // block's typed members) must update them in ChildReplaced, or its
  // Forward would still call the old child. Errors: no child `name`
  // (NotFound), null replacement (InvalidArgument), this module does not
  // support it (FailedPrecondition naming its type); nothing changes then.
  absl::StatusOr<std::unique_ptr<Module>> ReplaceChild(
      const std::string& name, std::unique_ptr<Module> replacement);
  // Whether ReplaceChild(name, ...) works on this module. False by default.
  virtual bool CanReplaceChild(const std::string& name) const {
    (void)name;
    return false;
  }

 protected:
  // Called by ReplaceChild after the swap: point any cached pointer from
  // `old_child` to `replacement`. Overridden with CanReplaceChild().
  virtual void ChildReplaced(Module* old_child, Module* replacement) {
    (void)old_child;
    (void)replacement;
  }

  // Registers a trainable parameter under `name` and makes it a leaf that
  // requires grad (the Tensor handle is shared, not copied). Errors: empty
  // name, a '.' in it, a duplicate name (among parameters, buffers and
  // children), an undefined or non-floating tensor, a non-leaf tensor.
  absl::Status RegisterParameter(std::string name, const Tensor& param);
  // Registers state that is saved in the state dict but not trained. Same
  // name rules; any dtype.
  absl::Status RegisterBuffer(std::string name, const Tensor& buffer);
  // Adopts `module` as a child named `name`; returns the non-owning pointer
  // (valid as long as this module lives). Same name rules; null is an error.
  absl::StatusOr<Module*> RegisterModule(std::string name,
                                         std::unique_ptr<Module> module);
  // Typed conveniences: take a Create() result directly.
  template <typename M>
  absl::StatusOr<M*> RegisterModule(std::string name,
                                    absl::StatusOr<std::unique_ptr<M>> module) {
    if (!module.ok()) return module.status();
    M* raw = module->get();
    absl::StatusOr<Module*> added = RegisterModule(
        std::move(name), std::unique_ptr<Module>(std::move(module).value()));
    if (!added.ok()) return added.status();
    return raw;
  }
  template <typename M>
  absl::StatusOr<M*> RegisterModule(std::string name,
                                    std::unique_ptr<M> module) {
    return RegisterModule<M>(
        std::move(name), absl::StatusOr<std::unique_ptr<M>>(std::move(module)));
  }

 private:
  absl::Status CheckNewName(const char* kind, const std::string& name) const;
  void CollectParameters(const std::string& prefix,
                         std::vector<NamedTensor>& out) const;
  void CollectBuffers(const std::string& prefix,
                      std::vector<NamedTensor>& out) const;
  void CollectState(const std::string& prefix, nn::StateDict& out) const;
  void AppendRepr(std::string& out) const;

  bool training_ = true;
  std::vector<NamedTensor> parameters_;
  std::vector<NamedTensor> buffers_;
  std::vector<std::pair<std::string, std::unique_ptr<Module>>> children_;
};

}  // namespace tandem::nn

#endif  // TANDEM_TENSOR_NN_MODULE_H_
