// tandem::train::IndexBatches — an epoch's batches cut from a
// DistributedSampler's order, for a data set that makes a batch from a list
// of its indices (gpt_ddp's token blocks: a batch is the blocks stacked).
//
//   TANDEM_ASSIGN_OR_RETURN(IndexBatches batches, IndexBatches::Create(
//       std::move(sampler), /*per_step=*/8,
//       [&](const std::vector<int64_t>& blocks) -> absl::StatusOr<Batch> {
//         ...  // the blocks as one Batch
//       }));
//   TANDEM_RETURN_IF_ERROR(loop->Run(batches, loss, hooks));
//
// Each epoch: the sampler's SetEpoch(epoch), then its order (this rank's
// shard); step s takes the order's indices [s * per_step, (s + 1) *
// per_step), in order, and make_batch turns them into the step's Batch.
// An epoch has num_samples / per_step steps (what is left over is dropped,
// as drop_last drops a short batch). A function of the sampler's seed and
// the epoch alone, so a resumed epoch takes the same batches.
#ifndef TANDEM_TRAIN_LOOP_INDEX_BATCHES_H_
#define TANDEM_TRAIN_LOOP_INDEX_BATCHES_H_

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "train/data/distributed_sampler.h"
#include "train/loop/training_loop.h"

namespace tandem::train {

class IndexBatches : public EpochBatches {
 public:
  using MakeBatch =
      std::function<absl::StatusOr<Batch>(const std::vector<int64_t>& indices)>;

  // InvalidArgument for per_step < 1 or no make_batch. An epoch of no step
  // (a shard shorter than per_step) is allowed: steps_per_epoch() says so.
  static absl::StatusOr<IndexBatches> Create(DistributedSampler sampler,
                                             int64_t per_step,
                                             MakeBatch make_batch);
  // The virtual world: one sampler per virtual rank this rank plays, in
  // order (DistributedSampler(K, k)); replica v's batches come from the
  // v-th. InvalidArgument for none, or samplers of different lengths.
  static absl::StatusOr<IndexBatches> Create(
      std::vector<DistributedSampler> samplers, int64_t per_step,
      MakeBatch make_batch);

  int64_t steps_per_epoch() const {
    return samplers_[0].num_samples() / per_step_;
  }
  absl::StatusOr<int64_t> BeginEpoch(int64_t epoch) override;
  // FailedPrecondition before BeginEpoch; OutOfRange for a step outside
  // [0, steps_per_epoch()); make_batch's errors as they are.
  absl::StatusOr<Batch> GetBatch(int64_t step) override;
  int64_t replicas() const override {
    return static_cast<int64_t>(samplers_.size());
  }
  absl::StatusOr<Batch> GetReplicaBatch(int64_t step, int64_t v) override;

 private:
  IndexBatches(std::vector<DistributedSampler> samplers, int64_t per_step,
               MakeBatch make_batch)
      : samplers_(std::move(samplers)),
        per_step_(per_step),
        make_batch_(std::move(make_batch)) {}

  std::vector<DistributedSampler> samplers_;  // one per replica
  int64_t per_step_;
  MakeBatch make_batch_;
  std::vector<std::vector<int64_t>> orders_;  // the epoch's, per replica
  bool begun_ = false;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LOOP_INDEX_BATCHES_H_
