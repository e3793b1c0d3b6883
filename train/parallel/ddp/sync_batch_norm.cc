#include "train/parallel/ddp/sync_batch_norm.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/types.h"
#include "tensor/autograd/autograd.h"
#include "tensor/ops.h"
#include "tensor/ops/batch_norm.h"
#include "train/parallel/core/staged_all_gather.h"
#include "train/parallel/core/tensor_comm.h"

namespace tandem::train {
namespace {

// What step 1 of the forward gathers from each rank.
constexpr int kShapeFields = 6;  // N, C, H, W (or -1 each), features, dtype

std::string RankShape(const int64_t* f) {
  if (f[0] < 0) return "not [N, C, H, W]";
  return absl::StrCat(DTypeName(static_cast<DType>(f[5])), "[", f[0], ", ",
                      f[1], ", ", f[2], ", ", f[3],
                      "] into num_features=", f[4]);
}

absl::Status Wait(std::unique_ptr<comm::Work> work, absl::Duration timeout) {
  return work->Wait(timeout);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SyncBatchNorm>> SyncBatchNorm::Create(
    int64_t num_features, const nn::BatchNorm2d::Options& options,
    comm::Communicator& comm, absl::Duration timeout) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::BatchNorm2d> bn,
                          nn::BatchNorm2d::Create(num_features, options));
  return FromBatchNorm(std::move(bn), comm, timeout);
}

absl::StatusOr<std::unique_ptr<SyncBatchNorm>> SyncBatchNorm::Wrap(
    const nn::BatchNorm2d& bn, comm::Communicator& comm,
    absl::Duration timeout) {
  std::unique_ptr<SyncBatchNorm> m(new SyncBatchNorm(comm, timeout));
  // The same tensors under the same names, in BatchNorm2d's order.
  for (const nn::NamedTensor& p : bn.NamedParameters()) {
    TANDEM_RETURN_IF_ERROR(m->RegisterParameter(p.name, p.tensor));
  }
  for (const nn::NamedTensor& b : bn.NamedBuffers()) {
    TANDEM_RETURN_IF_ERROR(m->RegisterBuffer(b.name, b.tensor));
  }
  m->Train(bn.is_training());
  return m;
}

absl::StatusOr<std::unique_ptr<SyncBatchNorm>> SyncBatchNorm::FromBatchNorm(
    std::unique_ptr<nn::BatchNorm2d> bn, comm::Communicator& comm,
    absl::Duration timeout) {
  if (bn == nullptr) {
    return absl::InvalidArgumentError(
        "SyncBatchNorm::FromBatchNorm: the BatchNorm2d is null");
  }
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<SyncBatchNorm> m,
                          Wrap(*bn, comm, timeout));
  m->bn_ = std::move(bn);
  return m;
}

absl::StatusOr<Tensor> SyncBatchNorm::Forward(const Tensor& x) {
  if (!is_training() || comm_->size() == 1) {
    bn_->Train(is_training());
    return bn_->Forward(x);
  }
  absl::StatusOr<Tensor> y = SyncForward(x);
  if (!y.ok()) {
    return absl::Status(
        y.status().code(),
        absl::StrCat("SyncBatchNorm(", ExtraRepr(), ") on rank ", comm_->rank(),
                     ": ", y.status().message()));
  }
  return y;
}

absl::StatusOr<Tensor> SyncBatchNorm::SyncForward(const Tensor& x) {
  const int world = comm_->size();
  const nn::BatchNorm2d::Options& opt = bn_->options();
  const Device device = x.defined() ? x.device() : Device::CPU();
  // 1. Every rank's shape, before any statistic moves: the checks below
  // see the same values on every rank, so all fail together.
  std::vector<int64_t> mine(kShapeFields, -1);
  if (x.defined() && x.ndim() == 4) {
    for (int i = 0; i < 4; ++i) mine[i] = x.dim(i);
  }
  mine[4] = bn_->num_features();
  mine[5] = static_cast<int64_t>(x.defined() ? x.dtype() : opt.dtype);
  std::vector<int64_t> all(kShapeFields * world);
  TANDEM_RETURN_IF_ERROR(
      AllGatherInt64(*comm_, device, mine, absl::MakeSpan(all), timeout_));
  bool fits = true;
  int64_t total = 0;
  std::vector<double> counts(world);
  for (int r = 0; r < world; ++r) {
    const int64_t* f = &all[r * kShapeFields];
    fits = fits && f[0] >= 0 && f[1] == f[4] && f[4] == all[4] &&
           f[5] == all[5] && f[5] == static_cast<int64_t>(opt.dtype);
    counts[r] = static_cast<double>(f[0] * f[2] * f[3]);
    fits = fits && counts[r] >= 1;
    total += f[0] * f[2] * f[3];
  }
  if (!fits || total < 2) {
    std::string shapes;
    for (int r = 0; r < world; ++r) {
      absl::StrAppend(&shapes, r == 0 ? "" : "; ", "rank ", r, ": ",
                      RankShape(&all[r * kShapeFields]));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "expected every rank's input [N, C, H, W] of dtype ",
        DTypeName(opt.dtype),
        " with C == num_features, the same on every rank, at least one value "
        "per channel on each rank and two in all, got ",
        shapes,
        ". Give every rank the same model and batches of the same layout"));
  }
  const int64_t c = bn_->num_features();
  // 2. Local statistics, all-gathered as [G, 2C] rows (mean, var).
  TANDEM_ASSIGN_OR_RETURN(BatchNormStats local, BatchNormStatsOf(x));
  TANDEM_ASSIGN_OR_RETURN(Tensor send,
                          Tensor::Empty({2 * c}, x.dtype(), device));
  TANDEM_ASSIGN_OR_RETURN(Tensor send_mean, send.View(0, {c}));
  TANDEM_ASSIGN_OR_RETURN(Tensor send_var, send.View(c, {c}));
  TANDEM_RETURN_IF_ERROR(send_mean.CopyFrom(local.mean));
  TANDEM_RETURN_IF_ERROR(send_var.CopyFrom(local.var));
  TANDEM_ASSIGN_OR_RETURN(Tensor recv,
                          Tensor::Empty({world, 2 * c}, x.dtype(), device));
  TANDEM_ASSIGN_OR_RETURN(comm::BufferView send_view, ToBufferView(send));
  TANDEM_ASSIGN_OR_RETURN(comm::BufferView recv_view, ToBufferView(recv));
  TANDEM_RETURN_IF_ERROR(
      Wait(comm_->AllGather(send_view, recv_view), timeout_));
  TANDEM_ASSIGN_OR_RETURN(Tensor means,
                          Tensor::Empty({world, c}, x.dtype(), device));
  TANDEM_ASSIGN_OR_RETURN(Tensor vars,
                          Tensor::Empty({world, c}, x.dtype(), device));
  for (int r = 0; r < world; ++r) {
    TANDEM_ASSIGN_OR_RETURN(Tensor m_dst, means.View(r * c, {c}));
    TANDEM_ASSIGN_OR_RETURN(Tensor v_dst, vars.View(r * c, {c}));
    TANDEM_ASSIGN_OR_RETURN(Tensor m_src, recv.View(r * 2 * c, {c}));
    TANDEM_ASSIGN_OR_RETURN(Tensor v_src, recv.View(r * 2 * c + c, {c}));
    TANDEM_RETURN_IF_ERROR(m_dst.CopyFrom(m_src));
    TANDEM_RETURN_IF_ERROR(v_dst.CopyFrom(v_src));
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor host_counts, Tensor::FromVector(counts));
  TANDEM_ASSIGN_OR_RETURN(Tensor count_t, host_counts.To(x.dtype()));
  TANDEM_ASSIGN_OR_RETURN(count_t, count_t.To(device));
  // The batch is counted only once the statistics are known.
  const bool update = opt.track_running_stats;
  nn::BatchNorm2d::RunningUpdate next;
  if (update) {
    TANDEM_ASSIGN_OR_RETURN(next, bn_->NextRunningUpdate());
  }
  TANDEM_ASSIGN_OR_RETURN(
      BatchNormSaved saved,
      BatchNormGatherStats(means, vars, count_t, bn_->running_mean(),
                           bn_->running_var(), next.factor, opt.eps));
  if (update) TANDEM_RETURN_IF_ERROR(bn_->CountBatch(next));
  // 3. Normalise with the global statistics.
  const Tensor& weight = bn_->weight();
  const Tensor& bias = bn_->bias();
  TANDEM_ASSIGN_OR_RETURN(
      Tensor y, BatchNormElemt(x, weight, bias, saved.mean, saved.invstd));
  if (ShouldRecord({x, weight, bias})) {
    comm::Communicator* comm = comm_;
    const absl::Duration timeout = timeout_;
    RecordOp(
        "SyncBatchNorm", y, {x, weight, bias},
        [sx = x.Detach(), sw = weight.Detach(), saved, comm, timeout,
         count = static_cast<double>(total)](const Tensor& g,
                                             GradSink& sink) -> absl::Status {
          TANDEM_ASSIGN_OR_RETURN(BatchNormGradSums sums,
                                  BatchNormBackwardReduce(g, sx, saved.mean));
          // The parameters' local gradients, before the all-reduce.
          if (sink.needs(1)) {
            TANDEM_ASSIGN_OR_RETURN(Tensor dw,
                                    Mul(sums.sum_dy_xmu, saved.invstd));
            TANDEM_RETURN_IF_ERROR(sink.Add(1, std::move(dw)));
          }
          if (sink.needs(2)) {
            TANDEM_ASSIGN_OR_RETURN(Tensor db, sums.sum_dy.Clone());
            TANDEM_RETURN_IF_ERROR(sink.Add(2, std::move(db)));
          }
          if (!sink.needs(0)) return absl::OkStatus();
          const int64_t ch = sums.sum_dy.numel();
          TANDEM_ASSIGN_OR_RETURN(
              Tensor both, Tensor::Empty({2 * ch}, sx.dtype(), sx.device()));
          TANDEM_ASSIGN_OR_RETURN(Tensor sum_dy, both.View(0, {ch}));
          TANDEM_ASSIGN_OR_RETURN(Tensor sum_dy_xmu, both.View(ch, {ch}));
          TANDEM_RETURN_IF_ERROR(sum_dy.CopyFrom(sums.sum_dy));
          TANDEM_RETURN_IF_ERROR(sum_dy_xmu.CopyFrom(sums.sum_dy_xmu));
          TANDEM_ASSIGN_OR_RETURN(comm::BufferView view, ToBufferView(both));
          absl::Status reduced =
              Wait(comm->AllReduce(view, comm::ReduceOp::kSum), timeout);
          if (!reduced.ok()) {
            return absl::Status(
                reduced.code(),
                absl::StrCat(
                    "SyncBatchNorm backward on rank ", comm->rank(),
                    ": all-reduce of sum_dy, sum_dy_xmu: ", reduced.message()));
          }
          TANDEM_ASSIGN_OR_RETURN(
              Tensor dx, BatchNormBackwardElemt(g, sx, saved.mean, saved.invstd,
                                                sw, sum_dy, sum_dy_xmu, count));
          return sink.Add(0, std::move(dx));
        });
  }
  return y;
}

absl::StatusOr<int64_t> ConvertSyncBatchNorm(nn::Module& root,
                                             comm::Communicator& comm,
                                             absl::Duration timeout) {
  if (dynamic_cast<nn::BatchNorm2d*>(&root) != nullptr) {
    return absl::InvalidArgumentError(
        "ConvertSyncBatchNorm: the root is itself a BatchNorm2d, which cannot "
        "be replaced in place; wrap it with SyncBatchNorm::FromBatchNorm");
  }
  // Every (parent, child name) to replace, found before anything changes.
  struct Site {
    nn::Module* parent;
    std::string name;
  };
  std::vector<Site> sites;
  std::vector<std::pair<std::string, nn::Module*>> stack = {{"", &root}};
  while (!stack.empty()) {
    auto [path, module] = stack.back();
    stack.pop_back();
    for (const auto& [name, child] : module->NamedChildren()) {
      const std::string child_path = path.empty() ? name : path + "." + name;
      if (dynamic_cast<nn::BatchNorm2d*>(child) == nullptr) {
        stack.emplace_back(child_path, child);
        continue;
      }
      if (!module->CanReplaceChild(name)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "ConvertSyncBatchNorm: the BatchNorm2d \"", child_path,
            "\" sits in a ", std::string(module->type_name()), " (\"", path,
            "\") that does not support ReplaceChild; nothing was converted. "
            "Build that module with SyncBatchNorm directly"));
      }
      sites.push_back({module, name});
    }
  }
  // Every fallible step before any swap: the SyncBatchNorms are built
  // around the BatchNorm2ds they will own (same tensors), then swapped in.
  std::vector<std::unique_ptr<SyncBatchNorm>> made;
  for (const Site& site : sites) {
    for (const auto& [name, child] : site.parent->NamedChildren()) {
      if (name != site.name) continue;
      TANDEM_ASSIGN_OR_RETURN(
          std::unique_ptr<SyncBatchNorm> sync,
          SyncBatchNorm::Wrap(*static_cast<nn::BatchNorm2d*>(child), comm,
                              timeout));
      made.push_back(std::move(sync));
    }
  }
  for (size_t i = 0; i < sites.size(); ++i) {
    SyncBatchNorm* sync = made[i].get();
    // Cannot fail: the child exists and its parent supports replacing.
    TANDEM_ASSIGN_OR_RETURN(
        std::unique_ptr<nn::Module> old,
        sites[i].parent->ReplaceChild(sites[i].name, std::move(made[i])));
    sync->bn_.reset(static_cast<nn::BatchNorm2d*>(old.release()));
  }
  return static_cast<int64_t>(sites.size());
}

}  // namespace tandem::train
