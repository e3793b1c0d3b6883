// The host update loops of Sgd and AdamW, shared by the optimizers' CPU path
// and by device libraries whose memory is host memory (tensor/sim_device/), so
// both compute bit-identical updates. Internal: not for users.
#ifndef TANDEM_TENSOR_OPTIM_UPDATE_KERNELS_H_
#define TANDEM_TENSOR_OPTIM_UPDATE_KERNELS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tensor/optim/adamw.h"
#include "tensor/optim/sgd.h"

namespace tandem::optim::internal {

// One parameter's update; see sgd.h for the formula. `buf` is null without
// momentum; `first` says the buffer must be initialised to the gradient.
template <typename T>
void SgdUpdate(T* p, const T* g, T* buf, bool first, int64_t n,
               const SgdOptions& o, double lr) {
  const T wd = static_cast<T>(o.weight_decay);
  const T momentum = static_cast<T>(o.momentum);
  const T keep = static_cast<T>(1 - o.dampening);
  const T neg_lr = static_cast<T>(-lr);
  const bool decay = o.weight_decay != 0;
  if (buf == nullptr && !decay && !o.maximize) {  // plain SGD: p -= lr g
    for (int64_t i = 0; i < n; ++i) p[i] = std::fma(g[i], neg_lr, p[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    T d = o.maximize ? -g[i] : g[i];
    if (decay) d = std::fma(p[i], wd, d);
    if (buf != nullptr) {
      buf[i] = first ? d : std::fma(d, keep, buf[i] * momentum);
      d = o.nesterov ? std::fma(buf[i], momentum, d) : buf[i];
    }
    p[i] = std::fma(d, neg_lr, p[i]);
  }
}

struct AdamWScalars {
  double decay;       // 1 - lr * weight_decay
  double step_size;   // lr / (1 - beta1^t)
  double bias2_sqrt;  // sqrt(1 - beta2^t)
};

// One parameter's update in ATen's operation order (torch/optim/adamw.py,
// _single_tensor_adamw): param.mul_(decay); exp_avg.mul_(b1).add_(g,
// alpha=1-b1); exp_avg_sq.mul_(b2).addcmul_(g, g, value=1-b2);
// denom = (exp_avg_sq.sqrt() / bias2_sqrt).add_(eps);
// param.addcdiv_(exp_avg, denom, value=-step_size).
template <typename T>
void AdamWUpdate(T* p, const T* g, T* m, T* v, T* v_max, int64_t n,
                 const AdamWOptions& o, const AdamWScalars& s) {
  const T decay = static_cast<T>(s.decay);
  const T beta1 = static_cast<T>(o.beta1);
  const T one_minus_beta1 = static_cast<T>(1 - o.beta1);
  const T beta2 = static_cast<T>(o.beta2);
  const T one_minus_beta2 = static_cast<T>(1 - o.beta2);
  const T bias2_sqrt = static_cast<T>(s.bias2_sqrt);
  const T eps = static_cast<T>(o.eps);
  const T neg_step = static_cast<T>(-s.step_size);
  for (int64_t i = 0; i < n; ++i) {
    const T grad = o.maximize ? -g[i] : g[i];
    p[i] = p[i] * decay;
    m[i] = std::fma(grad, one_minus_beta1, m[i] * beta1);
    v[i] = std::fma(one_minus_beta2 * grad, grad, v[i] * beta2);
    T second = v[i];
    if (v_max != nullptr) {
      v_max[i] = std::max(v_max[i], v[i]);
      second = v_max[i];
    }
    const T denom = std::sqrt(second) / bias2_sqrt + eps;
    p[i] = p[i] + (neg_step * m[i]) / denom;
  }
}

}  // namespace tandem::optim::internal

#endif  // TANDEM_TENSOR_OPTIM_UPDATE_KERNELS_H_
