#include "train/examples/digits_ddp_lib.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "base/input_file.h"
#include "base/status_macros.h"
#include "base/unshared_status.h"
#include "comm/rank_printer.h"
#include "comm/types.h"
#include "tensor/amp/autocast.h"
#include "tensor/autograd.h"
#include "tensor/device.h"
#include "tensor/generator.h"
#include "tensor/nn/activation.h"
#include "tensor/nn/linear.h"
#include "tensor/nn/sequential.h"
#include "tensor/ops.h"
#include "tensor/optim/sgd.h"
#include "train/checkpoint/run_checkpointer.h"
#include "train/checkpoint/training_checkpoint.h"
#include "train/data/csv_dataset.h"
#include "train/data/data_loader.h"
#include "train/data/distributed_sampler.h"
#include "train/data/shared_load.h"
#include "train/examples/broadcast_dataset.h"
#include "train/examples/run_monitor.h"
#include "train/launch/config_agreement.h"
#include "train/parallel/finite_check.h"
#include "train/parallel/staged_all_gather.h"
#include "train/parallel/strategy.h"
#include "train/parallel/tensor_comm.h"

namespace tandem::train {
namespace {

constexpr int64_t kNumClasses = 10;  // the digits 0..9

struct Split {
  TensorDataset train;
  TensorDataset test;
};

// Rows `indices` of `data`, features scaled by `scale`.
absl::StatusOr<TensorDataset> Subset(const TensorDataset& data,
                                     const std::vector<int64_t>& indices,
                                     float scale) {
  TANDEM_ASSIGN_OR_RETURN(
      DataLoader all,
      DataLoader::Create(data, indices, std::max<int64_t>(1, indices.size()),
                         /*drop_last=*/false));
  if (all.num_batches() == 0) {
    return absl::InvalidArgumentError(
        "digits: an empty split; lower test_fraction");
  }
  TANDEM_ASSIGN_OR_RETURN(Batch batch, all.GetBatch(0));
  float* x = batch.features.data<float>();
  for (int64_t i = 0; i < batch.features.numel(); ++i) x[i] *= scale;
  return TensorDataset::Create(batch.features, batch.labels);
}

// The fewest rows that leave at least one test sample (llround of
// test_fraction * rows) and one training sample per rank.
int64_t RowsNeeded(double test_fraction, int64_t world_size) {
  const double lower =
      std::max(0.5 / test_fraction, world_size / (1.0 - test_fraction));
  // No file holds 2^53 rows; this also keeps the cast below defined.
  if (lower > 0x1p53) return INT64_MAX;
  for (int64_t rows = std::max<int64_t>(1, static_cast<int64_t>(lower) - 2);;
       ++rows) {
    const int64_t n_test = std::llround(test_fraction * rows);
    if (n_test >= 1 && rows - n_test >= world_size) return rows;
  }
}

// Loads the CSV, labels checked against the 10 digit classes (so a bad
// label fails at load in either split).
absl::StatusOr<TensorDataset> LoadDigits(const DigitsConfig& config) {
  return LoadCsvDataset(config.data_path, {.num_classes = kNumClasses});
}

// Splits the loaded rows; too few rows for one test sample and one training
// sample per rank is an error naming the count.
absl::StatusOr<Split> SplitDigits(const DigitsConfig& config,
                                  const TensorDataset& data,
                                  int64_t world_size) {
  if (data.features.ndim() != 2 || data.features.dim(1) != 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        config.data_path, ": expected 64 pixel columns and a label, found ",
        ShapeToString(data.features.shape()), " features"));
  }
  const int64_t needed = RowsNeeded(config.test_fraction, world_size);
  if (data.size() < needed) {
    return absl::InvalidArgumentError(absl::StrCat(
        config.data_path, ": ", data.size(), " data row(s); need at least ",
        needed, " for one test sample (test_fraction ", config.test_fraction,
        ") and one training sample on each of ", world_size,
        " rank(s): add rows or use fewer ranks"));
  }
  Generator split_gen(config.split_seed);
  std::vector<int64_t> order = split_gen.Randperm(data.size());
  const int64_t n_test =
      static_cast<int64_t>(std::llround(config.test_fraction * data.size()));
  std::vector<int64_t> test(order.begin(), order.begin() + n_test);
  std::vector<int64_t> train(order.begin() + n_test, order.end());
  // Pixels are 0..16.
  TANDEM_ASSIGN_OR_RETURN(TensorDataset train_set,
                          Subset(data, train, 1.0f / 16));
  TANDEM_ASSIGN_OR_RETURN(TensorDataset test_set,
                          Subset(data, test, 1.0f / 16));
  return Split{std::move(train_set), std::move(test_set)};
}

// A fingerprint of the split the ranks train and test on (features and
// labels, as loaded and scaled), for the ranks-agree check.
uint64_t DatasetHash(const Split& split) {
  uint64_t hash = HashBytes(nullptr, 0);
  for (const TensorDataset* d : {&split.train, &split.test}) {
    for (const Tensor* t : {&d->features, &d->labels}) {
      hash = HashBytes(t->raw_data(), static_cast<size_t>(t->nbytes()), hash);
    }
  }
  return hash;
}

// The split and its hash, shared read-only by every rank of this process.
struct SharedSplit {
  Split split;
  uint64_t hash = 0;
};

// LoadDigits and SplitDigits once per process: the simulated cluster's ranks
// are threads, and 8192 private copies of the data set (and 8192 parses of the
// file) would dominate the run. Keyed by everything the result depends on, the
// file's size and modification time included, so a rewritten file is read
// again. Each rank still draws its own indices (DistributedSampler).
absl::StatusOr<std::shared_ptr<const SharedSplit>> LoadSharedSplit(
    const DigitsConfig& config, int64_t world_size) {
  auto load = [&]() -> absl::StatusOr<SharedSplit> {
    TANDEM_ASSIGN_OR_RETURN(const TensorDataset data, LoadDigits(config));
    TANDEM_ASSIGN_OR_RETURN(Split split, SplitDigits(config, data, world_size));
    const uint64_t hash = DatasetHash(split);
    return SharedSplit{std::move(split), hash};
  };
  // Process-wide and never destroyed: ranks of runs still going at exit may
  // hold entries. Small: one record per distinct key.
  static SharedLoad<SharedSplit>* const cache = new SharedLoad<SharedSplit>();
  // A pipe (--data=<(zcat ...), /dev/stdin) can be read once: the first rank
  // reads it and every other rank of this process shares what it read.
  // A failed read of a pipe is final (what was read is gone): the other
  // ranks get the first rank's error instead of waiting on the pipe again.
  if (IsStreamInput(config.data_path)) {
    static std::mutex* const failed_mu = new std::mutex;
    static auto* const failed = new std::map<std::string, absl::Status>;
    const std::string key =
        absl::StrFormat("%s|stream|%d|%.17g|%d", config.data_path,
                        config.split_seed, config.test_fraction, world_size);
    return cache->Get(key, [&]() -> absl::StatusOr<SharedSplit> {
      std::lock_guard<std::mutex> lock(*failed_mu);
      if (auto it = failed->find(key); it != failed->end()) {
        return UnsharedStatus(it->second);
      }
      absl::StatusOr<SharedSplit> split = load();
      if (!split.ok()) (*failed)[key] = UnsharedStatus(split.status());
      return split;
    });
  }
  std::error_code error;
  const std::uintmax_t size =
      std::filesystem::file_size(config.data_path, error);
  const auto modified =
      error ? std::filesystem::file_time_type()
            : std::filesystem::last_write_time(config.data_path, error);
  if (error) {
    // Not a readable file: let the loader report it, uncached.
    TANDEM_ASSIGN_OR_RETURN(SharedSplit split, load());
    return std::make_shared<const SharedSplit>(std::move(split));
  }
  const std::string key =
      absl::StrFormat("%s|%d|%d|%d|%.17g|%d", config.data_path, size,
                      modified.time_since_epoch().count(), config.split_seed,
                      config.test_fraction, world_size);
  return cache->Get(key, load);
}

// This rank's view of the data. With ranks in separate processes (mpi,
// gloo) a pipe can be read by one of them only: rank 0 reads it and
// broadcasts the rows (whether it is a pipe is rank 0's to say: under
// mpirun the other ranks' stdin is /dev/null). Everything else goes through
// the per-process cache.
absl::StatusOr<std::shared_ptr<const SharedSplit>> LoadSplitForRank(
    const DigitsConfig& config, comm::Communicator& comm) {
  const bool process_per_rank =
      comm.backend() == "mpi" || comm.backend() == "gloo";
  if (!process_per_rank || comm.size() == 1) {
    return LoadSharedSplit(config, comm.size());
  }
  TANDEM_ASSIGN_OR_RETURN(const bool stream,
                          Rank0Says(comm, IsStreamInput(config.data_path)));
  if (!stream) return LoadSharedSplit(config, comm.size());
  TANDEM_ASSIGN_OR_RETURN(const TensorDataset data,
                          LoadOnRank0AndBroadcast(comm, config.data_path, [&] {
                            return LoadDigits(config);
                          }));
  TANDEM_ASSIGN_OR_RETURN(Split split, SplitDigits(config, data, comm.size()));
  const uint64_t hash = DatasetHash(split);
  return std::make_shared<const SharedSplit>(
      SharedSplit{std::move(split), hash});
}

absl::StatusOr<std::unique_ptr<nn::Sequential>> BuildModel(
    const DigitsConfig& c) {
  Generator gen(c.seed);
  auto model = std::make_unique<nn::Sequential>();
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(64, c.hidden, gen)));
  TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(c.hidden, 10, gen)));
  return model;
}

// Sums `values` over every rank, in place. Off the CPU the values travel
// through a staging tensor on `device` (NCCL takes device memory only).
absl::Status AllReduceSum(comm::Communicator& comm, std::vector<double>& values,
                          Device device) {
  if (device.is_cpu()) {
    return comm
        .AllReduce(comm::HostView(absl::MakeSpan(values)), comm::ReduceOp::kSum)
        ->Wait();
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor host, Tensor::FromVector(values));
  TANDEM_ASSIGN_OR_RETURN(Tensor staged, host.To(device));
  TANDEM_ASSIGN_OR_RETURN(comm::BufferView view, ToBufferView(staged));
  TANDEM_RETURN_IF_ERROR(comm.AllReduce(view, comm::ReduceOp::kSum)->Wait());
  TANDEM_ASSIGN_OR_RETURN(host, staged.To(Device::CPU()));
  TANDEM_ASSIGN_OR_RETURN(values, host.ToVector<double>());
  return absl::OkStatus();
}

// How many rows of `logits` have their largest value at `labels`' class.
absl::StatusOr<int64_t> CountCorrect(const Tensor& logits,
                                     const Tensor& labels) {
  NoGradGuard no_grad;
  TANDEM_ASSIGN_OR_RETURN(Tensor predicted, Argmax(logits, -1));
  TANDEM_ASSIGN_OR_RETURN(predicted, predicted.To(Device::CPU()));
  TANDEM_ASSIGN_OR_RETURN(Tensor truth, labels.To(Device::CPU()));
  const int64_t* p = predicted.data<int64_t>();
  const int64_t* y = truth.data<int64_t>();
  int64_t correct = 0;
  for (int64_t i = 0; i < truth.numel(); ++i) correct += p[i] == y[i];
  return correct;
}

// `t` on `device` (itself, no copy, when it is there already).
absl::StatusOr<Tensor> OnDevice(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  return t.To(device);
}

// Each rank takes global_batch_size / world size samples per step; a size
// the world does not divide is refused rather than rounded silently.
absl::Status CheckGlobalBatch(int64_t global_batch_size, int world_size) {
  if (global_batch_size % world_size == 0) return absl::OkStatus();
  const int64_t below = global_batch_size / world_size * world_size;
  const int64_t above = below + world_size;
  return absl::InvalidArgumentError(absl::StrCat(
      "digits_ddp: --global_batch_size=", global_batch_size,
      " is not divisible by ", world_size, " ranks; use ",
      below > 0 ? absl::StrCat(below, " or ") : "", above,
      " (each rank takes global_batch_size / world size samples per step), "
      "or change the number of ranks"));
}

// lr and momentum are checked where the optimizer is built (Sgd::Create:
// PyTorch's rules, and finite).
absl::Status CheckConfig(const DigitsConfig& c) {
  // A million epochs is far beyond any use of this example; more is a typo
  // (or INT64_MAX) that would train for ever rather than fail.
  constexpr int64_t kMaxEpochs = 1000000;
  if (c.epochs < 0 || c.epochs > kMaxEpochs || c.global_batch_size < 1 ||
      c.hidden < 1 || !(c.test_fraction > 0 && c.test_fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("digits_ddp: bad configuration: epochs=", c.epochs,
                     " global_batch_size=", c.global_batch_size,
                     " hidden=", c.hidden, " test_fraction=", c.test_fraction,
                     " (need 0 <= epochs <= ", kMaxEpochs,
                     ", global_batch_size >= 1, hidden >= 1, "
                     "0 < test_fraction < 1)"));
  }
  return absl::OkStatus();
}

// The per-rank epoch sums a mid-epoch checkpoint carries, in the order of
// RunDigitsDdp's loss_sum_and_count: loss * samples, samples, correct.
constexpr const char* kEpochSumNames[] = {"sum", "count", "correct"};

// Every rank's running epoch sums (kEpochSumNames), kept in a
// mid-epoch checkpoint as the doubles' bits (exact), so that the resumed
// epoch's line is the one an uninterrupted run prints. Collective.
absl::StatusOr<checkpoint::Metadata> GatherLossSums(
    comm::Communicator& comm, Device device, const std::vector<double>& sums) {
  constexpr size_t kSums = std::size(kEpochSumNames);
  if (sums.size() != kSums) {
    return absl::InternalError(absl::StrCat(
        "digits_ddp: expected ", kSums, " epoch sums, found ", sums.size()));
  }
  int64_t send[kSums];
  std::memcpy(send, sums.data(), sizeof(send));
  std::vector<int64_t> all(kSums * static_cast<size_t>(comm.size()));
  TANDEM_RETURN_IF_ERROR(
      AllGatherInt64(comm, device, send, absl::MakeSpan(all)));
  checkpoint::Metadata out;
  for (int r = 0; r < comm.size(); ++r) {
    for (size_t i = 0; i < kSums; ++i) {
      out[absl::StrCat("digits.epoch_loss_", kEpochSumNames[i], "_bits.", r)] =
          absl::StrCat(all[kSums * r + i]);
    }
  }
  return out;
}

// This rank's entries of GatherLossSums' result.
absl::StatusOr<std::vector<double>> LossSums(const checkpoint::Metadata& extra,
                                             int rank) {
  std::vector<double> out;
  for (const char* what : kEpochSumNames) {
    const std::string key =
        absl::StrCat("digits.epoch_loss_", what, "_bits.", rank);
    auto it = extra.find(key);
    int64_t bits = 0;
    if (it == extra.end() || !absl::SimpleAtoi(it->second, &bits)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "digits_ddp: the checkpoint has no valid \"", key,
          "\" entry for the epoch it resumes in; start from a fresh "
          "--checkpoint_dir"));
    }
    double v;
    std::memcpy(&v, &bits, sizeof(v));
    out.push_back(v);
  }
  return out;
}

}  // namespace

absl::StatusOr<DigitsResult> RunDigitsDdp(comm::Communicator& comm,
                                          const DigitsConfig& config,
                                          Device device) {
  // First, before any rank can fail alone on its own flags: per-rank flags
  // (mpirun MPMD) would otherwise hang or crash a later collective.
  TANDEM_RETURN_IF_ERROR(CheckRanksAgree(
      comm, device,
      {{"--epochs", config.epochs},
       {"--global_batch_size", config.global_batch_size},
       {"--lr", config.lr},
       {"--momentum", config.momentum},
       {"--hidden", config.hidden},
       {"--seed", config.seed},
       {"--split_seed", config.split_seed},
       {"--test_fraction", config.test_fraction},
       {"--checkpoint_dir", config.checkpoint.dir},
       {"--checkpoint_every", config.checkpoint.every_steps},
       {"--shard", config.shard},
       {"--amp", config.amp.has_value() ? DTypeName(*config.amp) : "off"}}));
  TANDEM_RETURN_IF_ERROR(CheckConfig(config));
  TANDEM_ASSIGN_OR_RETURN(const ShardMode shard, ParseShardMode(config.shard));
  TANDEM_RETURN_IF_ERROR(CheckShardAmp(shard, config.amp));
  TANDEM_RETURN_IF_ERROR(
      CheckGlobalBatch(config.global_batch_size, comm.size()));
  const comm::RankPrinter out(comm);
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<const SharedSplit> shared,
                          LoadSplitForRank(config, comm));
  const Split& split = shared->split;
  TANDEM_RETURN_IF_ERROR(
      CheckRanksAgree(comm, device,
                      {{"dataset size", split.train.size() + split.test.size()},
                       {"dataset hash", HashHex(shared->hash)}}));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> model,
                          BuildModel(config));
  TANDEM_RETURN_IF_ERROR(model->To(device));
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<Strategy> trainer,
      Strategy::Create(
          shard, *model, comm,
          [&config](std::vector<Tensor> params)
              -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
            TANDEM_ASSIGN_OR_RETURN(
                optim::Sgd sgd,
                optim::Sgd::Create(std::move(params), config.lr,
                                   {.momentum = config.momentum}));
            return std::make_unique<optim::Sgd>(std::move(sgd));
          },
          config.amp));
  // Resume (every rank loads the same file, so the weights DDP broadcast
  // from rank 0 are replaced by equal values on every rank).
  checkpoint::RunCheckpointer checkpointer(config.checkpoint, comm, device,
                                           "digits_ddp");
  checkpoint::TrainingState state;
  // Sharded modes save and load the full state (gathered on save, sliced on
  // load), so the files are --shard=none's.
  const bool sharded = trainer->full_optimizer() == nullptr;
  checkpoint::FullTrainingState full;
  if (sharded) {
    state.load_model = [&trainer](const nn::StateDict& s) {
      return trainer->LoadFullModelState(s);
    };
    state.load_optimizer = [&trainer](const std::vector<optim::StateEntry>& s) {
      return trainer->LoadFullOptimizerState(s);
    };
  } else {
    state.model = model.get();
    state.optimizer = trainer->full_optimizer();
  }
  TANDEM_ASSIGN_OR_RETURN(checkpoint::TrainingProgress start,
                          checkpointer.Resume(state));
  TANDEM_ASSIGN_OR_RETURN(DistributedSampler sampler,
                          DistributedSampler::Create(
                              split.train.size(), {.num_replicas = comm.size(),
                                                   .rank = comm.rank()}));
  const int64_t batch_size = config.global_batch_size / comm.size();
  out.PrintOnRank0(absl::StrFormat(
      "digits_ddp: %d train / %d test samples, %d rank(s) on %s, batch %d per "
      "rank, MLP 64-%d-10%s",
      split.train.size(), split.test.size(), comm.size(),
      std::string(comm.backend()), batch_size, config.hidden,
      shard == ShardMode::kNone ? "" : ", --shard=" + config.shard));

  // The runner's progress line and metrics file (rank 0 reports).
  RunMonitor* const monitor = comm.rank() == 0 ? ActiveRunMonitor() : nullptr;
  DigitsResult result;
  for (int64_t epoch = start.epoch; epoch < config.epochs; ++epoch) {
    sampler.SetEpoch(epoch);
    model->Train();
    TANDEM_ASSIGN_OR_RETURN(
        DataLoader loader,
        DataLoader::Create(split.train, sampler.Indices(), batch_size,
                           /*drop_last=*/false));
    // Summed over every rank after the epoch: loss * samples, samples, and
    // the samples the model classified right as it trained on them.
    std::vector<double> loss_sum_and_count = {0, 0, 0};
    const int64_t first_step = epoch == start.epoch ? start.step_in_epoch : 0;
    if (first_step > 0) {
      // Resumed mid-epoch: the sums of the steps already taken.
      TANDEM_ASSIGN_OR_RETURN(loss_sum_and_count,
                              LossSums(state.extra, comm.rank()));
    }
    for (int64_t b = first_step; b < loader.num_batches(); ++b) {
      TANDEM_ASSIGN_OR_RETURN(Batch batch, loader.GetBatch(b));
      TANDEM_ASSIGN_OR_RETURN(Tensor features,
                              OnDevice(batch.features, device));
      TANDEM_ASSIGN_OR_RETURN(Tensor labels, OnDevice(batch.labels, device));
      Tensor logits;
      Tensor loss;
      {
        // Forward and loss under autocast (--amp); backward outside it, as
        // in PyTorch's recipe.
        std::optional<amp::Autocast> autocast;
        if (config.amp.has_value())
          autocast.emplace(device.type(), *config.amp);
        TANDEM_ASSIGN_OR_RETURN(logits, trainer->Forward(features));
        TANDEM_ASSIGN_OR_RETURN(loss, CrossEntropy(logits, labels));
      }
      trainer->ZeroGrad();
      TANDEM_RETURN_IF_ERROR(trainer->Backward(loss));
      TANDEM_RETURN_IF_ERROR(trainer->Step());
      TANDEM_ASSIGN_OR_RETURN(double value, loss.Item());
      // Every rank stops together on a non-finite loss (every step) or
      // parameter (scanned every kParameterCheckInterval steps and at the
      // end of the epoch; under fsdp the parameters live in shards between
      // steps, so only the loss is checked).
      TANDEM_RETURN_IF_ERROR(
          CheckStepFinite(
              comm, *model,
              {.epoch = epoch,
               .step = b,
               .loss = value,
               .check_parameters = trainer->parameters_resident() &&
                                   ParameterCheckDue(b, loader.num_batches())})
              .status());
      loss_sum_and_count[0] += value * batch.labels.numel();
      loss_sum_and_count[1] += batch.labels.numel();
      TANDEM_ASSIGN_OR_RETURN(const int64_t correct,
                              CountCorrect(logits, batch.labels));
      loss_sum_and_count[2] += static_cast<double>(correct);
      if (monitor != nullptr) {
        // Every rank's batch has this size (the sampler pads evenly).
        monitor->Step(
            {.epoch = epoch,
             .epochs = config.epochs,
             .step = b,
             .steps_per_epoch = loader.num_batches(),
             .samples = batch.labels.numel() * comm.size(),
             .loss = value,
             .comm_seconds =
                 trainer->ddp() != nullptr
                     ? trainer->ddp()->last_sync_stats().all_reduce_seconds
                     : 0.0,
             .wait_seconds =
                 trainer->ddp() != nullptr
                     ? trainer->ddp()->last_sync_stats().wait_seconds
                     : 0.0});
      }
      state.extra.clear();
      if (checkpointer.SaveDueAfter(b, loader.num_batches()) &&
          b + 1 < loader.num_batches()) {
        TANDEM_ASSIGN_OR_RETURN(
            state.extra, GatherLossSums(comm, device, loss_sum_and_count));
      }
      if (sharded && checkpointer.SaveDueAfter(b, loader.num_batches())) {
        // Collective: every rank gathers, rank 0 saves.
        TANDEM_ASSIGN_OR_RETURN(full.model, trainer->FullModelState());
        TANDEM_ASSIGN_OR_RETURN(full.optimizer, trainer->FullOptimizerState());
        full.lr = trainer->lr();
        full.param_groups = trainer->FullParamGroups();
        state.full = &full;
      }
      TANDEM_RETURN_IF_ERROR(
          checkpointer.AfterStep(state, epoch, b, loader.num_batches()));
      state.full = nullptr;
      full = {};
    }
    TANDEM_RETURN_IF_ERROR(AllReduceSum(comm, loss_sum_and_count, device));
    result.final_train_loss = loss_sum_and_count[0] / loss_sum_and_count[1];
    if (monitor != nullptr) {
      monitor->Epoch(
          {.epoch = epoch,
           .epochs = config.epochs,
           .train_loss = result.final_train_loss,
           .train_accuracy = loss_sum_and_count[2] / loss_sum_and_count[1],
           .samples = static_cast<int64_t>(loss_sum_and_count[1])});
    }
    out.PrintOnRank0(absl::StrFormat("Epoch: %03d/%03d | Train loss: %.4f",
                                     epoch + 1, config.epochs,
                                     result.final_train_loss));
  }

  // Each rank scores a disjoint strided slice of the test set (no padding).
  model->Eval();
  NoGradGuard no_grad;
  std::vector<int64_t> mine;
  for (int64_t i = comm.rank(); i < split.test.size(); i += comm.size()) {
    mine.push_back(i);
  }
  std::vector<double> correct_and_total = {0, static_cast<double>(mine.size())};
  if (!mine.empty()) {
    TANDEM_ASSIGN_OR_RETURN(
        DataLoader loader,
        DataLoader::Create(split.test, mine, static_cast<int64_t>(mine.size()),
                           /*drop_last=*/false));
    TANDEM_ASSIGN_OR_RETURN(Batch batch, loader.GetBatch(0));
    TANDEM_ASSIGN_OR_RETURN(Tensor features, OnDevice(batch.features, device));
    std::optional<amp::Autocast> autocast;
    if (config.amp.has_value()) autocast.emplace(device.type(), *config.amp);
    TANDEM_ASSIGN_OR_RETURN(Tensor logits, trainer->Forward(features));
    TANDEM_ASSIGN_OR_RETURN(Tensor predicted, Argmax(logits, -1));
    TANDEM_ASSIGN_OR_RETURN(predicted, OnDevice(predicted, Device::CPU()));
    const int64_t* p = predicted.data<int64_t>();
    const int64_t* y = batch.labels.data<int64_t>();
    for (int64_t i = 0; i < batch.labels.numel(); ++i)
      correct_and_total[0] += p[i] == y[i];
  }
  TANDEM_RETURN_IF_ERROR(AllReduceSum(comm, correct_and_total, device));
  result.test_correct = static_cast<int64_t>(correct_and_total[0]);
  result.test_total = static_cast<int64_t>(correct_and_total[1]);
  if (monitor != nullptr) {
    monitor->Test(result.test_accuracy(), result.test_correct,
                  result.test_total);
  }
  out.PrintOnRank0(absl::StrFormat("Test accuracy: %.4f (%d/%d, all ranks)",
                                   result.test_accuracy(), result.test_correct,
                                   result.test_total));
  return result;
}

}  // namespace tandem::train
