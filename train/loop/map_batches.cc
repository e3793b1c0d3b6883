#include "train/loop/map_batches.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/amp/autocast.h"
#include "tensor/autograd/autograd.h"
#include "tensor/generator.h"
#include "tensor/tensor.h"
#include "train/parallel/core/virtual_world.h"

namespace tandem::train {
namespace {

absl::StatusOr<Tensor> InDType(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  return t.To(dtype);
}

}  // namespace

absl::StatusOr<MapBatches> MapBatches::Create(
    std::shared_ptr<const MapDataset> data, std::vector<int64_t> indices,
    const comm::Communicator& comm, const MapBatchOptions& options) {
  TANDEM_ASSIGN_OR_RETURN(
      const VirtualWorld vw,
      PlaceVirtualWorld(options.virtual_world, comm.size(), comm.rank()));
  std::vector<Replica> replicas;
  for (int64_t v = 0; v < vw.local; ++v) {
    TANDEM_ASSIGN_OR_RETURN(
        DistributedSampler sampler,
        DistributedSampler::Create(
            static_cast<int64_t>(indices.size()),
            {.num_replicas = vw.on() ? vw.size : comm.size(),
             .rank = vw.rank_of(v),
             .seed = options.seed}));
    replicas.push_back({std::move(sampler), vw.rank_of(v), std::nullopt});
  }
  return MapBatches(std::move(data), std::move(indices), std::move(replicas),
                    options);
}

absl::StatusOr<int64_t> MapBatches::BeginEpoch(int64_t epoch) {
  int64_t steps = 0;
  for (Replica& r : replicas_) {
    r.sampler.SetEpoch(epoch);
    std::vector<int64_t> order = r.sampler.Indices();
    for (int64_t& i : order) i = indices_[static_cast<size_t>(i)];
    // Keyed by the (virtual) rank, never by who plays it.
    Generator augment(options_.seed * 1000003 +
                      static_cast<uint64_t>(epoch) * 7919 +
                      static_cast<uint64_t>(r.rank) * 104729 + 17);
    TANDEM_ASSIGN_OR_RETURN(
        DataLoader loader,
        DataLoader::Create(data_, std::move(order), options_.batch_size,
                           /*drop_last=*/true, augment,
                           {.num_workers = options_.num_workers}));
    r.loader.emplace(std::move(loader));
    steps = r.loader->num_batches();  // equal shards: the same everywhere
  }
  return steps;
}

absl::StatusOr<Batch> MapBatches::GetBatch(int64_t step) {
  return GetReplicaBatch(step, 0);
}

absl::StatusOr<Batch> MapBatches::GetReplicaBatch(int64_t step, int64_t v) {
  if (v < 0 || v >= replicas()) {
    return absl::InvalidArgumentError(
        absl::StrCat("MapBatches: replica ", v, " of ", replicas()));
  }
  Replica& r = replicas_[v];
  if (!r.loader.has_value()) {
    return absl::FailedPreconditionError(
        "MapBatches: no epoch prepared yet; call BeginEpoch first");
  }
  TANDEM_ASSIGN_OR_RETURN(Batch batch, r.loader->GetBatch(step));
  TANDEM_ASSIGN_OR_RETURN(batch.features,
                          InDType(batch.features, options_.dtype));
  return batch;
}

absl::StatusOr<Score> HeldOutTop1(TrainingLoop& loop,
                                  std::shared_ptr<const MapDataset> data,
                                  const std::vector<int64_t>& indices,
                                  const MapBatchOptions& options) {
  comm::Communicator& comm = loop.comm();
  const Device device = loop.options().device;
  const std::optional<DType> autocast = loop.options().autocast;
  loop.model().Eval();
  std::vector<double> counts = {0, 0};
  {
    NoGradGuard no_grad;
    // Rank r scores r, r + W, ...; in the virtual world virtual rank k
    // scores k, k + K, ..., so the batches do not depend on W.
    const VirtualWorld& vw = loop.strategy().virtual_world();
    const size_t stride = vw.on() ? vw.size : comm.size();
    for (int64_t v = 0; v < vw.local; ++v) {
      std::vector<int64_t> mine;
      for (size_t i = vw.rank_of(v); i < indices.size(); i += stride) {
        mine.push_back(indices[i]);
      }
      Generator unused(0);
      TANDEM_ASSIGN_OR_RETURN(
          DataLoader loader,
          DataLoader::Create(data, std::move(mine), options.batch_size,
                             /*drop_last=*/false, unused,
                             {.num_workers = options.num_workers}));
      for (int64_t b = 0; b < loader.num_batches(); ++b) {
        TANDEM_ASSIGN_OR_RETURN(Batch batch, loader.GetBatch(b));
        TANDEM_ASSIGN_OR_RETURN(Tensor x,
                                InDType(batch.features, options.dtype));
        Tensor logits;
        std::optional<amp::Autocast> region;
        if (DistributedDataParallel* ddp = loop.strategy().mutable_ddp()) {
          if (x.device() != device) {
            TANDEM_ASSIGN_OR_RETURN(x, x.To(device));
          }
          if (autocast.has_value()) region.emplace(device.type(), *autocast);
          TANDEM_ASSIGN_OR_RETURN(logits, ddp->Forward(x));
        } else {
          TANDEM_ASSIGN_OR_RETURN(
              logits, EvalForward(loop.strategy(), x, device, autocast));
        }
        TANDEM_ASSIGN_OR_RETURN(const int64_t correct,
                                CountCorrect(logits, batch.labels));
        counts[0] += static_cast<double>(correct);
        counts[1] += static_cast<double>(batch.labels.numel());
      }
    }
  }
  loop.model().Train();
  TANDEM_RETURN_IF_ERROR(SumOverRanks(comm, device, counts));
  return Score{.correct = static_cast<int64_t>(counts[0]),
               .total = static_cast<int64_t>(counts[1])};
}

}  // namespace tandem::train
