// Fixtures of the loop's scoring tests (evaluate_test, classifier_test): a
// model whose predictions are known and rows it gets partly right.
// Linear(2, 2) with the identity weight and no bias predicts the larger
// feature's index; of SevenRows' 7 rows it gets rows 0-4 right, rows 5 and
// 6 wrong.
#ifndef TANDEM_TRAIN_LOOP_EVAL_TESTING_H_
#define TANDEM_TRAIN_LOOP_EVAL_TESTING_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "base/status_macros.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/tensor.h"
#include "train/data/dataset.h"

namespace tandem::train {

inline absl::StatusOr<TensorDataset> SevenRows() {
  TANDEM_ASSIGN_OR_RETURN(
      Tensor x, Tensor::FromVector<float>(
                    {1, 0, 0, 1, 2, 1, 1, 3, 5, 4, 0, 1, 1, 0}, {7, 2}));
  TANDEM_ASSIGN_OR_RETURN(Tensor y,
                          Tensor::FromVector<int64_t>({0, 1, 0, 1, 0, 0, 1}));
  return TensorDataset::Create(x, y);
}

inline absl::StatusOr<std::unique_ptr<nn::Linear>> IdentityLinear() {
  Generator gen(1);
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Linear> model,
                          nn::Linear::Create(2, 2, gen, {.bias = false}));
  Tensor weight = model->weight();
  float* w = weight.data<float>();
  w[0] = 1, w[1] = 0, w[2] = 0, w[3] = 1;
  return model;
}

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LOOP_EVAL_TESTING_H_
