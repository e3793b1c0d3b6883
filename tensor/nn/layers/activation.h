// Activation layers: ReLU and Softmax, after torch.nn.
//
//   tandem::nn::Sequential model;
//   TANDEM_RETURN_IF_ERROR(model.Append(tandem::nn::Linear::Create(784, 10,
//   gen)));
//   TANDEM_RETURN_IF_ERROR(model.Append(std::make_unique<tandem::nn::ReLU>()));
//   TANDEM_RETURN_IF_ERROR(model.Append(std::make_unique<tandem::nn::Softmax>(1)));
//
// Each forwards to one op of tensor/ops.h and has no parameters or state.
#ifndef TANDEM_TENSOR_NN_LAYERS_ACTIVATION_H_
#define TANDEM_TENSOR_NN_LAYERS_ACTIVATION_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"

namespace tandem::nn {

// max(x, 0) elementwise; the gradient at 0 is 0, as in PyTorch.
class ReLU : public Module {
 public:
  absl::StatusOr<Tensor> Forward(const Tensor& input) override;
  std::string_view type_name() const override { return "ReLU"; }
};

// Softmax along `dim` (negative counts from the end). PyTorch's nn.Softmax
// has no default dim worth relying on, so it is required here.
class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : dim_(dim) {}
  absl::StatusOr<Tensor> Forward(const Tensor& input) override;
  std::string_view type_name() const override { return "Softmax"; }
  std::string ExtraRepr() const override;
  int64_t dim() const { return dim_; }

 private:
  int64_t dim_;
};

}  // namespace tandem::nn

#endif  // TANDEM_TENSOR_NN_LAYERS_ACTIVATION_H_
