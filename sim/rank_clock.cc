#include "sim/rank_clock.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/math_tally.h"
#include "comm/fingerprint.h"
#include "comm/types.h"
#include "sim/clock.h"
#include "sim/cost/collective_cost.h"
#include "sim/cost/topology.h"
#include "sim/group.h"

namespace tandem::sim::internal {
namespace {

// The nccl-tests size S of a collective (sim/cost/collective_cost.h).
int64_t NcclTestsBytes(const comm::Fingerprint& fp, int world_size) {
  const int64_t elem = comm::DTypeSize(fp.dtype);
  switch (fp.op) {
    case comm::OpKind::kAllGather:
    case comm::OpKind::kReduceScatter:
      return fp.count * elem * world_size;
    default:
      return fp.count * elem;
  }
}

}  // namespace

RankClock::RankClock(const ClockOptions& options, int rank)
    : options_(options),
      rank_(rank),
      // Constructed on the thread that starts the run, used on the rank's
      // own new thread, whose CPU time and math tally start at 0: the
      // rank's compute is measured from its thread's start (marking this
      // thread's clock lost everything before the rank's first collective).
      cpu_mark_s_(0),
      math_mark_s_(0) {
  streams_.push_back(Stream{options.topology, {}, 0, {}});
}

absl::StatusOr<int> RankClock::AddStream(const std::vector<int>& global_ranks) {
  absl::StatusOr<cost::Topology> topology =
      cost::SubTopology(options_.topology, global_ranks);
  if (!topology.ok()) return topology.status();
  streams_.push_back(Stream{*std::move(topology), global_ranks, 0, {}});
  return static_cast<int>(streams_.size()) - 1;
}

double RankClock::ChargeFor(const ClockOptions& options, double busy_s,
                            double math_s) {
  busy_s = std::max(0.0, busy_s);
  if (options.memory_scale < 0) return busy_s * options.compute_scale;
  math_s = std::clamp(math_s, 0.0, busy_s);
  return math_s * options.compute_scale +
         (busy_s - math_s) * options.memory_scale;
}

double RankClock::Pause() {
  const double cpu = base::ThreadCpuSeconds();
  const double math = base::ThisThreadMathSeconds();
  const double compute =
      ChargeFor(options_, cpu - cpu_mark_s_, math - math_mark_s_);
  if (compute > 0) {
    reading_.compute_s += compute;
    reading_.now_s += compute;
  }
  cpu_mark_s_ = cpu;
  math_mark_s_ = math;
  return reading_.now_s;
}

void RankClock::Resume() {
  cpu_mark_s_ = base::ThreadCpuSeconds();
  math_mark_s_ = base::ThisThreadMathSeconds();
}

void RankClock::Advance(double seconds) {
  if (seconds <= 0) return;
  reading_.compute_s += seconds;
  reading_.now_s += seconds;
}

void RankClock::OnCollectiveIssued(int stream, const comm::Fingerprint& fp,
                                   std::shared_ptr<const Slot> slot) {
  Stream& s = streams_[stream];
  const cost::Topology& t = s.topology;
  const int members = s.global_ranks.empty()
                          ? t.world_size()
                          : static_cast<int>(s.global_ranks.size());
  // The options were validated (world size, algorithm) before the run, and
  // an algorithm a collective lacks (or a sub-group's topology lacks: nvls
  // across nodes) falls back to the tuner's choice.
  absl::StatusOr<double> d = cost::CollectiveSeconds(
      t, fp.op, NcclTestsBytes(fp, members), options_.algorithm);
  if (!d.ok()) {
    d = cost::CollectiveSeconds(t, fp.op, NcclTestsBytes(fp, members),
                                cost::Algorithm::kAuto);
  }
  s.pending.push_back(Pending{fp.seq, std::move(slot), d.ok() ? *d : 0.0});
}

void RankClock::SettleThrough(Stream& s, int64_t seq) {
  for (Pending& p : s.pending) {
    if (p.seq > seq) break;
    if (p.end_s >= 0) continue;
    // Collective `seq` is ready, so every rank has issued every earlier one
    // too: their issue times are final.
    const double start = std::max(p.slot->latest_issue_s(), s.network_free_s);
    p.end_s = start + p.duration_s;
    s.network_free_s = p.end_s;
  }
}

void RankClock::OnCollectiveCompleted(int stream, int64_t seq) {
  Stream& s = streams_[stream];
  SettleThrough(s, seq);
  for (auto it = s.pending.begin(); it != s.pending.end(); ++it) {
    if (it->seq != seq) continue;
    ObserveEnd(it->end_s, it->duration_s);
    it->slot.reset();
    break;
  }
  // Drop settled entries that were observed, from the front.
  while (!s.pending.empty() && s.pending.front().end_s >= 0 &&
         s.pending.front().slot == nullptr) {
    s.pending.pop_front();
  }
}

void RankClock::OnPointToPointCompleted(int stream, const comm::Fingerprint& fp,
                                        const Slot& slot, int src, int dst) {
  // One hop between the two GPUs of the run's machine.
  const Stream& s = streams_[stream];
  if (!s.global_ranks.empty()) {
    src = s.global_ranks[src];
    dst = s.global_ranks[dst];
  }
  const double d = cost::PointToPointSeconds(
      options_.topology, src, dst, fp.count * comm::DTypeSize(fp.dtype));
  ObserveEnd(slot.latest_issue_s() + d, d);
}

void RankClock::ObserveEnd(double end_s, double duration_s) {
  reading_.comm_s += duration_s;
  ++reading_.operations;
  if (end_s > reading_.now_s) {
    reading_.exposed_comm_s += end_s - reading_.now_s;
    reading_.now_s = end_s;
  }
}

}  // namespace tandem::sim::internal
