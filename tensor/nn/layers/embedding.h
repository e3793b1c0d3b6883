// tandem::nn::Embedding — a lookup table of rows, after torch.nn.Embedding.
//
//   tandem::Generator gen(0);
//   TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<tandem::nn::Embedding> wte,
//                           tandem::nn::Embedding::Create(256, 64, gen));
//   TANDEM_ASSIGN_OR_RETURN(tandem::Tensor h, wte->Forward(tokens));
//   // tokens [B, T] (i64 or i32) -> h [B, T, 64]
//
// One parameter, "weight" [num_embeddings, embedding_dim], initialised like
// PyTorch's reset_parameters(): normal_(0, 1) drawn from `gen`, so after the
// same seed the values equal torch.nn.Embedding's bit for bit
// (torch.manual_seed(s); torch.nn.Embedding(V, D).weight). Forward is the
// tandem::Embedding op: a dense gradient for the weight; an index outside
// [0, num_embeddings) is an error naming it.
#ifndef TANDEM_TENSOR_NN_LAYERS_EMBEDDING_H_
#define TANDEM_TENSOR_NN_LAYERS_EMBEDDING_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "tensor/generator.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"

namespace tandem::nn {

class Embedding : public Module {
 public:
  // Errors: negative sizes, a dtype other than f32/f64, allocation failure.
  static absl::StatusOr<std::unique_ptr<Embedding>> Create(
      int64_t num_embeddings, int64_t embedding_dim, Generator& gen,
      DType dtype = DType::kF32);

  absl::StatusOr<Tensor> Forward(const Tensor& indices) override;
  std::string_view type_name() const override { return "Embedding"; }
  std::string ExtraRepr() const override;

  int64_t num_embeddings() const { return num_embeddings_; }
  int64_t embedding_dim() const { return embedding_dim_; }
  // A handle aliasing the registered parameter.
  const Tensor& weight() const { return weight_; }

 private:
  Embedding(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}

  int64_t num_embeddings_;
  int64_t embedding_dim_;
  Tensor weight_;
};

}  // namespace tandem::nn

#endif  // TANDEM_TENSOR_NN_LAYERS_EMBEDDING_H_
