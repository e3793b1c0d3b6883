// tandem::nn::Wrapper — a module whose forward is one named child's: the
// PyTorch model that keeps its layers in an attribute,
//
//   class NeuralNetwork(nn.Module):
//       def __init__(self):
//           super().__init__()
//           self.layers = nn.Sequential(...)
//       def forward(self, x):
//           return self.layers(x)
//
// written as Wrapper::Create("NeuralNetwork", "layers", std::move(layers)):
// its parameter and state-dict names are PyTorch's ("layers.0.weight"), so
// its checkpoints load into the Python model with load_state_dict, and its
// repr names its type as Python prints it.
#ifndef TANDEM_TENSOR_NN_WRAPPER_H_
#define TANDEM_TENSOR_NN_WRAPPER_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"

namespace tandem::nn {

class Wrapper : public Module {
 public:
  // `child` registered as `child_name` (Module's name rules: not empty, no
  // '.'); the wrapper's type_name() is `type_name`. Errors: a null child
  // (InvalidArgument), a bad name, or `child`'s own error, returned as is.
  static absl::StatusOr<std::unique_ptr<Wrapper>> Create(
      std::string type_name, std::string child_name,
      std::unique_ptr<Module> child);
  template <typename M>
  static absl::StatusOr<std::unique_ptr<Wrapper>> Create(
      std::string type_name, std::string child_name,
      absl::StatusOr<std::unique_ptr<M>> child) {
    if (!child.ok()) return child.status();
    return Create(std::move(type_name), std::move(child_name),
                  std::unique_ptr<Module>(std::move(child).value()));
  }

  // The child's Forward of `input`.
  absl::StatusOr<Tensor> Forward(const Tensor& input) override {
    return child_->Forward(input);
  }
  std::string_view type_name() const override { return type_name_; }

 private:
  explicit Wrapper(std::string type_name) : type_name_(std::move(type_name)) {}

  std::string type_name_;
  Module* child_ = nullptr;  // owned by the Module base
};

}  // namespace tandem::nn

#endif  // TANDEM_TENSOR_NN_WRAPPER_H_
