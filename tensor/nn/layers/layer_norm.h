// tandem::nn::LayerNorm — layer normalisation over the trailing dims, after
// torch.nn.LayerNorm (PyTorch 1.13 semantics).
//
//   TANDEM_ASSIGN_OR_RETURN(auto ln, tandem::nn::LayerNorm::Create(384));
//   TANDEM_ASSIGN_OR_RETURN(tandem::Tensor y, ln->Forward(x));  // [*, 384]
//
// Parameters, in this order: "weight" (ones) and "bias" (zeros), each of
// normalized_shape; absent without Options::elementwise_affine. No buffers.
// y = (x - mean) / sqrt(var + eps) * weight + bias over the trailing dims
// (tandem::LayerNorm, tensor/ops.h): the same in training and eval.
//
// Thread-safety: as Module (one thread at a time).
#ifndef TANDEM_TENSOR_NN_LAYERS_LAYER_NORM_H_
#define TANDEM_TENSOR_NN_LAYERS_LAYER_NORM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"

namespace tandem::nn {

class LayerNorm : public Module {
 public:
  struct Options {
    double eps = 1e-5;
    bool elementwise_affine = true;
    DType dtype = DType::kF32;  // f32 or f64
  };

  // Errors: an empty normalized_shape or a dim < 1, eps negative or not
  // finite, dtype not f32/f64.
  static absl::StatusOr<std::unique_ptr<LayerNorm>> Create(
      Shape normalized_shape, const Options& options);
  static absl::StatusOr<std::unique_ptr<LayerNorm>> Create(
      Shape normalized_shape);  // default Options
  // normalized_shape = {dim}.
  static absl::StatusOr<std::unique_ptr<LayerNorm>> Create(
      int64_t dim, const Options& options);
  static absl::StatusOr<std::unique_ptr<LayerNorm>> Create(int64_t dim);

  // x [*, normalized_shape] of the module's dtype (f16/bf16 computed in
  // f32, output in x's dtype).
  absl::StatusOr<Tensor> Forward(const Tensor& x) override;
  std::string_view type_name() const override { return "LayerNorm"; }
  // "(384,), eps=1e-05, elementwise_affine=True"
  std::string ExtraRepr() const override;

  const Shape& normalized_shape() const { return normalized_shape_; }
  const Options& options() const { return options_; }
  // Undefined without elementwise_affine.
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  LayerNorm(Shape normalized_shape, const Options& options)
      : normalized_shape_(std::move(normalized_shape)), options_(options) {}

  Shape normalized_shape_;
  Options options_;
  Tensor weight_;
  Tensor bias_;
};

}  // namespace tandem::nn

#endif  // TANDEM_TENSOR_NN_LAYERS_LAYER_NORM_H_
