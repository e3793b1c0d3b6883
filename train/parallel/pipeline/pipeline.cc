#include "train/parallel/pipeline/pipeline.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/dtype.h"
#include "base/status_macros.h"
#include "tensor/autograd/autograd.h"
#include "tensor/ops.h"
#include "train/parallel/core/staged_all_gather.h"
#include "train/parallel/core/tensor_comm.h"
#include "train/parallel/devices/device_transfer.h"

namespace tandem::train {
namespace {

constexpr int64_t kMaxHeaderDims = kPipelineHeaderLength - 2;

// The agreement record: one row of int64 values per rank.
enum AgreeField : int64_t {
  kSchedule,
  kChunks,
  kStages,
  kInputRows,   // stage 0: the batch's rows; -1 elsewhere or when missing
  kRowNumel,    // stage 0: elements per batch row; -1 elsewhere
  kTargetRows,  // last stage: the target's rows; -1 elsewhere or missing
  kAgreeFields
};

std::string Describe(const Tensor& t) {
  return absl::StrCat(DTypeName(t.dtype()), ShapeToString(t.shape()));
}

// "rank 0 has gpipe and ranks 1, 2 have 1f1b" for the values `of` ranks
// published, grouped by value in order of first appearance.
template <typename Show>
std::string Disagreement(const std::vector<int64_t>& all, int64_t field,
                         int size, Show show) {
  std::vector<std::pair<int64_t, std::vector<int>>> groups;
  for (int r = 0; r < size; ++r) {
    const int64_t v = all[static_cast<size_t>(r * kAgreeFields + field)];
    auto it = std::find_if(groups.begin(), groups.end(),
                           [v](const auto& g) { return g.first == v; });
    if (it == groups.end()) {
      groups.push_back({v, {r}});
    } else {
      it->second.push_back(r);
    }
  }
  std::vector<std::string> parts;
  for (const auto& [value, ranks] : groups) {
    parts.push_back(absl::StrCat(
        ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "),
        ranks.size() == 1 ? " has " : " have ", show(value)));
  }
  return absl::StrJoin(parts, " and ");
}

}  // namespace

absl::StatusOr<PipelineSchedule> ParsePipelineSchedule(std::string_view name) {
  if (name == "gpipe") return PipelineSchedule::kGPipe;
  if (name == "1f1b") return PipelineSchedule::k1F1B;
  return absl::InvalidArgumentError(
      absl::StrCat("pipeline schedule must be 'gpipe' or '1f1b', got '",
                   std::string(name), "'"));
}

std::string_view PipelineScheduleName(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::kGPipe:
      return "gpipe";
    case PipelineSchedule::k1F1B:
      return "1f1b";
  }
  return "?";
}

std::vector<PipelineAction> PipelineOrder(PipelineSchedule schedule,
                                          int64_t stages, int64_t stage,
                                          int64_t micro_batches) {
  using Kind = PipelineAction::Kind;
  std::vector<PipelineAction> order;
  const int64_t m = micro_batches;
  if (schedule == PipelineSchedule::kGPipe) {
    for (int64_t k = 0; k < m; ++k) order.push_back({Kind::kForward, k});
    for (int64_t k = 0; k < m; ++k) order.push_back({Kind::kBackward, k});
    return order;
  }
  const int64_t warmup = std::min(stages - 1 - stage, m);
  for (int64_t k = 0; k < warmup; ++k) order.push_back({Kind::kForward, k});
  for (int64_t k = warmup; k < m; ++k) {
    order.push_back({Kind::kForward, k});
    order.push_back({Kind::kBackward, k - warmup});
  }
  for (int64_t k = m - warmup; k < m; ++k) {
    order.push_back({Kind::kBackward, k});
  }
  return order;
}

// What this stage keeps of one micro-batch between its forward and its
// backward: the (detached, grad-requiring) input, the output or the loss.
struct PipelineStage::MicroBatch {
  int64_t index = 0;
  Tensor input;
  Tensor output;  // not the last stage
  Tensor loss;    // the last stage
  bool live = false;
};

PipelineStage::PipelineStage(comm::Communicator& comm, nn::Module& module,
                             PipelineOptions options, PipelineLossFn loss,
                             Device device)
    : comm_(comm),
      module_(module),
      options_(options),
      loss_(std::move(loss)),
      device_(device),
      stage_(comm.rank()),
      num_stages_(comm.size()) {}

absl::StatusOr<std::unique_ptr<PipelineStage>> PipelineStage::Create(
    comm::Communicator& comm, nn::Module& module, PipelineOptions options,
    PipelineLossFn loss) {
  if (options.chunks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("PipelineStage on rank ", comm.rank(),
                     ": chunks must be >= 1, got ", options.chunks));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PipelineStage on rank ", comm.rank(),
                     ": the timeout must be "
                     "positive, got ",
                     absl::FormatDuration(options.timeout)));
  }
  if (comm.rank() == comm.size() - 1 && !loss) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PipelineStage on rank ", comm.rank(), " (the last of ", comm.size(),
        " stages) needs a loss function: the loss is computed there"));
  }
  Device device = Device::CPU();
  const std::vector<Tensor> params = module.Parameters();
  if (!params.empty()) device = params.front().device();
  return std::unique_ptr<PipelineStage>(
      new PipelineStage(comm, module, options, std::move(loss), device));
}

absl::Status PipelineStage::Annotate(const absl::Status& s,
                                     std::string_view what,
                                     int64_t micro_batch) const {
  if (s.ok()) return s;
  return absl::Status(
      s.code(),
      absl::StrCat("pipeline stage ", stage_, " of ", num_stages_, " (rank ",
                   comm_.rank(), "), ", std::string(what), " of micro-batch ",
                   micro_batch, ": ", s.message()));
}

absl::StatusOr<int64_t> PipelineStage::Agree(const Tensor& input,
                                             const Tensor& target) {
  std::vector<int64_t> mine(kAgreeFields, -1);
  mine[kSchedule] = static_cast<int64_t>(options_.schedule);
  mine[kChunks] = options_.chunks;
  mine[kStages] = num_stages_;
  if (stage_ == 0 && input.defined() && input.ndim() >= 1) {
    mine[kInputRows] = input.dim(0);
    mine[kRowNumel] = input.dim(0) == 0 ? 0 : input.numel() / input.dim(0);
  }
  if (stage_ == num_stages_ - 1 && target.defined() && target.ndim() >= 1) {
    mine[kTargetRows] = target.dim(0);
  }
  const int n = num_stages_;
  std::vector<int64_t> all(static_cast<size_t>(kAgreeFields * n));
  TANDEM_RETURN_IF_ERROR(AllGatherInt64(comm_, device_, mine,
                                        absl::MakeSpan(all), options_.timeout));
  auto at = [&](int r, int64_t f) {
    return all[static_cast<size_t>(r * kAgreeFields + f)];
  };
  auto disagree = [&](int64_t field) {
    for (int r = 1; r < n; ++r) {
      if (at(r, field) != at(0, field)) return true;
    }
    return false;
  };
  const std::string fix =
      "; give every rank the same PipelineOptions (schedule, chunks) and "
      "the same batch size";
  if (disagree(kSchedule)) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline ranks disagree on the schedule: ",
                     Disagreement(all, kSchedule, n,
                                  [](int64_t v) {
                                    return std::string(PipelineScheduleName(
                                        static_cast<PipelineSchedule>(v)));
                                  }),
                     fix));
  }
  if (disagree(kChunks)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline ranks disagree on the chunks (micro-batches per batch): ",
        Disagreement(all, kChunks, n,
                     [](int64_t v) { return absl::StrCat(v); }),
        fix));
  }
  if (disagree(kStages)) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline ranks disagree on the number of stages: ",
                     Disagreement(all, kStages, n,
                                  [](int64_t v) { return absl::StrCat(v); }),
                     fix));
  }
  const int64_t rows = at(0, kInputRows);
  const int64_t target_rows = at(n - 1, kTargetRows);
  if (rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline stage 0 (rank 0) needs a batch with at least one row "
        "along dim 0 as Step's input, got ",
        rows < 0 ? "none" : "0 rows"));
  }
  if (target_rows != rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline ranks disagree on the micro-batch shape: rank 0 has a "
        "batch of ",
        rows, " rows but the last stage (rank ", n - 1, ") has ",
        target_rows < 0 ? std::string("no target")
                        : absl::StrCat("a target of ", target_rows, " rows"),
        "; pass the batch on rank 0 and its targets on the last rank"));
  }
  if (options_.chunks > rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline chunks (", options_.chunks, ") is larger than the batch (",
        rows, " rows); use chunks <= the batch size"));
  }
  return rows;
}

absl::Status PipelineStage::SendTensor(const Tensor& t, int peer) {
  TANDEM_ASSIGN_OR_RETURN(comm::BufferView view, ToBufferView(t));
  PendingSend send{comm_.Send(view, peer), t};
  if (send.work->IsCompleted()) {
    // An argument error (or a finished send) needs no keeping.
    return send.work->Wait(options_.timeout);
  }
  pending_.push_back(std::move(send));
  return absl::OkStatus();
}

absl::Status PipelineStage::WaitSends() {
  absl::Status first;
  for (PendingSend& s : pending_) {
    absl::Status w = s.work->Wait(options_.timeout);
    if (first.ok() && !w.ok()) first = w;
  }
  pending_.clear();
  return first;
}

absl::Status PipelineStage::Forward(MicroBatch& mb, const Tensor& input,
                                    const Tensor& target) {
  Tensor x;
  if (stage_ == 0) {
    x = input.Detach();
  } else {
    // The header: dtype, ndim, dims.
    TANDEM_ASSIGN_OR_RETURN(
        Tensor header,
        Tensor::Zeros({kPipelineHeaderLength}, DType::kI64, device_));
    TANDEM_ASSIGN_OR_RETURN(comm::BufferView hv, ToBufferView(header));
    TANDEM_RETURN_IF_ERROR(comm_.Recv(hv, stage_ - 1)->Wait(options_.timeout));
    TANDEM_ASSIGN_OR_RETURN(Tensor host, header.To(Device::CPU()));
    TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> h, host.ToVector<int64_t>());
    if (h[1] < 0 || h[1] > kMaxHeaderDims) {
      return absl::InternalError(absl::StrCat("the header from stage ",
                                              stage_ - 1, " says ", h[1],
                                              " dims (at most ", kMaxHeaderDims,
                                              "); do the ranks run the same "
                                              "tandem build and schedule?"));
    }
    // The value crossed the wire: compared with each dtype's number before
    // it is cast (a cast of an out-of-range integer would wrap).
    const auto sent =
        std::find_if(std::begin(kEveryDType), std::end(kEveryDType),
                     [&](DType d) { return static_cast<int64_t>(d) == h[0]; });
    const DType dtype = sent == std::end(kEveryDType) ? DType::kU8 : *sent;
    if (dtype == DType::kU8) {
      return absl::InternalError(absl::StrCat(
          "the header from stage ", stage_ - 1, " says dtype value ", h[0],
          ", not one of a tensor's (f32, f64, f16, bf16, i64, i32); do the "
          "ranks run the same tandem build and schedule?"));
    }
    Shape shape(h.begin() + 2, h.begin() + 2 + h[1]);
    TANDEM_ASSIGN_OR_RETURN(x, Tensor::Empty(shape, dtype, device_));
    TANDEM_ASSIGN_OR_RETURN(comm::BufferView xv, ToBufferView(x));
    TANDEM_RETURN_IF_ERROR(comm_.Recv(xv, stage_ - 1)->Wait(options_.timeout));
    if (IsFloatingPoint(dtype))
      TANDEM_RETURN_IF_ERROR(x.set_requires_grad(true));
  }
  EnableGradGuard grad;
  absl::StatusOr<Tensor> y = module_.Forward(x);
  if (!y.ok()) {
    return absl::Status(
        y.status().code(),
        absl::StrCat(y.status().message(), " (input ", Describe(x),
                     stage_ == 0 ? std::string(", rows of the batch)")
                                 : absl::StrCat(", the output of stage ",
                                                stage_ - 1, ")")));
  }
  mb.input = x;
  mb.live = true;
  if (stage_ == num_stages_ - 1) {
    TANDEM_ASSIGN_OR_RETURN(mb.loss, loss_(*y, target));
    if (mb.loss.numel() != 1 || !mb.loss.requires_grad()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the loss function must return a one-element tensor that "
          "requires grad, got ",
          Describe(mb.loss)));
    }
    return absl::OkStatus();
  }
  if (y->ndim() > kMaxHeaderDims) {
    return absl::InvalidArgumentError(
        absl::StrCat("the stage's output ", Describe(*y), " has more than ",
                     kMaxHeaderDims, " dims, more than a header describes"));
  }
  mb.output = *y;
  std::vector<int64_t> h(kPipelineHeaderLength, 0);
  h[0] = static_cast<int64_t>(y->dtype());
  h[1] = y->ndim();
  for (int64_t d = 0; d < y->ndim(); ++d) h[2 + d] = y->dim(d);
  TANDEM_ASSIGN_OR_RETURN(Tensor header, Tensor::FromVector(h));
  TANDEM_ASSIGN_OR_RETURN(header, header.To(device_));
  TANDEM_RETURN_IF_ERROR(SendTensor(header, stage_ + 1));
  return SendTensor(y->Detach(), stage_ + 1);
}

absl::Status PipelineStage::Backward(MicroBatch& mb) {
  EnableGradGuard grad;
  if (stage_ == num_stages_ - 1) {
    TANDEM_RETURN_IF_ERROR(mb.loss.Backward());
  } else {
    TANDEM_ASSIGN_OR_RETURN(
        Tensor g, Tensor::Empty(mb.output.shape(), mb.output.dtype(), device_));
    TANDEM_ASSIGN_OR_RETURN(comm::BufferView gv, ToBufferView(g));
    TANDEM_RETURN_IF_ERROR(comm_.Recv(gv, stage_ + 1)->Wait(options_.timeout));
    if (mb.output.requires_grad()) {
      TANDEM_RETURN_IF_ERROR(mb.output.Backward(g));
    }
  }
  if (stage_ > 0) {
    Tensor gx = mb.input.grad();
    if (!gx.defined()) {
      // The output does not depend on the input: its gradient is zero.
      TANDEM_ASSIGN_OR_RETURN(
          gx, Tensor::Zeros(mb.input.shape(), mb.input.dtype(), device_));
    }
    TANDEM_RETURN_IF_ERROR(SendTensor(gx, stage_ - 1));
  }
  const int64_t index = mb.index;
  mb = MicroBatch();  // release the activations
  mb.index = index;
  return absl::OkStatus();
}

absl::StatusOr<PipelineStepResult> PipelineStage::Step(const Tensor& input,
                                                       const Tensor& target) {
  pending_.clear();
  TANDEM_ASSIGN_OR_RETURN(const int64_t rows, Agree(input, target));
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                          TensorSplitSizes(rows, options_.chunks));
  const int64_t m = static_cast<int64_t>(sizes.size());
  std::vector<Tensor> inputs(static_cast<size_t>(m));
  std::vector<Tensor> targets(static_cast<size_t>(m));
  if (stage_ == 0) {
    TANDEM_ASSIGN_OR_RETURN(inputs, SplitRows(input.Detach(), sizes));
  }
  if (stage_ == num_stages_ - 1) {
    TANDEM_ASSIGN_OR_RETURN(targets, SplitRows(target.Detach(), sizes));
  }

  PipelineStepResult result;
  result.micro_batches = m;
  std::vector<MicroBatch> mbs(static_cast<size_t>(m));
  int64_t live = 0;
  absl::Status status;
  for (const PipelineAction& a :
       PipelineOrder(options_.schedule, num_stages_, stage_, m)) {
    MicroBatch& mb = mbs[static_cast<size_t>(a.micro_batch)];
    mb.index = a.micro_batch;
    if (a.kind == PipelineAction::Kind::kForward) {
      status = Annotate(Forward(mb, inputs[static_cast<size_t>(a.micro_batch)],
                                targets[static_cast<size_t>(a.micro_batch)]),
                        "forward", a.micro_batch);
      if (!status.ok()) break;
      result.peak_live_micro_batches =
          std::max(result.peak_live_micro_batches, ++live);
      if (stage_ == num_stages_ - 1) {
        NoGradGuard no_grad;
        absl::StatusOr<Tensor> v = mb.loss.Detach().To(Device::CPU());
        if (v.ok()) v = v->To(DType::kF64);
        if (!v.ok()) {
          status = Annotate(v.status(), "loss", a.micro_batch);
          break;
        }
        result.micro_batch_losses.push_back(v->data<double>()[0]);
      }
    } else {
      const bool last = a.micro_batch == m - 1;
      if (last && options_.before_last_backward) {
        status = Annotate(options_.before_last_backward(),
                          "before_last_backward", a.micro_batch);
        if (!status.ok()) break;
      }
      status = Annotate(Backward(mb), "backward", a.micro_batch);
      if (!status.ok()) break;
      if (last && options_.after_last_backward) {
        status = Annotate(options_.after_last_backward(), "after_last_backward",
                          a.micro_batch);
        if (!status.ok()) break;
      }
      --live;
    }
  }
  absl::Status sent = WaitSends();
  if (status.ok() && !sent.ok()) {
    status = Annotate(sent, "sends", m - 1);
  }
  if (!status.ok()) return status;

  if (options_.scale_grads && m > 1) {
    NoGradGuard no_grad;
    for (const Tensor& p : module_.Parameters()) {
      if (!p.has_grad()) continue;
      // grad.div_(m), PyTorch's scale_grads: a division, not a product
      // with 1/m (they round differently).
      TANDEM_ASSIGN_OR_RETURN(Tensor q, Div(p.grad(), static_cast<double>(m)));
      TANDEM_RETURN_IF_ERROR(p.grad().CopyFrom(q));
    }
  }
  if (stage_ == num_stages_ - 1) {
    double sum = 0;
    for (double l : result.micro_batch_losses) sum += l;
    result.loss = sum / static_cast<double>(m);
  }
  return result;
}

absl::StatusOr<double> PipelineStage::ShareLoss(
    const PipelineStepResult& result) {
  const bool last = stage_ == num_stages_ - 1;
  if (last && !result.loss.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline stage ", stage_,
                     " (the last): ShareLoss needs the result "
                     "of a Step, which holds the loss there"));
  }
  TANDEM_ASSIGN_OR_RETURN(
      Tensor host, Tensor::Scalar(last ? *result.loss : 0.0, DType::kF64));
  TANDEM_ASSIGN_OR_RETURN(Tensor t, host.To(device_));
  TANDEM_ASSIGN_OR_RETURN(comm::BufferView view, ToBufferView(t));
  TANDEM_RETURN_IF_ERROR(
      comm_.Broadcast(view, num_stages_ - 1)->Wait(options_.timeout));
  TANDEM_ASSIGN_OR_RETURN(host, t.To(Device::CPU()));
  return host.data<double>()[0];
}

}  // namespace tandem::train
