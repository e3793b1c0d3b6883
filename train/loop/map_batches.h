// A map-style data set (train/data/map_dataset.h: samples made on demand,
// e.g. images decoded and augmented as they are asked for) in the training
// loop: its training batches (MapBatches, the MapDataset twin of
// SampledBatches) and the top-1 score of held-out samples across the ranks
// (HeldOutTop1). resnet_ddp trains and scores its images so:
//
//   const MapBatchOptions options{.batch_size = 32, .seed = seed,
//                                 .num_workers = 4};
//   TANDEM_ASSIGN_OR_RETURN(MapBatches batches, MapBatches::Create(
//       train, train_indices, comm, options));
//   TANDEM_RETURN_IF_ERROR(loop->Run(batches, CrossEntropyLoss(), hooks));
//   TANDEM_ASSIGN_OR_RETURN(Score top1,
//                           HeldOutTop1(*loop, val, val_indices, options));
#ifndef TANDEM_TRAIN_LOOP_MAP_BATCHES_H_
#define TANDEM_TRAIN_LOOP_MAP_BATCHES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "comm/communicator.h"
#include "train/data/data_loader.h"
#include "train/data/distributed_sampler.h"
#include "train/data/map_dataset.h"
#include "train/loop/evaluate.h"
#include "train/loop/training_loop.h"

namespace tandem::train {

struct MapBatchOptions {
  int64_t batch_size = 1;  // samples per rank per batch, >= 1
  // The shuffle's and the augmentations' seed; the same on every rank.
  uint64_t seed = 0;
  int64_t num_workers = 0;  // threads that make a batch (data_loader.h)
  // The batches' features are converted to it (the model's dtype; the
  // samples' float32 widens exactly to f64).
  DType dtype = DType::kF32;
  // The virtual world (docs/virtual_world.md): K > 0 gives the batches of
  // each virtual rank this rank plays (DistributedSampler(K, k)), their
  // augmentations keyed by the virtual rank. 0: this rank's.
  int64_t virtual_world = 0;
};

// This rank's DistributedSampler shard of `indices` (samples of `data`,
// shuffled with the epoch from options.seed, padded to equal shards), in
// batches of options.batch_size (drop_last) made by options.num_workers
// threads. Epoch e's random augmentations on rank r are drawn from
// Generator(seed * 1000003 + e * 7919 + r * 104729 + 17) (DataLoader seeds
// each sample from it): a function of the seed, the epoch and the rank only,
// so a resumed epoch draws the same. In the virtual world
// (MapBatchOptions::virtual_world) the same per virtual rank r.
class MapBatches : public EpochBatches {
 public:
  // Errors: DistributedSampler's (no indices).
  static absl::StatusOr<MapBatches> Create(
      std::shared_ptr<const MapDataset> data, std::vector<int64_t> indices,
      const comm::Communicator& comm, const MapBatchOptions& options);
  // Errors: DataLoader's (a batch size < 1, an index outside `data`).
  absl::StatusOr<int64_t> BeginEpoch(int64_t epoch) override;
  // Errors: the sample's (its file named), FailedPrecondition before
  // BeginEpoch.
  absl::StatusOr<Batch> GetBatch(int64_t step) override;
  int64_t replicas() const override {
    return static_cast<int64_t>(replicas_.size());
  }
  absl::StatusOr<Batch> GetReplicaBatch(int64_t step, int64_t v) override;

 private:
  // One (virtual) rank's shard: its sampler, its rank (the augmentations'
  // key) and the loader of the epoch BeginEpoch prepared.
  struct Replica {
    DistributedSampler sampler;
    int64_t rank = 0;
    std::optional<DataLoader> loader;
  };
  MapBatches(std::shared_ptr<const MapDataset> data,
             std::vector<int64_t> indices, std::vector<Replica> replicas,
             const MapBatchOptions& options)
      : data_(std::move(data)),
        indices_(std::move(indices)),
        replicas_(std::move(replicas)),
        options_(options) {}

  std::shared_ptr<const MapDataset> data_;
  std::vector<int64_t> indices_;
  std::vector<Replica> replicas_;
  MapBatchOptions options_;
};

// Collective: how many of `indices` (samples of `data`) the loop's model
// classifies right. Rank r scores indices[r], indices[r + world size], ...
// (none when it runs out; in the virtual world each virtual rank k it plays
// scores indices[k], indices[k + K], ...) in batches of options.batch_size, the
// last shorter, made by options.num_workers threads from generators that
// Generator(0) seeds (a held-out transform draws nothing), features in
// options.dtype; in eval mode without grad, on the loop's device under its
// autocast, through DDP's Forward where the strategy has DDP (an eval
// Forward broadcasts rank 0's buffers, so every rank scores with the same
// BatchNorm statistics), else Strategy::Forward; the counts summed over the
// ranks. The model is left in training mode. Errors: the data's, the
// model's, the communicator's.
absl::StatusOr<Score> HeldOutTop1(TrainingLoop& loop,
                                  std::shared_ptr<const MapDataset> data,
                                  const std::vector<int64_t>& indices,
                                  const MapBatchOptions& options);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LOOP_MAP_BATCHES_H_
