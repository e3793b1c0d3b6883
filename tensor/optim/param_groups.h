// nanoGPT's parameter groups for AdamW (model.py, configure_optimizers):
// weight decay on every parameter of two or more dimensions (matrices,
// embeddings), none on the others (biases, LayerNorm weights and biases).
//
//   TANDEM_ASSIGN_OR_RETURN(
//       optim::AdamW adam,
//       optim::AdamW::Create(
//           optim::WeightDecayGroups(model->NamedParameters(), 0.1),
//           {.lr = 6e-4, .beta1 = 0.9, .beta2 = 0.95}));
//
// Pure functions over tensor handles; thread-safe.
#ifndef TANDEM_TENSOR_OPTIM_PARAM_GROUPS_H_
#define TANDEM_TENSOR_OPTIM_PARAM_GROUPS_H_

#include <string>
#include <vector>

#include "tensor/nn/module.h"
#include "tensor/optim/adamw.h"

namespace tandem::optim {

// The split, in `named`'s order within each half. Like nanoGPT (which reads
// model.named_parameters()): a tensor listed twice under two names (a tied
// weight) is taken once, under its first name; parameters that do not
// require a gradient are left out.
struct WeightDecaySplit {
  std::vector<nn::NamedTensor> decay;     // ndim >= 2
  std::vector<nn::NamedTensor> no_decay;  // ndim < 2
};
WeightDecaySplit SplitForWeightDecay(const std::vector<nn::NamedTensor>& named);

// Two AdamW groups: {decay, weight_decay = `weight_decay`} then
// {no_decay, weight_decay = 0}, as nanoGPT's optim_groups (either may be
// empty; AdamW::Create refuses only an empty whole).
std::vector<AdamWParamGroup> WeightDecayGroups(
    const std::vector<nn::NamedTensor>& named, double weight_decay);

// The same two groups over plain tensors, each kept as given (no tie or
// requires-grad filter): what a factory of a sharded run builds over the
// rank's 1-d shards (all no-decay; train/parallel/sharded/shard_weight_decay.h
// then gives each element its parameter's decay) and over the model's
// parameters alike.
std::vector<AdamWParamGroup> WeightDecayGroups(std::vector<Tensor> params,
                                               double weight_decay);

}  // namespace tandem::optim

#endif  // TANDEM_TENSOR_OPTIM_PARAM_GROUPS_H_
