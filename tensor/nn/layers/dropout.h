// tandem::nn::Dropout — after torch.nn.Dropout(p).
//
//   tandem::Generator gen(seed);  // the rank's generator
//   TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<tandem::nn::Dropout> drop,
//                           tandem::nn::Dropout::Create(0.1, gen));
//   TANDEM_ASSIGN_OR_RETURN(tandem::Tensor h, drop->Forward(x));
//
// In training mode (the default) Forward is tandem::Dropout(x, p, true,
// gen): each call draws a fresh mask from `gen` as PyTorch's CPU dropout
// draws it; after eval() (is_training() false) it returns x and draws
// nothing. No parameters, no state besides p.
//
// Ownership and threads: the module keeps a reference to `gen`, which must
// outlive it; Forward advances that generator, so one module (or one
// generator) must not be used by two threads at once.
#ifndef TANDEM_TENSOR_NN_LAYERS_DROPOUT_H_
#define TANDEM_TENSOR_NN_LAYERS_DROPOUT_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "tensor/generator.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"

namespace tandem::nn {

class Dropout : public Module {
 public:
  // InvalidArgument for p outside [0, 1] (or NaN), naming p.
  static absl::StatusOr<std::unique_ptr<Dropout>> Create(double p,
                                                         Generator& gen);

  absl::StatusOr<Tensor> Forward(const Tensor& input) override;
  std::string_view type_name() const override { return "Dropout"; }
  std::string ExtraRepr() const override;

  double p() const { return p_; }

 private:
  Dropout(double p, Generator& gen) : p_(p), gen_(&gen) {}

  double p_;
  Generator* gen_;  // not owned
};

}  // namespace tandem::nn

#endif  // TANDEM_TENSOR_NN_LAYERS_DROPOUT_H_
