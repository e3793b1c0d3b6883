// tandem::nn::Sequential — runs its children in order, after
// torch.nn.Sequential.
//
//   tandem::Generator gen(123);
//   tandem::nn::Sequential model;
//   TANDEM_RETURN_IF_ERROR(model.Append(tandem::nn::Linear::Create(2, 30,
//   gen)));
//   TANDEM_RETURN_IF_ERROR(model.Append(std::make_unique<tandem::nn::ReLU>()));
//   TANDEM_RETURN_IF_ERROR(model.Append(tandem::nn::Linear::Create(30, 2,
//   gen))); TANDEM_ASSIGN_OR_RETURN(tandem::Tensor logits, model.Forward(x));
//   // model.NamedParameters(): "0.weight", "0.bias", "2.weight", "2.bias"
//
// Children are named "0", "1", ... in append order, so parameter and state
// dict names match PyTorch's for the same nn.Sequential. Build the layers in
// the order PyTorch's script constructs them: each layer draws its initial
// weights from the generator when it is created.
#ifndef TANDEM_TENSOR_NN_LAYERS_SEQUENTIAL_H_
#define TANDEM_TENSOR_NN_LAYERS_SEQUENTIAL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"

namespace tandem::nn {

class Sequential : public Module {
 public:
  Sequential() = default;

  // Adds `module` as the next layer. A null module is InvalidArgument.
  absl::Status Append(std::unique_ptr<Module> module);
  // Takes a Create() result directly; its error is returned unchanged.
  template <typename M>
  absl::Status Append(absl::StatusOr<std::unique_ptr<M>> module) {
    if (!module.ok()) return module.status();
    return Append(std::unique_ptr<Module>(std::move(module).value()));
  }

  // Feeds `input` through every layer in order (an empty Sequential returns
  // its input). An error names the failing layer's index and type.
  absl::StatusOr<Tensor> Forward(const Tensor& input) override;
  std::string_view type_name() const override { return "Sequential"; }

  int64_t size() const { return static_cast<int64_t>(layers_.size()); }
  // Layer i (negative counts from the end); nullptr when out of range.
  Module* at(int64_t i) const;

  // How Forward calls layer `index`: `layer.Forward(x)` by default; a
  // wrapper that must act around each layer without replacing it (FSDP
  // gathers a unit's parameters before its layer and frees them after,
  // train/parallel/sharded/fsdp.h) installs its own call, which receives the
  // layer and its input and returns the layer's output. Empty restores the
  // plain call. Whoever installs a call keeps what it refers to alive until it
  // clears it (FSDP clears it in its destructor).
  using LayerCall = std::function<absl::StatusOr<Tensor>(
      int64_t index, Module& layer, const Tensor& x)>;
  void SetLayerCall(LayerCall call) { layer_call_ = std::move(call); }

  // ReplaceChild is supported (the layer list follows).
  bool CanReplaceChild(const std::string&) const override { return true; }

 protected:
  void ChildReplaced(Module* old_child, Module* replacement) override;

 private:
  std::vector<Module*> layers_;  // owned by the Module base (children)
  LayerCall layer_call_;         // empty: layers_[i]->Forward(x)
};

}  // namespace tandem::nn

#endif  // TANDEM_TENSOR_NN_LAYERS_SEQUENTIAL_H_
