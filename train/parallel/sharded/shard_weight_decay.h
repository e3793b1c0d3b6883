// Per-parameter weight decay on flat shards: ZeRO-1/2 and FSDP step flat
// shards whose elements belong to several parameters, so an optimizer over
// the shards cannot have the parameters' param groups (nanoGPT's decay /
// no-decay split: weight decay on matrices and embeddings, none on biases
// and LayerNorm). The groups are given instead as an optimizer over the
// model's own parameters (what the same factory builds under DDP, e.g.
// AdamW::Create(optim::WeightDecayGroups(model.NamedParameters(), 0.1))),
// and each shard element then takes the weight decay of its parameter's
// group (optim::Optimizer::SetElementWeightDecay), so every mode steps the
// same weights. Strategy (strategy.h) does this for zero1, zero2 and fsdp.
//
//   TANDEM_ASSIGN_OR_RETURN(auto groups, make(model->Parameters()));
//   ... wrap: ZeroRedundancyOptimizer or FullyShardedDataParallel ...
//   TANDEM_RETURN_IF_ERROR(ApplyParamGroupWeightDecay(
//       *groups, named, zero->shard_layout(), zero->local_optimizer()));
//
// Local (no communication); reads `groups`, writes only `local`'s weight
// decay runs; belongs to the rank's thread.
#ifndef TANDEM_TRAIN_PARALLEL_SHARDED_SHARD_WEIGHT_DECAY_H_
#define TANDEM_TRAIN_PARALLEL_SHARDED_SHARD_WEIGHT_DECAY_H_

#include <vector>

#include "absl/status/status.h"
#include "tensor/nn/module.h"
#include "tensor/optim/optimizer.h"
#include "train/parallel/sharded/sharded_optimizer_state.h"

namespace tandem::train {

// `groups`: an optimizer over the model's parameters (`model_params`, the
// model's NamedParameters() in order, which the layout's member indices
// refer to). `layout`: how `local`'s tensors map onto them (ShardLayout).
// When the groups' weight decays differ, gives each of `local`'s tensors
// runs with its elements' parameters' weight decay (padding: 0); when they
// agree, changes nothing (`local`, built by the same factory, has it).
// `local` may be null (a rank without elements). InvalidArgument: a model
// parameter in no group (a shard steps every element), groups that differ
// in anything but weight_decay (one shard holds elements of several
// groups; say which), or an optimizer without per-element weight decay
// (Unimplemented, from SetElementWeightDecay).
absl::Status ApplyParamGroupWeightDecay(
    const optim::Optimizer& groups,
    const std::vector<nn::NamedTensor>& model_params,
    const std::vector<FlatShard>& layout, optim::Optimizer* local);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_SHARDED_SHARD_WEIGHT_DECAY_H_
