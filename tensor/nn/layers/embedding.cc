#include "tensor/nn/layers/embedding.h"

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/nn/init.h"
#include "tensor/ops.h"

namespace tandem::nn {

absl::StatusOr<std::unique_ptr<Embedding>> Embedding::Create(
    int64_t num_embeddings, int64_t embedding_dim, Generator& gen,
    DType dtype) {
  if (num_embeddings < 0 || embedding_dim < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nn::Embedding: num_embeddings and embedding_dim must be >= 0, got ",
        num_embeddings, " and ", embedding_dim));
  }
  if (dtype != DType::kF32 && dtype != DType::kF64) {
    return absl::InvalidArgumentError(
        absl::StrCat("nn::Embedding: dtype must be f32 or f64, got ",
                     std::string(DTypeName(dtype))));
  }
  std::unique_ptr<Embedding> layer(
      new Embedding(num_embeddings, embedding_dim));
  TANDEM_ASSIGN_OR_RETURN(
      layer->weight_, Tensor::Empty({num_embeddings, embedding_dim}, dtype));
  // PyTorch's reset_parameters(): init.normal_(self.weight).
  TANDEM_RETURN_IF_ERROR(init::Normal(layer->weight_, 0.0, 1.0, gen));
  TANDEM_RETURN_IF_ERROR(layer->RegisterParameter("weight", layer->weight_));
  return layer;
}

absl::StatusOr<Tensor> Embedding::Forward(const Tensor& indices) {
  return ::tandem::Embedding(indices, weight_);
}

std::string Embedding::ExtraRepr() const {
  return absl::StrCat(num_embeddings_, ", ", embedding_dim_);
}

}  // namespace tandem::nn
