// What the training loop's classifier examples share around it (toy_ddp,
// digits_ddp): the epoch's running sums of a classification loss and its
// right predictions, the epoch's report made from them, a held-out set
// scored across the ranks and reported to the monitor, and the DDP
// tutorials' closing accuracy lines.
//
//   TrainingLoop::Create(comm, *model, mode, factory,
//                        {..., .epoch_sums = ClassifierSums()});
//   hooks.after_step = AddClassifierSums;
//   hooks.end_epoch = [&](int64_t epoch, int64_t) -> ... {
//     EpochReport report = ClassifierEpochReport(loop->epoch_sums()); ...
//   };
//   TANDEM_ASSIGN_OR_RETURN(Score test, HeldOutScore(*loop, test_set));
#ifndef TANDEM_TRAIN_LOOP_CLASSIFIER_H_
#define TANDEM_TRAIN_LOOP_CLASSIFIER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "train/data/dataset.h"
#include "train/loop/evaluate.h"
#include "train/loop/run_monitor.h"
#include "train/loop/training_loop.h"

namespace tandem::train {

// LoopOptions::epoch_sums of a classifier: "loss" (the loss times the
// batch's rows), "count" (rows), "correct" (right predictions), in that
// order: the order AddClassifierSums and ClassifierEpochReport use.
std::vector<const char*> ClassifierSums();

// A LoopHooks::after_step: adds the step's loss x rows, its rows and its
// right predictions (CountCorrect of the step's output against the batch's
// labels) to step.sums (ClassifierSums' three). Errors: CountCorrect's.
absl::Status AddClassifierSums(const StepView& step);

// The epoch's report from ClassifierSums summed over every rank
// (TrainingLoop::epoch_sums() in end_epoch): mean loss (loss / count),
// accuracy (correct / count) and samples (count).
EpochReport ClassifierEpochReport(const std::vector<double>& sums);

// Collective: puts the loop's model in eval mode, scores `data` across the
// ranks (StridedScore through the loop's strategy, on its device, under its
// autocast) and reports the score to the monitor (rank 0). The model stays
// in eval mode.
absl::StatusOr<Score> HeldOutScore(TrainingLoop& loop,
                                   const TensorDataset& data);

// The DDP tutorials' closing lines, printed through `print(rank, line)`,
// once per (virtual) rank this rank plays (LoopOptions::virtual_world; this
// rank alone otherwise), for it; then the loop's printer is flushed:
//   "Training accuracy <acc>"  compute_accuracy over this rank's batches of
//                              the last epoch, in its order (`train`
//                              prepared again for epoch max(epochs - 1, 0),
//                              as a run resumed after its last epoch ran
//                              none)
//   "Test accuracy <acc>"      over `test` in order, in train's batch size
// each a f32 ratio (LoaderAccuracy) in Python's float repr, the model in
// eval mode (left so). A loader without rows (the tutorial divides by zero)
// is FailedPrecondition naming the example (LoopOptions::who), the rank and
// the set, and what to change. Local (collective under fsdp).
absl::Status PrintTutorialAccuracies(
    TrainingLoop& loop, SampledBatches& train, const TensorDataset& test,
    const std::function<absl::Status(int64_t rank, const std::string& line)>&
        print);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LOOP_CLASSIFIER_H_
