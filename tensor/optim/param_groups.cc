#include "tensor/optim/param_groups.h"

#include <unordered_set>
#include <utility>
#include <vector>

#include "tensor/nn/module.h"
#include "tensor/optim/adamw.h"

namespace tandem::optim {

WeightDecaySplit SplitForWeightDecay(
    const std::vector<nn::NamedTensor>& named) {
  WeightDecaySplit split;
  std::unordered_set<const void*> seen;
  for (const nn::NamedTensor& nt : named) {
    if (!nt.tensor.defined() || !nt.tensor.requires_grad()) continue;
    if (!seen.insert(nt.tensor.impl().get()).second) continue;
    (nt.tensor.ndim() >= 2 ? split.decay : split.no_decay).push_back(nt);
  }
  return split;
}

std::vector<AdamWParamGroup> WeightDecayGroups(
    const std::vector<nn::NamedTensor>& named, double weight_decay) {
  WeightDecaySplit split = SplitForWeightDecay(named);
  std::vector<AdamWParamGroup> groups(2);
  for (const nn::NamedTensor& nt : split.decay) {
    groups[0].params.push_back(nt.tensor);
  }
  for (const nn::NamedTensor& nt : split.no_decay) {
    groups[1].params.push_back(nt.tensor);
  }
  groups[0].weight_decay = weight_decay;
  groups[1].weight_decay = 0.0;
  return groups;
}

std::vector<AdamWParamGroup> WeightDecayGroups(std::vector<Tensor> params,
                                               double weight_decay) {
  std::vector<AdamWParamGroup> groups(2);
  groups[0].weight_decay = weight_decay;
  groups[1].weight_decay = 0.0;
  for (Tensor& p : params) {
    groups[p.ndim() >= 2 ? 0 : 1].params.push_back(std::move(p));
  }
  return groups;
}

}  // namespace tandem::optim
