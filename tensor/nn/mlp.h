// tandem::nn::Mlp — the multi-layer perceptron PyTorch scripts write as
// nn.Sequential(nn.Linear(a, b), nn.ReLU(), nn.Linear(b, c), ...).
//
//   tandem::Generator gen(123);   // torch.manual_seed(123)
//   TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<tandem::nn::Sequential> mlp,
//                           tandem::nn::Mlp({2, 30, 20, 2}, gen));
//   // Linear(2, 30), ReLU, Linear(30, 20), ReLU, Linear(20, 2):
//   // "0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"
//
// The Linears are created in order, each drawing its initial weights from
// `gen` as nn.Linear's constructor does, so after the same seed the weights
// equal PyTorch's for the same nn.Sequential.
#ifndef TANDEM_TENSOR_NN_MLP_H_
#define TANDEM_TENSOR_NN_MLP_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/sequential.h"

namespace tandem::nn {

// Linear(sizes[i], sizes[i + 1]) for each i, a ReLU between two Linears and
// none after the last. Errors: fewer than two sizes (InvalidArgument naming
// the count), Linear::Create's (a negative size).
absl::StatusOr<std::unique_ptr<Sequential>> Mlp(
    const std::vector<int64_t>& sizes, Generator& gen);

}  // namespace tandem::nn

#endif  // TANDEM_TENSOR_NN_MLP_H_
