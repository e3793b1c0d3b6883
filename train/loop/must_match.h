// What a resume must match: of the entries an example's ranks agree on at
// start-up (flags and derived values, train/parallel/core/config_agreement.h),
// all but those a resume may change without changing what the steps it
// continues compute. LoopOptions::must_match takes the result; the
// checkpoint records it and a resume that differs is refused naming each
// difference (train/checkpoint/training_checkpoint.h).
//
//   options.must_match = MustMatchOnResume(agreed_entries);
//
// May change on a resume (kMayChangeOnResume): the run's length (--epochs,
// --max_steps: a longer run continues the same steps; where a schedule's
// shape depends on the length, the example adds that as its own entry),
// the checkpoint folder and cadence, what is printed, and digits_ddp's
// --shard (its checkpoint holds an unsharded run's files in every mode, and
// every mode computes DDP's numbers). Everything else (seeds, batch sizes,
// learning rates, the model, the data's identity, mixed precision, gpt_ddp's
// --parallel, whose optimizer state is laid out per mode) must match. The world
// size is compared by the checkpoint itself.
#ifndef TANDEM_TRAIN_LOOP_MUST_MATCH_H_
#define TANDEM_TRAIN_LOOP_MUST_MATCH_H_

#include <string>
#include <utility>
#include <vector>

#include "train/parallel/core/config_agreement.h"

namespace tandem::train {

// The names a resume may change.
const std::vector<std::string>& MayChangeOnResume();

// `agreed` without the entries MayChangeOnResume() names, as the
// checkpoint's (name, value) pairs, in order.
std::vector<std::pair<std::string, std::string>> MustMatchOnResume(
    const std::vector<ConfigEntry>& agreed);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LOOP_MUST_MATCH_H_
