// Learning-rate schedules, after torch.optim.lr_scheduler (PyTorch 1.13).
//
//   TANDEM_ASSIGN_OR_RETURN(auto sched, optim::WarmupCosineLR::Create(
//       &adam, {.warmup_iters = 100, .lr_decay_iters = 5000,
//               .min_lr = 6e-5}));
//   for (...) {
//     ... backward ...
//     TANDEM_RETURN_IF_ERROR(adam.Step());
//     TANDEM_RETURN_IF_ERROR(sched->Step());
//   }
//
// As in PyTorch, a scheduler records each group's initial lr (base_lrs,
// PyTorch's group['initial_lr']) when it is created, and creating it is its
// first step: last_epoch becomes 0 and the groups get the epoch-0 rate. Each
// Step() then adds one to last_epoch and sets every group's lr
// (Optimizer::set_lr(g, ...)), each from its own base lr. The optimizer's
// step k (0-based, counting from the scheduler's creation) runs at epoch
// k's rate when Step() follows each optimizer step.
//
// Ownership: the optimizer is not owned and must outlive the scheduler.
// Thread-safety: like the optimizer, one thread at a time.
#ifndef TANDEM_TENSOR_OPTIM_LR_SCHEDULER_H_
#define TANDEM_TENSOR_OPTIM_LR_SCHEDULER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/optim/optimizer.h"

namespace tandem::optim {

class LrScheduler {
 public:
  virtual ~LrScheduler() = default;
  LrScheduler(const LrScheduler&) = delete;
  LrScheduler& operator=(const LrScheduler&) = delete;

  // The next epoch: last_epoch + 1, and every group's lr set. A computed
  // rate that is negative or not finite (a LambdaLR factor) is
  // InvalidArgument naming the epoch and group, and changes nothing.
  absl::Status Step();

  int64_t last_epoch() const { return last_epoch_; }
  // Each group's initial lr (PyTorch's base_lrs).
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  // The rates the last Step() set (PyTorch's get_last_lr()).
  const std::vector<double>& last_lr() const { return last_lr_; }

  // State for checkpoints (a training checkpoint's extra metadata, under a
  // prefix of the caller's): "last_epoch", "base_lrs" and "last_lr" (each
  // group's, comma-separated, 17 significant digits: read back exactly).
  std::map<std::string, std::string> StateDict() const;
  // Restores a StateDict() and sets the optimizer's group rates to its
  // last_lr, so the next Step() continues the saved run. All or nothing;
  // InvalidArgument naming the entry for a missing or malformed entry or a
  // group count other than the optimizer's.
  absl::Status LoadStateDict(const std::map<std::string, std::string>& state);

 protected:
  // Records base_lrs from the optimizer's current rates; last_epoch -1.
  explicit LrScheduler(Optimizer* optimizer);
  // The first step (epoch 0); each Create calls it once.
  absl::Status Start() { return Step(); }
  // Every group's rate at last_epoch() (already advanced); may read the
  // optimizer's current rates (PyTorch's recursive forms).
  virtual std::vector<double> ComputeLr() const = 0;

  Optimizer* optimizer_;

 private:
  int64_t last_epoch_ = -1;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
};

// StepLR: lr times gamma every step_size epochs. PyTorch's recursive form
// (what its step() computes): the current lr times gamma at epochs that are
// multiples of step_size, unchanged otherwise; equal to the closed form
// base_lr * gamma^(epoch / step_size) up to rounding.
class StepLR : public LrScheduler {
 public:
  // InvalidArgument: step_size < 1, gamma negative or not finite, a null
  // optimizer.
  static absl::StatusOr<std::unique_ptr<StepLR>> Create(Optimizer* optimizer,
                                                        int64_t step_size,
                                                        double gamma = 0.1);

 private:
  StepLR(Optimizer* optimizer, int64_t step_size, double gamma)
      : LrScheduler(optimizer), step_size_(step_size), gamma_(gamma) {}
  std::vector<double> ComputeLr() const override;
  int64_t step_size_;
  double gamma_;
};

// CosineAnnealingLR: from base_lr to eta_min over T_max epochs, and back up
// over the next T_max (the cosine continues; PyTorch's behaviour). This
// matches PyTorch's RECURSIVE form, the one its step() uses:
//   epoch 0: lr unchanged;
//   (epoch - 1 - T_max) % (2 T_max) == 0:
//       lr + (base_lr - eta_min) (1 - cos(pi / T_max)) / 2;
//   otherwise: (1 + cos(pi epoch / T_max)) / (1 + cos(pi (epoch - 1) /
//       T_max)) (lr - eta_min) + eta_min
// in PyTorch's operation order, so the sequence equals torch's (to 1e-15
// relative: the test); the closed form eta_min + (base_lr - eta_min)(1 +
// cos(pi epoch / T_max)) / 2 differs from it by rounding.
class CosineAnnealingLR : public LrScheduler {
 public:
  // InvalidArgument: t_max < 1, eta_min negative or not finite, a null
  // optimizer.
  static absl::StatusOr<std::unique_ptr<CosineAnnealingLR>> Create(
      Optimizer* optimizer, int64_t t_max, double eta_min = 0);

 private:
  CosineAnnealingLR(Optimizer* optimizer, int64_t t_max, double eta_min)
      : LrScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {}
  std::vector<double> ComputeLr() const override;
  int64_t t_max_;
  double eta_min_;
};

// LambdaLR: lr = base_lr * factor(epoch), one function for every group or
// one per group (PyTorch's lr_lambda list).
class LambdaLR : public LrScheduler {
 public:
  using Factor = std::function<double(int64_t epoch)>;
  // InvalidArgument: a null optimizer or function, a list whose length is
  // not the optimizer's group count, or (from the first step) a factor that
  // makes a rate negative or not finite.
  static absl::StatusOr<std::unique_ptr<LambdaLR>> Create(Optimizer* optimizer,
                                                          Factor factor);
  static absl::StatusOr<std::unique_ptr<LambdaLR>> Create(
      Optimizer* optimizer, std::vector<Factor> factors);

 private:
  LambdaLR(Optimizer* optimizer, std::vector<Factor> factors)
      : LrScheduler(optimizer), factors_(std::move(factors)) {}
  std::vector<double> ComputeLr() const override;
  std::vector<Factor> factors_;
};

// nanoGPT's get_lr(it) (train.py) and llm.c's schedule, per group with
// lr = the group's base lr:
//   it < warmup_iters:        lr * (it + 1) / warmup_iters   (linear warm-up)
//   it > lr_decay_iters:      min_lr
//   otherwise: ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters),
//              min_lr + 0.5 (1 + cos(pi ratio)) (lr - min_lr)
// with it = last_epoch. The warm-up is llm.c's ((it + 1) / warmup_iters
// reaches lr at it = warmup_iters - 1); nanoGPT's train.py has used other
// denominators over time (it / warmup_iters, then (it + 1) /
// (warmup_iters + 1)); the cosine part is nanoGPT's. min_lr is absolute and
// the same for every group, as CosineAnnealingLR's eta_min.
struct WarmupCosineOptions {
  int64_t warmup_iters = 0;
  int64_t lr_decay_iters = 1;
  double min_lr = 0;
};

class WarmupCosineLR : public LrScheduler {
 public:
  // InvalidArgument: warmup_iters < 0, lr_decay_iters <= warmup_iters (the
  // ratio would divide by zero), min_lr negative or not finite, a null
  // optimizer.
  static absl::StatusOr<std::unique_ptr<WarmupCosineLR>> Create(
      Optimizer* optimizer, WarmupCosineOptions options);

  // nanoGPT's get_lr(it) for one group of base rate `lr`.
  static double Rate(const WarmupCosineOptions& options, double lr, int64_t it);

 private:
  WarmupCosineLR(Optimizer* optimizer, WarmupCosineOptions options)
      : LrScheduler(optimizer), options_(options) {}
  std::vector<double> ComputeLr() const override;
  WarmupCosineOptions options_;
};

}  // namespace tandem::optim

#endif  // TANDEM_TENSOR_OPTIM_LR_SCHEDULER_H_
