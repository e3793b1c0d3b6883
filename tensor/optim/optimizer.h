// tandem::optim::Optimizer — the base of Sgd and AdamW, after torch.optim.
//
// An optimizer holds handles to the parameters it updates (the same tensors
// a Module's Parameters() returns) and, per parameter, its own state
// (momentum buffers, moment estimates). Step() updates every parameter that
// has a gradient, IN PLACE in its existing storage — never by swapping in a
// new tensor — so views of the parameters (DDP's flat buffers, a
// LoadStateDict'ed model) stay valid. Parameters without a gradient are
// skipped and their state is left alone, as PyTorch does.
//
//   TANDEM_ASSIGN_OR_RETURN(tandem::optim::Sgd sgd,
//       tandem::optim::Sgd::Create(model->Parameters(), /*lr=*/0.1));
//   for (...) {
//     sgd.ZeroGrad();
//     TANDEM_ASSIGN_OR_RETURN(tandem::Tensor loss, ...forward...);
//     TANDEM_RETURN_IF_ERROR(loss.Backward());
//     TANDEM_RETURN_IF_ERROR(sgd.Step());
//   }
//
// The arithmetic reproduces PyTorch 1.13's single-tensor CPU implementation
// operation by operation (scalars rounded to the parameter's dtype, fused
// multiply-adds where ATen's kernels fuse), so a run from the same weights
// and gradients gives bit-identical parameters on x86-64.
//
// Supported parameters: leaves of dtype f32 or f64, on the CPU or on a CUDA
// device (state tensors are created on the parameter's device). On CUDA the
// fused update kernels do the same operations in the same order without
// contracting multiply-adds the CPU does not fuse, so they match the CPU
// update bit for bit (checked on a GPU by tensor/cuda/training_cuda_test.cc).
// Thread-safety: an optimizer and its parameters are used by one thread at a
// time (each simulated rank owns its model and optimizer).
#ifndef TANDEM_TENSOR_OPTIM_OPTIMIZER_H_
#define TANDEM_TENSOR_OPTIM_OPTIMIZER_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/tensor.h"

namespace tandem::optim {

// One tensor of an optimizer's per-parameter state, for checkpoints. `name`
// is "<parameter index>.<key>", PyTorch's optimizer.state_dict()["state"]
// flattened: "0.momentum_buffer" (Sgd), "3.exp_avg", "3.exp_avg_sq",
// "3.max_exp_avg_sq", "3.step" (AdamW).
struct StateEntry {
  std::string name;
  Tensor tensor;
};

// One parameter group's hyper-parameters, for checkpoints: PyTorch's
// optimizer.state_dict()["param_groups"][g]. `params` are indices into
// Optimizer::params() (the groups' parameters numbered in order, as PyTorch
// numbers them); `options` holds "lr" and the optimizer's per-group keys
// (AdamW: "beta1", "beta2", "eps", "weight_decay"; Sgd: "momentum",
// "dampening", "weight_decay").
struct ParamGroupState {
  std::vector<int64_t> params;
  std::map<std::string, double> options;
};

// Elements [begin, end) of one parameter (in its flattened order) and the
// weight decay they take (Optimizer::SetElementWeightDecay).
struct WeightDecayRun {
  int64_t begin = 0;
  int64_t end = 0;
  double weight_decay = 0;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(Optimizer&&) = default;
  Optimizer& operator=(Optimizer&&) = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient, on the parameter's
  // device (CUDA parameters use fused device kernels, queued on the calling
  // thread's current stream: see tensor/cuda/cuda.h). Errors (a gradient
  // whose dtype or device differs from its parameter's) leave the parameters
  // after the failing one unchanged and name the parameter's index.
  virtual absl::Status Step() = 0;

  // Gradients of all parameters: zeroed in place by default (keeping
  // gradients that alias DDP buckets; PyTorch 1.13's
  // zero_grad(set_to_none=False)), or dropped with set_to_none.
  void ZeroGrad(bool set_to_none = false);

  // The per-parameter state (see StateEntry), for checkpoints: parameters
  // without state (never stepped) have no entries. The tensors alias the
  // optimizer's state: serialize or Clone() them before the next Step().
  virtual std::vector<StateEntry> ExportState() const = 0;
  // Replaces the whole per-parameter state with `state` (an ExportState()
  // result, e.g. read back from a checkpoint), copying the tensors onto each
  // parameter's device; parameters without entries lose their state (as
  // torch's optimizer.load_state_dict). All or nothing: an unknown name, a
  // parameter index out of range, a tensor whose shape or dtype differs from
  // its parameter's (or a step that is not an i64 scalar >= 1), or an
  // incomplete set (AdamW needs step, exp_avg and exp_avg_sq together) is an
  // InvalidArgument naming the entry, and the state is left as it was.
  virtual absl::Status ImportState(const std::vector<StateEntry>& state) = 0;

  // Every group's parameters, group after group (PyTorch's numbering of
  // optimizer state).
  const std::vector<Tensor>& params() const { return params_; }

  // Parameter groups (torch.optim's param_groups): group g is params()
  // [group_begin(g), group_end(g)), with a learning rate of its own and the
  // optimizer's per-group options (see AdamW, Sgd). An optimizer built from
  // a plain parameter list has one group.
  size_t num_param_groups() const { return groups_.size(); }
  size_t group_begin(size_t g) const { return groups_.at(g).begin; }
  size_t group_end(size_t g) const { return groups_.at(g).end; }
  // Group 0's learning rate (the only one without groups).
  double lr() const { return groups_.front().lr; }
  double lr(size_t g) const { return groups_.at(g).lr; }
  // For learning-rate schedules; takes effect at the next Step(). set_lr(lr)
  // sets every group's; set_lr(g, lr) group g's (OutOfRange for a g past the
  // groups). A negative or non-finite value is InvalidArgument (see
  // CheckHyperParameter) and changes nothing.
  absl::Status set_lr(double lr);
  absl::Status set_lr(size_t g, double lr);

  // Per-element weight decay, for an optimizer that steps flat shards
  // mixing parameters of several param groups (ZeRO's and FSDP's:
  // train/parallel/sharded/shard_weight_decay.h): parameter i's elements take
  // each run's weight_decay instead of their group's (every other option stays
  // the group's), with the group's arithmetic, so a shard steps as the
  // parameters it holds would in their own groups. `runs` cover [0, numel)
  // in order, without gaps, each weight_decay finite and >= 0; empty
  // restores the group's. InvalidArgument naming the parameter otherwise
  // (nothing changes); Unimplemented by default (AdamW implements it).
  virtual absl::Status SetElementWeightDecay(size_t i,
                                             std::vector<WeightDecayRun> runs);

  // The groups as PyTorch's state_dict()["param_groups"]: one entry per
  // group, its parameter indices and hyper-parameters.
  std::vector<ParamGroupState> ExportParamGroups() const;
  // Restores the groups' hyper-parameters (lr included) from an
  // ExportParamGroups() result, as torch's load_state_dict does. All or
  // nothing: a different number of groups, a group whose parameter indices
  // differ from this optimizer's, a missing or unknown key, or a value that
  // Create would refuse is InvalidArgument naming the group and key.
  absl::Status ImportParamGroups(const std::vector<ParamGroupState>& groups);

  // The hyper-parameter check every optimizer's Create runs: OK when `value`
  // is finite and `meets_rule` (the caller evaluates PyTorch's rule, e.g.
  // lr >= 0). Otherwise InvalidArgument in PyTorch's wording plus the rule and
  // what to do, e.g. "Sgd: Invalid learning rate: inf (lr must be finite and
  // >= 0): pass a finite lr >= 0; inf and nan would turn every parameter into
  // nan". `who` is "Sgd"/"AdamW"; `pytorch_name` is PyTorch's phrase
  // ("learning rate", "momentum value", "beta parameter at index 0");
  // `option` the option's name ("lr", "momentum", "beta1"); `rule` the rule
  // as text (">= 0", "in [0, 1)"; "" when only finiteness is asked). PyTorch
  // lets inf and nan through; tandem does not.
  static absl::Status CheckHyperParameter(std::string_view who,
                                          std::string_view pytorch_name,
                                          std::string_view option, double value,
                                          bool meets_rule,
                                          std::string_view rule);

 protected:
  // Group g covers params_[begin, end).
  struct Group {
    size_t begin = 0;
    size_t end = 0;
    double lr = 0;
  };

  // `groups` cover `params` in order, without gaps (empty groups allowed).
  Optimizer(std::vector<Tensor> params, std::vector<Group> groups)
      : params_(std::move(params)), groups_(std::move(groups)) {}

  // The group holding parameter i.
  size_t GroupOf(size_t i) const;

  // The derived optimizer's per-group keys (not "lr"), for
  // ExportParamGroups.
  virtual std::map<std::string, double> GroupOptions(size_t g) const = 0;
  // Replaces every group's options (one map per group, each with exactly
  // the keys GroupOptions gives, "lr" already removed). All or nothing;
  // InvalidArgument naming the group and key otherwise.
  virtual absl::Status SetGroupOptions(
      const std::vector<std::map<std::string, double>>& options) = 0;
  // For SetGroupOptions: reads each of `keys` from group g's `options` into
  // its double. InvalidArgument naming the group and key when one is missing
  // or `options` holds a key not in `keys`.
  static absl::Status ReadGroupOptions(
      size_t g, const std::map<std::string, double>& options,
      const std::vector<std::pair<std::string, double*>>& keys);

  // SetElementWeightDecay's check of `runs` against parameter i.
  absl::Status CheckWeightDecayRuns(
      std::string_view who, size_t i,
      const std::vector<WeightDecayRun>& runs) const;

  // Checks what every optimizer needs of its parameter list: non-empty, each
  // defined, a leaf, f32 or f64, no tensor listed twice. `who` prefixes the
  // message ("Sgd", "AdamW").
  static absl::Status ValidateParams(std::string_view who,
                                     const std::vector<Tensor>& params);
  // At Step() time: parameter i's gradient matches it (dtype, element
  // count, device).
  absl::Status CheckStepable(std::string_view who, size_t i) const;

  // Splits a StateEntry name "<i>.<key>" into the parameter index and key.
  // InvalidArgument (prefixed by `who`) for a malformed name or an index out
  // of range.
  absl::Status ParseStateName(std::string_view who, const std::string& name,
                              size_t& index, std::string& key) const;
  // Checks that `t` has parameter i's shape and dtype; returns a copy of it
  // on the parameter's device, in fresh storage.
  absl::StatusOr<Tensor> StateLike(std::string_view who,
                                   const std::string& name, const Tensor& t,
                                   size_t i) const;

  std::vector<Tensor> params_;
  std::vector<Group> groups_;  // at least one
};

}  // namespace tandem::optim

#endif  // TANDEM_TENSOR_OPTIM_OPTIMIZER_H_
