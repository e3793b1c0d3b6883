// deprecated: use train/parallel/strategy.h (ShardedTrainer is Strategy).
#ifndef TANDEM_TRAIN_EXAMPLES_SHARD_MODE_H_
#define TANDEM_TRAIN_EXAMPLES_SHARD_MODE_H_
#include "train/parallel/strategy.h"  // IWYU pragma: export
namespace tandem::train {
using ShardedTrainer = Strategy;
}  // namespace tandem::train
#endif  // TANDEM_TRAIN_EXAMPLES_SHARD_MODE_H_
