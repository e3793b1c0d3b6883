// tandem::nn::Flatten — reshapes to fewer dims, after torch.nn.Flatten.
//
//   TANDEM_RETURN_IF_ERROR(model.Append(std::make_unique<tandem::nn::Flatten>()));
//   // [N, C, H, W] -> [N, C*H*W]
//
// The output is a view of the input (no copy); gradients flow through it.
#ifndef TANDEM_TENSOR_NN_LAYERS_FLATTEN_H_
#define TANDEM_TENSOR_NN_LAYERS_FLATTEN_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"

namespace tandem::nn {

// Merges dims start_dim..end_dim (inclusive) into one, as a view:
// [N, C, H, W] -> [N, C*H*W] with the defaults (1, -1), like nn.Flatten.
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : start_dim_(start_dim), end_dim_(end_dim) {}
  absl::StatusOr<Tensor> Forward(const Tensor& input) override;
  std::string_view type_name() const override { return "Flatten"; }
  std::string ExtraRepr() const override;

 private:
  int64_t start_dim_;
  int64_t end_dim_;
};

}  // namespace tandem::nn

#endif  // TANDEM_TENSOR_NN_LAYERS_FLATTEN_H_
