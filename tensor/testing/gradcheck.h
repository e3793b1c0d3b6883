// Gradient checking by central finite differences (for tests).
//
//   std::mt19937 rng(7);
//   Tensor x = RandomTensor({3, 4}, rng);           // f64, requires grad
//   absl::Status s = GradCheck(
//       [](const std::vector<Tensor>& in) { return Tanh(in[0]); }, {x});
//   EXPECT_TRUE(s.ok()) << s;
//
// GradCheck evaluates f once with autograd, seeds Backward with fixed random
// weights w (so every output element matters: the checked scalar is
// sum(w * f(inputs))), and compares each requires-grad input's gradient with
// (L(x + eps) - L(x - eps)) / (2 eps), element by element. Inputs must be
// f64 CPU leaves; their values are perturbed in place and restored.
// Returns OK or an error naming the input, the element, both values.
#ifndef TANDEM_TENSOR_TESTING_GRADCHECK_H_
#define TANDEM_TENSOR_TESTING_GRADCHECK_H_

#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/tensor.h"

namespace tandem {

struct GradCheckOptions {
  double eps = 1e-6;
  double atol = 1e-7;
  double rtol = 1e-5;
  uint32_t seed = 1234;  // for the output weights w
};

using GradCheckFn =
    std::function<absl::StatusOr<Tensor>(const std::vector<Tensor>&)>;

absl::Status GradCheck(const GradCheckFn& f, const std::vector<Tensor>& inputs,
                       const GradCheckOptions& options = {});

// An f64 CPU tensor with values uniform in [lo, hi), requiring grad.
Tensor RandomTensor(const Shape& shape, std::mt19937& rng, double lo = -1.0,
                    double hi = 1.0, bool requires_grad = true);

}  // namespace tandem

#endif  // TANDEM_TENSOR_TESTING_GRADCHECK_H_
