// tandem::nn::Linear — y = x W^T + b, after torch.nn.Linear.
//
//   tandem::Generator gen(123);
//   TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<tandem::nn::Linear> fc,
//                           tandem::nn::Linear::Create(2, 30, gen));
//   TANDEM_ASSIGN_OR_RETURN(tandem::Tensor y, fc->Forward(x));  // x [N, 2] ->
//   [N, 30]
//
// Parameters, in this order: "weight" [out_features, in_features], then
// "bias" [out_features] (absent with Options::bias = false). Initialised like
// PyTorch's reset_parameters(): weight by kaiming_uniform_(a = sqrt(5)), then
// bias uniform in +-1/sqrt(in_features), both drawn from `gen` — so after the
// same seed the values are bit-identical to torch.nn.Linear's.
//
// Forward takes [N, in_features] and is one tandem::Linear op: one GEMM
// forward, three GEMMs (or fewer) backward.
#ifndef TANDEM_TENSOR_NN_LAYERS_LINEAR_H_
#define TANDEM_TENSOR_NN_LAYERS_LINEAR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "tensor/generator.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"

namespace tandem::nn {

class Linear : public Module {
 public:
  struct Options {
    bool bias = true;
    DType dtype = DType::kF32;  // f32 or f64
  };

  // Errors: negative sizes, a dtype other than f32/f64, allocation failure.
  static absl::StatusOr<std::unique_ptr<Linear>> Create(int64_t in_features,
                                                        int64_t out_features,
                                                        Generator& gen);
  static absl::StatusOr<std::unique_ptr<Linear>> Create(int64_t in_features,
                                                        int64_t out_features,
                                                        Generator& gen,
                                                        const Options& options);

  absl::StatusOr<Tensor> Forward(const Tensor& input) override;
  std::string_view type_name() const override { return "Linear"; }
  std::string ExtraRepr() const override;

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  // Handles aliasing the registered parameters. bias() is undefined
  // without a bias.
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  Linear(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}

  int64_t in_features_;
  int64_t out_features_;
  Tensor weight_;
  Tensor bias_;
};

}  // namespace tandem::nn

#endif  // TANDEM_TENSOR_NN_LAYERS_LINEAR_H_
