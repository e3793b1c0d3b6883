// tandem::optim::Sgd — stochastic gradient descent with momentum, dampening,
// Nesterov momentum and weight decay, exactly torch.optim.SGD.
//
//   tandem::optim::SgdOptions options;
//   options.momentum = 0.9;
//   TANDEM_ASSIGN_OR_RETURN(tandem::optim::Sgd sgd,
//       tandem::optim::Sgd::Create(model->Parameters(), /*lr=*/0.05, options));
//   TANDEM_RETURN_IF_ERROR(sgd.Step());
//
// For each parameter p with gradient g (PyTorch's update):
//   g = -g                                 if maximize
//   g = g + weight_decay * p               if weight_decay != 0
//   if momentum != 0:
//     b = g on the parameter's first step, else b = momentum * b + (1 -
//     dampening) * g g = g + momentum * b                 if nesterov, else g =
//     b
//   p = p - lr * g
// Scalars are rounded to the parameter's dtype and each "x + a * y" is one
// fused multiply-add, as in ATen's add(alpha=) kernel, so results are
// bit-identical to PyTorch (see sgd_test.cc). Momentum buffers are created
// on a parameter's first step that has a gradient.
#ifndef TANDEM_TENSOR_OPTIM_SGD_H_
#define TANDEM_TENSOR_OPTIM_SGD_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/optim/optimizer.h"
#include "tensor/tensor.h"

namespace tandem::optim {

struct SgdOptions {
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
};

class Sgd : public Optimizer {
 public:
  // Errors (InvalidArgument, in PyTorch's wording, e.g. "Invalid learning
  // rate: -1"): lr, momentum or weight_decay negative; any of them or
  // dampening inf or nan (PyTorch accepts those; the run would be nan);
  // nesterov without momentum > 0 and dampening == 0; a bad parameter list
  // (see Optimizer).
  static absl::StatusOr<Sgd> Create(std::vector<Tensor> params, double lr,
                                    SgdOptions options = {});

  // The hyper-parameter half of Create's checks, for callers that want to
  // reject a bad flag before building a model (the examples: a usage error,
  // exit 2, before any rank starts).
  static absl::Status CheckHyperParameters(double lr,
                                           const SgdOptions& options = {});

  absl::Status Step() override;
  // "<i>.momentum_buffer" for every parameter with a buffer.
  std::vector<StateEntry> ExportState() const override;
  absl::Status ImportState(const std::vector<StateEntry>& state) override;

  const SgdOptions& options() const { return options_; }
  // Parameter i's momentum buffer; undefined before its first step (or
  // without momentum).
  const Tensor& momentum_buffer(size_t i) const { return buffers_.at(i); }

 private:
  Sgd(std::vector<Tensor> params, double lr, SgdOptions options)
      : Optimizer(std::move(params), lr),
        options_(options),
        buffers_(params_.size()) {}

  SgdOptions options_;
  std::vector<Tensor> buffers_;  // one per parameter, allocated lazily
};

}  // namespace tandem::optim

#endif  // TANDEM_TENSOR_OPTIM_SGD_H_
