#include "train/parallel/core/finite_check.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/dtype.h"
#include "base/status_macros.h"
#include "comm/types.h"
#include "tensor/device.h"
#include "tensor/tensor.h"
#include "train/parallel/core/staged_all_gather.h"

namespace tandem::train {
namespace {

// What one rank saw: `index` -1 when everything was finite, 0 for the loss,
// 1 + i for parameter i; `value` the first non-finite value.
struct Finding {
  int64_t index = -1;
  double value = 0;
};

// Index of the first non-finite element of `x`, or -1. IEEE floats are
// non-finite exactly when their exponent bits are all ones, i.e. when the
// bits without the sign are >= those of +inf; an unsigned max over those
// bits vectorises, and only a block that holds one is searched again.
template <typename Float, typename Bits>
int64_t FirstNonFinite(const Float* x, int64_t n) {
  constexpr Bits kSign = Bits{1} << (8 * sizeof(Bits) - 1);
  const Float inf = INFINITY;
  Bits inf_bits;
  std::memcpy(&inf_bits, &inf, sizeof(Bits));
  constexpr int64_t kBlock = 4096;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = std::min(n, start + kBlock);
    Bits max_bits = 0;
    for (int64_t i = start; i < end; ++i) {
      Bits bits;
      std::memcpy(&bits, &x[i], sizeof(Bits));
      bits &= ~kSign;
      max_bits = bits > max_bits ? bits : max_bits;
    }
    if (max_bits < inf_bits) continue;
    for (int64_t i = start; i < end; ++i) {
      if (!std::isfinite(x[i])) return i;
    }
  }
  return -1;
}

// The first non-finite element of a host f32/f64 tensor (index -1 if none).
Finding ScanHost(const Tensor& t) {
  int64_t i = -1;
  double value = 0;
  if (t.dtype() == DType::kF32) {
    i = FirstNonFinite<float, uint32_t>(t.data<float>(), t.numel());
    if (i >= 0) value = t.data<float>()[i];
  } else {
    i = FirstNonFinite<double, uint64_t>(t.data<double>(), t.numel());
    if (i >= 0) value = t.data<double>()[i];
  }
  return Finding{i, value};
}

// This rank's first non-finite value among `params` (index 1 + i). A
// parameter off the CPU is copied to the host first: one device-to-host copy
// per scan, which the trainers run every kParameterCheckInterval steps.
absl::StatusOr<Finding> ScanParameters(const std::vector<Tensor>& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor p = params[i];
    if (p.dtype() != DType::kF32 && p.dtype() != DType::kF64) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CheckStepFinite: parameter ", i, " is ", DTypeName(p.dtype()),
          "; only f32 and f64 parameters are checked (as Sgd and AdamW "
          "take)"));
    }
    if (!p.device().is_cpu()) {
      TANDEM_ASSIGN_OR_RETURN(p, p.To(Device::CPU()));
    }
    const Finding f = ScanHost(p);
    if (f.index >= 0) return Finding{static_cast<int64_t>(i) + 1, f.value};
  }
  return Finding{};
}

}  // namespace

bool ParameterCheckDue(int64_t step, int64_t steps_per_epoch) {
  return (step + 1) % kParameterCheckInterval == 0 ||
         step + 1 == steps_per_epoch;
}

absl::StatusOr<StepOutcome> CheckStepFinite(comm::Communicator& comm,
                                            const nn::Module& model,
                                            const StepCheck& check) {
  const std::vector<Tensor> params = model.Parameters();
  Finding mine;
  if (check.outcome == StepOutcome::kApplied && !std::isfinite(check.loss)) {
    mine = {0, check.loss};
  } else if (check.check_parameters) {
    TANDEM_ASSIGN_OR_RETURN(mine, ScanParameters(params));
  }
  const Device device = params.empty() ? Device::CPU() : params[0].device();
  // Did any rank find something? One small all-reduce (the same cost per
  // rank at any world size); only then gather who and what.
  int64_t any = mine.index >= 0 ? 1 : 0;
  TANDEM_RETURN_IF_ERROR(AllReduceInt64(comm, device, absl::MakeSpan(&any, 1),
                                        comm::ReduceOp::kMax));
  if (any == 0) return check.outcome;
  // Two int64 per rank: the index and the value's bits.
  const std::vector<int64_t> send = {mine.index,
                                     std::bit_cast<int64_t>(mine.value)};
  std::vector<int64_t> all(2 * static_cast<size_t>(comm.size()));
  TANDEM_RETURN_IF_ERROR(
      AllGatherInt64(comm, device, send, absl::MakeSpan(all)));

  std::string report;
  std::vector<nn::NamedTensor> named;
  constexpr int kMaxListed = 8;  // ranks named in full; the rest are counted
  int listed = 0;
  int unlisted = 0;
  for (int r = 0; r < comm.size(); ++r) {
    const int64_t index = all[2 * r];
    if (index < 0) continue;
    if (listed == kMaxListed) {
      ++unlisted;
      continue;
    }
    ++listed;
    if (named.empty()) named = model.NamedParameters();
    std::string what = "loss";
    if (index > 0) {
      const size_t i = static_cast<size_t>(index - 1);
      what = i < named.size() ? absl::StrCat("parameter ", named[i].name)
                              : absl::StrCat("parameter #", i);
    }
    absl::StrAppend(&report, report.empty() ? "" : "; ", "rank ", r, ": ", what,
                    " = ", std::bit_cast<double>(all[2 * r + 1]));
  }
  if (report.empty()) return check.outcome;
  if (unlisted > 0) {
    absl::StrAppend(&report, "; and ", unlisted, " more rank(s)");
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "non-finite values at epoch ", check.epoch + 1, ", step ", check.step + 1,
      " (counted from 1): ", report,
      ". Every rank stops here. Lower the learning rate (--lr) or look for "
      "huge or non-finite values in the data."));
}

}  // namespace tandem::train
