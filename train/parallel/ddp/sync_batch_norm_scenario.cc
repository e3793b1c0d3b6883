#include "train/parallel/ddp/sync_batch_norm_scenario.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "comm/types.h"
#include "tensor/generator.h"
#include "tensor/ops.h"
#include "train/parallel/ddp/sync_batch_norm.h"

namespace tandem::train::sync_bn_testing {
namespace {

struct Result {
  std::vector<std::vector<double>> y, dx;  // per step
  std::vector<double> dweight, dbias;      // last step
  std::vector<double> running_mean, running_var;
  double batches = 0;
};

// kSteps training steps of `bn` on rows [first, first + rows) of each
// step's batch of `total` rows; the loss is sum(y * dy), dy drawn too.
absl::StatusOr<Result> Train(nn::Module& bn, int64_t first, int64_t rows,
                             int64_t total) {
  Result out;
  TANDEM_RETURN_IF_ERROR(SetAffine(bn));
  for (int s = 0; s < kSteps; ++s) {
    const int64_t n = total * kC * kH * kW;
    TANDEM_ASSIGN_OR_RETURN(Tensor x, Rows(Draw(n, 10 + s), first, rows));
    TANDEM_ASSIGN_OR_RETURN(Tensor dy, Rows(Draw(n, 20 + s), first, rows));
    TANDEM_RETURN_IF_ERROR(x.set_requires_grad(true));
    bn.ZeroGrad();
    TANDEM_ASSIGN_OR_RETURN(Tensor y, bn.Forward(x));
    TANDEM_ASSIGN_OR_RETURN(Tensor prod, Mul(y, dy));
    TANDEM_ASSIGN_OR_RETURN(Tensor loss, Sum(prod));
    TANDEM_RETURN_IF_ERROR(loss.Backward());
    TANDEM_ASSIGN_OR_RETURN(auto yv, y.ToVector<double>());
    TANDEM_ASSIGN_OR_RETURN(auto dxv, x.grad().ToVector<double>());
    out.y.push_back(std::move(yv));
    out.dx.push_back(std::move(dxv));
  }
  for (const nn::NamedTensor& p : bn.NamedParameters()) {
    TANDEM_ASSIGN_OR_RETURN(auto g, p.tensor.grad().ToVector<double>());
    (p.name == "weight" ? out.dweight : out.dbias) = g;
  }
  for (const nn::NamedTensor& b : bn.NamedBuffers()) {
    if (b.name == "num_batches_tracked") {
      TANDEM_ASSIGN_OR_RETURN(out.batches, b.tensor.Item());
      continue;
    }
    TANDEM_ASSIGN_OR_RETURN(auto v, b.tensor.ToVector<double>());
    (b.name == "running_mean" ? out.running_mean : out.running_var) = v;
  }
  return out;
}

absl::Status Near(const std::vector<double>& got, const double* want, size_t n,
                  const std::string& what) {
  if (got.size() != n) {
    return absl::InternalError(
        absl::StrCat(what, ": ", got.size(), " values, expected ", n));
  }
  for (size_t i = 0; i < n; ++i) {
    if (!(std::abs(got[i] - want[i]) <= kTol)) {
      return absl::InternalError(
          absl::StrCat(what, "[", i, "]: got ", got[i],
                       ", BatchNorm2d over the whole batch "
                       "gives ",
                       want[i], " (tolerance ", kTol, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

nn::BatchNorm2d::Options Options() {
  return {.eps = 1e-5, .momentum = 0.1, .dtype = DType::kF64};
}

std::vector<double> Draw(int64_t n, uint64_t seed) {
  Generator gen(seed);
  std::vector<double> v(static_cast<size_t>(n));
  gen.Normal(v.data(), n, 0.5, 2.0);
  return v;
}

absl::StatusOr<Tensor> Rows(const std::vector<double>& all, int64_t first,
                            int64_t rows) {
  const int64_t per = kC * kH * kW;
  std::vector<double> part(all.begin() + first * per,
                           all.begin() + (first + rows) * per);
  return Tensor::FromVector(part, {rows, kC, kH, kW});
}

absl::Status SetAffine(nn::Module& bn) {
  for (const nn::NamedTensor& p : bn.NamedParameters()) {
    const double base = p.name == "weight" ? 1.5 : -0.25;
    TANDEM_ASSIGN_OR_RETURN(Tensor v, Tensor::FromVector(std::vector<double>{
                                          base, base + 0.5, base - 0.75}));
    TANDEM_RETURN_IF_ERROR(p.tensor.CopyFrom(v));
  }
  return absl::OkStatus();
}

absl::Status CheckSyncBatchNormRank(comm::Communicator& comm) {
  const int world = comm.size();
  const int rank = comm.rank();
  const int64_t total = world * kPerRank;
  TANDEM_ASSIGN_OR_RETURN(auto ref_bn, nn::BatchNorm2d::Create(kC, Options()));
  TANDEM_ASSIGN_OR_RETURN(Result ref, Train(*ref_bn, 0, total, total));
  TANDEM_ASSIGN_OR_RETURN(auto bn, SyncBatchNorm::Create(kC, Options(), comm));
  TANDEM_ASSIGN_OR_RETURN(Result got,
                          Train(*bn, rank * kPerRank, kPerRank, total));
  const std::string at = absl::StrCat("world ", world, " rank ", rank);
  const int64_t slice = kPerRank * kC * kH * kW;
  for (int s = 0; s < kSteps; ++s) {
    // The rank's output and input gradient are its slice of the whole.
    TANDEM_RETURN_IF_ERROR(Near(got.y[s], ref.y[s].data() + rank * slice, slice,
                                absl::StrCat(at, " step ", s, " y")));
    TANDEM_RETURN_IF_ERROR(Near(got.dx[s], ref.dx[s].data() + rank * slice,
                                slice, absl::StrCat(at, " step ", s, " dx")));
  }
  // Every rank ends with the global running statistics.
  TANDEM_RETURN_IF_ERROR(Near(got.running_mean, ref.running_mean.data(), kC,
                              at + " running_mean"));
  TANDEM_RETURN_IF_ERROR(
      Near(got.running_var, ref.running_var.data(), kC, at + " running_var"));
  if (got.batches != kSteps) {
    return absl::InternalError(absl::StrCat(
        at, ": num_batches_tracked ", got.batches, ", expected ", kSteps));
  }
  // The parameters' gradients are local (PyTorch's too): a rank's alone is
  // not the whole batch's...
  if (world > 1 && !(std::abs(got.dbias[0] - ref.dbias[0]) > 1e-3)) {
    return absl::InternalError(absl::StrCat(
        at, ": the local bias gradient ", got.dbias[0],
        " equals the whole batch's ", ref.dbias[0],
        "; SyncBatchNorm's parameter gradients should be per rank"));
  }
  // ... but their SUM over ranks is the one-rank gradient of the same loss
  // (DDP's averaging all-reduce then gives sum / N, matching a loss that is
  // itself averaged over ranks).
  std::vector<double> sums = got.dweight;
  sums.insert(sums.end(), got.dbias.begin(), got.dbias.end());
  TANDEM_RETURN_IF_ERROR(
      comm.AllReduce(comm::HostView(absl::MakeSpan(sums)), comm::ReduceOp::kSum)
          ->Wait());
  TANDEM_RETURN_IF_ERROR(
      Near(std::vector<double>(sums.begin(), sums.begin() + kC),
           ref.dweight.data(), kC, at + " sum of dweight"));
  return Near(std::vector<double>(sums.begin() + kC, sums.end()),
              ref.dbias.data(), kC, at + " sum of dbias");
}

}  // namespace tandem::train::sync_bn_testing
