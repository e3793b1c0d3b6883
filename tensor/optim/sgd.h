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
//
// Parameter groups, as torch.optim.SGD([{'params': a}, {'params': b,
// 'lr': 0.01}], lr=0.1, momentum=0.9): each SgdParamGroup's unset options
// take the defaults'; lr, momentum, dampening and weight_decay may differ
// per group, nesterov and maximize are the optimizer's.
#ifndef TANDEM_TENSOR_OPTIM_SGD_H_
#define TANDEM_TENSOR_OPTIM_SGD_H_

#include <map>
#include <optional>
#include <string>
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

// One parameter group: its parameters and the options it overrides.
struct SgdParamGroup {
  std::vector<Tensor> params = {};
  std::optional<double> lr = std::nullopt;
  std::optional<double> momentum = std::nullopt;
  std::optional<double> dampening = std::nullopt;
  std::optional<double> weight_decay = std::nullopt;
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
  // Parameter groups (see the header comment): Create's checks on every
  // group's resolved options (the message names the group); parameters are
  // numbered group after group; a tensor in two groups is refused.
  static absl::StatusOr<Sgd> Create(std::vector<SgdParamGroup> groups,
                                    double lr, SgdOptions defaults = {});

  // The hyper-parameter half of Create's checks, for callers that want to
  // reject a bad flag before building a model (the examples: a usage error,
  // exit 2, before any rank starts).
  static absl::Status CheckHyperParameters(double lr,
                                           const SgdOptions& options = {});

  absl::Status Step() override;
  // "<i>.momentum_buffer" for every parameter with a buffer.
  std::vector<StateEntry> ExportState() const override;
  absl::Status ImportState(const std::vector<StateEntry>& state) override;

  // The defaults; group_options(g) group g's.
  const SgdOptions& options() const { return options_; }
  const SgdOptions& group_options(size_t g) const {
    return group_options_.at(g);
  }
  // Parameter i's momentum buffer; undefined before its first step (or
  // without momentum).
  const Tensor& momentum_buffer(size_t i) const { return buffers_.at(i); }

 private:
  Sgd(std::vector<Tensor> params, std::vector<Group> groups,
      SgdOptions defaults, std::vector<SgdOptions> group_options)
      : Optimizer(std::move(params), std::move(groups)),
        options_(defaults),
        group_options_(std::move(group_options)),
        buffers_(params_.size()) {}

  static absl::Status CheckHyperParameters(const std::string& who, double lr,
                                           const SgdOptions& options);
  std::map<std::string, double> GroupOptions(size_t g) const override;
  absl::Status SetGroupOptions(
      const std::vector<std::map<std::string, double>>& options) override;

  SgdOptions options_;                     // the defaults
  std::vector<SgdOptions> group_options_;  // one per group
  std::vector<Tensor> buffers_;  // one per parameter, allocated lazily
};

}  // namespace tandem::optim

#endif  // TANDEM_TENSOR_OPTIM_SGD_H_
