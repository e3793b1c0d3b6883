// Test-only helpers of the rank pipeline tests and benchmark: a model of
// blocks (Linear + ReLU, the last a bare Linear) that can be built whole or
// as one stage's consecutive blocks with the same weights, the stage
// partition, deterministic batches, and the unsplit reference step.
#ifndef TANDEM_TRAIN_PARALLEL_PIPELINE_PIPELINE_TEST_MODEL_H_
#define TANDEM_TRAIN_PARALLEL_PIPELINE_PIPELINE_TEST_MODEL_H_

#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/status_macros.h"
#include "tensor/autograd/autograd.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "train/parallel/devices/device_transfer.h"

namespace tandem::train::pipeline_test {

inline constexpr int64_t kIn = 6, kHidden = 12, kOut = 3, kBlocks = 4;

// Blocks [first, last) of the model of seed `seed`: every block's weights
// are drawn in order from one generator, so a stage's blocks hold the same
// values as in the whole model.
inline absl::StatusOr<std::unique_ptr<nn::Sequential>> Blocks(uint64_t seed,
                                                              int64_t first,
                                                              int64_t last) {
  Generator gen(seed);
  auto model = std::make_unique<nn::Sequential>();
  for (int64_t b = 0; b < kBlocks; ++b) {
    const int64_t in = b == 0 ? kIn : kHidden;
    const int64_t out = b == kBlocks - 1 ? kOut : kHidden;
    TANDEM_ASSIGN_OR_RETURN(auto linear, nn::Linear::Create(in, out, gen));
    if (b < first || b >= last) continue;
    TANDEM_RETURN_IF_ERROR(model->Append(std::move(linear)));
    if (b < kBlocks - 1) {
      TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
    }
  }
  return model;
}

// Stage `stage` of `stages` gets blocks [first, last): as even as can be,
// the later stages the larger (2 stages: 2 + 2; 3: 1 + 1 + 2).
inline std::pair<int64_t, int64_t> StageBlocks(int64_t stages, int64_t stage) {
  auto start = [&](int64_t s) {
    return s * (kBlocks / stages) +
           std::max<int64_t>(0, s - (stages - kBlocks % stages));
  };
  return {start(stage), start(stage + 1)};
}

// A deterministic batch, different per `step`.
inline absl::StatusOr<Tensor> Batch(int64_t rows, int64_t cols, double phase) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<float>(std::cos(0.37 * static_cast<double>(i) + phase));
  }
  return Tensor::FromVector(v, {rows, cols});
}

// The unsplit model's step with the pipeline's arithmetic: micro-batches
// (tensor_split) in order, each loss back-propagated unscaled, then every
// gradient divided by the number of micro-batches. Returns the mean loss.
inline absl::StatusOr<double> ReferenceStep(nn::Module& model, const Tensor& x,
                                            const Tensor& target,
                                            int64_t chunks) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                          TensorSplitSizes(x.dim(0), chunks));
  TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> xs, SplitRows(x, sizes));
  TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> ts, SplitRows(target, sizes));
  double sum = 0;
  for (size_t k = 0; k < xs.size(); ++k) {
    TANDEM_ASSIGN_OR_RETURN(Tensor y, model.Forward(xs[k]));
    TANDEM_ASSIGN_OR_RETURN(Tensor loss, Mse(y, ts[k]));
    sum += loss.ToVector<float>().value()[0];
    TANDEM_RETURN_IF_ERROR(loss.Backward());
  }
  const int64_t m = static_cast<int64_t>(xs.size());
  if (m > 1) {
    NoGradGuard no_grad;
    for (const Tensor& p : model.Parameters()) {
      TANDEM_ASSIGN_OR_RETURN(Tensor q, Div(p.grad(), static_cast<double>(m)));
      TANDEM_RETURN_IF_ERROR(p.grad().CopyFrom(q));
    }
  }
  return sum / static_cast<double>(m);
}

// Every parameter's values (or gradients) flattened, in order.
inline std::vector<float> Flat(nn::Module& model, bool grads) {
  std::vector<float> out;
  for (const Tensor& p : model.Parameters()) {
    const Tensor t = grads ? p.grad() : p;
    std::vector<float> v = t.ToVector<float>().value();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace tandem::train::pipeline_test

#endif  // TANDEM_TRAIN_PARALLEL_PIPELINE_PIPELINE_TEST_MODEL_H_
