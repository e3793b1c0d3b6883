#include "train/parallel/ddp/ddp_join_testing.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "tensor/ops.h"
#include "train/parallel/ddp/join.h"

namespace tandem::train {

absl::StatusOr<std::unique_ptr<BufferModel>> BufferModel::Create(
    float initial) {
  auto m = std::unique_ptr<BufferModel>(new BufferModel());
  TANDEM_ASSIGN_OR_RETURN(Tensor w, Tensor::Zeros({2, 1}));
  TANDEM_RETURN_IF_ERROR(m->RegisterParameter("w", w));
  TANDEM_ASSIGN_OR_RETURN(Tensor total,
                          Tensor::FromVector<float>({initial, initial}));
  TANDEM_RETURN_IF_ERROR(m->RegisterBuffer("total", total));
  TANDEM_ASSIGN_OR_RETURN(Tensor calls, Tensor::Zeros({1}, DType::kI64));
  TANDEM_RETURN_IF_ERROR(m->RegisterBuffer("calls", calls));
  TANDEM_ASSIGN_OR_RETURN(Tensor unused, Tensor::Zeros({3}));
  TANDEM_RETURN_IF_ERROR(m->RegisterBuffer("unused", unused));
  return m;
}

absl::StatusOr<Tensor> BufferModel::Forward(const Tensor& x) {
  if (is_training()) {
    const std::vector<Tensor> b = Buffers();
    TANDEM_ASSIGN_OR_RETURN(std::vector<float> total, b[0].ToVector<float>());
    TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> calls,
                            b[1].ToVector<int64_t>());
    entry_totals.push_back(total);
    entry_calls.push_back(calls[0]);
    TANDEM_ASSIGN_OR_RETURN(std::vector<float> xs, x.ToVector<float>());
    for (size_t i = 0; i < xs.size(); ++i) total[i % 2] += xs[i];
    ++calls[0];
    TANDEM_ASSIGN_OR_RETURN(Tensor t, Tensor::FromVector(total));
    TANDEM_RETURN_IF_ERROR(b[0].CopyFrom(t));
    TANDEM_ASSIGN_OR_RETURN(Tensor c, Tensor::FromVector(calls));
    TANDEM_RETURN_IF_ERROR(b[1].CopyFrom(c));
  }
  return MatMul(x, Parameters()[0]);
}

float XA(int r, int t) { return 6.f * static_cast<float>(r + t + 1); }
float XB(int r, int /*t*/) { return 12.f * static_cast<float>(r + 1); }

absl::StatusOr<Tensor> Input(int r, int t) {
  return Tensor::FromVector<float>({XA(r, t), XB(r, t)}, {1, 2});
}

absl::StatusOr<std::vector<float>> Step(DistributedDataParallel& ddp,
                                        optim::Sgd* sgd, const Tensor& batch) {
  TANDEM_ASSIGN_OR_RETURN(Tensor y, ddp.Forward(batch));
  TANDEM_ASSIGN_OR_RETURN(Tensor loss, Sum(y));
  ddp.module().ZeroGrad();
  TANDEM_RETURN_IF_ERROR(ddp.Backward(loss));
  TANDEM_ASSIGN_OR_RETURN(
      std::vector<float> grad,
      ddp.module().Parameters()[0].grad().ToVector<float>());
  if (sgd != nullptr) TANDEM_RETURN_IF_ERROR(sgd->Step());
  return grad;
}

void PrintTo(const JoinCase& c, std::ostream* os) {
  *os << "batches " << absl::StrJoin(c.batches, " ")
      << (c.divide_by_initial_world_size ? ", initial" : ", remaining");
}

std::string JoinCaseName(const JoinCase& c) {
  return absl::StrCat(
      absl::StrJoin(c.batches, "_"),
      c.divide_by_initial_world_size ? "_initial" : "_remaining");
}

std::vector<JoinCase> JoinCases() {
  return {{{3, 5, 4}, true},
          {{3, 5, 4}, false},
          // A power-of-two world: kAvg while the divisor is 4.
          {{2, 3, 1, 3}, true},
          {{2, 3, 1, 3}, false},
          // Even inputs: Finish shadows nothing.
          {{2, 2, 2}, true}};
}

namespace {

// "what: got <got>, expected <want>" when they differ (exact comparison).
template <typename T>
absl::Status Expect(const T& got, const T& want, int rank,
                    const std::string& what) {
  if (got == want) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      "rank ", rank, ": ", what, ": got ", absl::StrJoin({got}, ""),
      ", expected ", absl::StrJoin({want}, "")));
}
absl::Status Expect(const std::vector<float>& got,
                    const std::vector<float>& want, int rank,
                    const std::string& what) {
  if (got == want) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      "rank ", rank, ": ", what, ": got (", absl::StrJoin(got, ", "),
      "), expected (", absl::StrJoin(want, ", "), ")"));
}

}  // namespace

absl::Status RunUnevenJoin(const JoinCase& c, int rank,
                           comm::Communicator& comm) {
  const int n = static_cast<int>(c.batches.size());
  if (comm.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("the case has ", n, " ranks but the world ", comm.size()));
  }
  const int most = *std::max_element(c.batches.begin(), c.batches.end());
  // The highest rank among those with the most batches: the last to finish.
  int last = 0;
  for (int r = 0; r < n; ++r) {
    if (c.batches[r] == most) last = r;
  }
  const auto active = [&](int r, int t) { return c.batches[r] > t; };
  // Step t's reduced gradient with PyTorch's arithmetic.
  const auto expected_grad = [&](int t) {
    int count = 0;
    for (int r = 0; r < n; ++r) count += active(r, t) ? 1 : 0;
    const int d = c.divide_by_initial_world_size ? n : count;
    const float scale = static_cast<float>(1.0 / d);
    std::vector<float> sum = {0.f, 0.f};
    for (int r = 0; r < n; ++r) {
      if (!active(r, t)) continue;  // a finished rank adds zeros
      sum[0] += XA(r, t) * scale;
      sum[1] += XB(r, t) * scale;
    }
    return sum;
  };
  // Column 0 of the buffer every rank finds on entry to step t: the one the
  // highest active rank had after step t - 1; entry[most] is the last
  // finisher's at the end.
  std::vector<float> entry(most + 1, 0.f);
  for (int t = 1; t <= most; ++t) {
    int root = last;
    if (t < most) {
      for (int r = 0; r < n; ++r) {
        if (active(r, t)) root = r;
      }
    }
    entry[t] = entry[t - 1] + XA(root, t - 1);
  }
  // The last finisher's parameters: W -= grad at each step (lr 1, from 0).
  std::vector<float> final_w = {0.f, 0.f};
  for (int t = 0; t < most; ++t) {
    const std::vector<float> g = expected_grad(t);
    final_w[0] -= g[0];
    final_w[1] -= g[1];
  }

  // Rank-dependent initial buffers: Create broadcasts rank 0's.
  TANDEM_ASSIGN_OR_RETURN(auto model,
                          BufferModel::Create(static_cast<float>(rank)));
  TANDEM_ASSIGN_OR_RETURN(auto ddp,
                          DistributedDataParallel::Create(*model, comm));
  TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                          optim::Sgd::Create(model->Parameters(), 1.0));
  TANDEM_ASSIGN_OR_RETURN(
      auto join,
      Join::Create({ddp.get()}, {.divide_by_initial_world_size =
                                     c.divide_by_initial_world_size}));
  for (int t = 0; t < c.batches[rank]; ++t) {
    TANDEM_ASSIGN_OR_RETURN(Tensor x, Input(rank, t));
    TANDEM_ASSIGN_OR_RETURN(std::vector<float> grad, Step(*ddp, &sgd, x));
    const std::string step = absl::StrCat("step ", t);
    TANDEM_RETURN_IF_ERROR(
        Expect(grad, expected_grad(t), rank, step + " gradient"));
    TANDEM_RETURN_IF_ERROR(Expect(model->entry_totals[t][0], entry[t], rank,
                                  step + " buffer total on entry"));
    TANDEM_RETURN_IF_ERROR(Expect(model->entry_calls[t], int64_t{t}, rank,
                                  step + " buffer calls on entry"));
  }
  TANDEM_RETURN_IF_ERROR(join->Finish());
  TANDEM_RETURN_IF_ERROR(Expect(join->shadowed_steps(),
                                int64_t{most - c.batches[rank]}, rank,
                                "shadowed steps"));
  TANDEM_ASSIGN_OR_RETURN(std::vector<float> w,
                          model->Parameters()[0].ToVector<float>());
  TANDEM_RETURN_IF_ERROR(Expect(w, final_w, rank, "final W"));
  TANDEM_ASSIGN_OR_RETURN(std::vector<float> total,
                          model->Buffers()[0].ToVector<float>());
  return Expect(total[0], entry[most], rank, "final buffer total");
}

}  // namespace tandem::train
