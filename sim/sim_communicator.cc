#include "sim/sim_communicator.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "comm/fingerprint.h"
#include "comm/split_plan.h"
#include "comm/types.h"
#include "comm/work.h"
#include "sim/fast_lane.h"
#include "sim/fiber.h"
#include "sim/group.h"

namespace tandem::sim::internal {
namespace {

using comm::BufferView;
using comm::OpKind;

// Stops charging compute to a rank's clock (if any) while its thread is
// inside the communicator: that time is data movement of the simulation, not
// the rank's compute.
class ClockPause {
 public:
  explicit ClockPause(RankClock* clock) : clock_(clock) {
    if (clock_ != nullptr) now_s_ = clock_->Pause();
  }
  ~ClockPause() {
    if (clock_ != nullptr) clock_->Resume();
  }
  ClockPause(const ClockPause&) = delete;
  ClockPause& operator=(const ClockPause&) = delete;
  // The rank's simulated time on entry (0 when the clock is off).
  double now_s() const { return now_s_; }

 private:
  RankClock* const clock_;
  double now_s_ = 0;
};

}  // namespace

// -------------------------------------------------------------- SimWork ---

SimWork::SimWork(Group& group, std::shared_ptr<Slot> slot, int home, int rank,
                 comm::WorkRecord record, Deadline op_deadline,
                 std::shared_ptr<std::atomic<bool>> released, RankClock* clock,
                 int stream, int src, int dst)
    : comm::Work(std::move(record)),
      group_(group),
      slot_(std::move(slot)),
      home_(home),
      rank_(rank),
      op_deadline_(op_deadline),
      released_(std::move(released)),
      clock_(clock),
      stream_(stream),
      src_(src),
      dst_(dst) {}

SimWork::~SimWork() {
  if (finished_) return;
  // The rank is going down: its buffers may be gone as soon as the stack
  // unwinds, so nobody may finish this operation. Fail everyone now.
  group_.AbortIfUnwinding(rank_, record().fp);
  // Bounded by the operation timeout; ends at once if the run aborted.
  (void)Wait(absl::InfiniteDuration());
  released_->store(true);
}

bool SimWork::IsCompleted() {
  if (finished_) return true;
  if (!Poll()) {
    // A rank polling in a loop on a fiber must let the others run.
    YieldIfOnFiber();
    return false;
  }
  return true;
}

bool SimWork::Poll() {
  ClockPause pause(clock_);
  if (group_.aborted()) {
    if (slot_->ready() && slot_->active() != 0) return false;
    (void)Fail(group_.abort_reason());
    return true;
  }
  if (!slot_->ready()) {
    // Non-blocking check (wait deadline = now) that still enforces the
    // operation timeout and notices ranks that exited without issuing it.
    AwaitResult r = group_.Await(rank_, *slot_, Group::Phase::kReady, kPoll,
                                 op_deadline_, record().start);
    if (r.kind == AwaitResult::Kind::kFailed) {
      (void)Fail(r.status);
      return true;
    }
    if (r.kind == AwaitResult::Kind::kWaitTimeout) return false;
  }
  if (!slot_->tasks_done()) slot_->Help(home_, group_, /*max_tasks=*/1);
  if (slot_->tasks_done()) {
    FinishOk();
    return true;
  }
  return false;
}

absl::Status SimWork::Wait(absl::Duration timeout) {
  if (finished_) return status_;
  ClockPause pause(clock_);
  const Deadline wait_deadline = DeadlineAfter(timeout);
  auto still_in_flight = [&] {
    return absl::DeadlineExceededError(
        absl::StrCat("rank ", rank_, ": ", record().fp.DebugString(),
                     " has not completed after ", absl::FormatDuration(timeout),
                     " (the Wait timeout; the operation is still in flight): ",
                     group_.PendingDescription(*slot_)));
  };
  AwaitResult r = group_.Await(rank_, *slot_, Group::Phase::kReady,
                               wait_deadline, op_deadline_, record().start);
  if (r.kind == AwaitResult::Kind::kWaitTimeout) return still_in_flight();
  if (r.kind == AwaitResult::Kind::kFailed) return Fail(r.status);
  slot_->Help(home_, group_, std::numeric_limits<int64_t>::max());
  r = group_.Await(rank_, *slot_, Group::Phase::kTasksDone, wait_deadline,
                   op_deadline_, record().start);
  if (r.kind == AwaitResult::Kind::kWaitTimeout) return still_in_flight();
  if (r.kind == AwaitResult::Kind::kFailed) return Fail(r.status);
  FinishOk();
  return status_;
}

void SimWork::FinishOk() {
  if (clock_ != nullptr) {
    const comm::Fingerprint& fp = record().fp;
    if (fp.op == OpKind::kSend || fp.op == OpKind::kRecv) {
      clock_->OnPointToPointCompleted(stream_, fp, *slot_, src_, dst_);
    } else {
      clock_->OnCollectiveCompleted(stream_, fp.seq);
    }
  }
  Finish(absl::OkStatus());
}

void SimWork::Finish(absl::Status status) {
  finished_ = true;
  MarkEnded();
  status_ = std::move(status);
  released_->store(true);
}

absl::Status SimWork::Fail(const absl::Status& reason) {
  // Tasks of other threads may still be writing into this rank's buffers;
  // the abort stopped new claims, so this wait is short.
  group_.AwaitQuiescent(rank_, *slot_);
  Finish(
      absl::Status(reason.code(),
                   absl::StrCat("rank ", rank_, ": ", record().fp.DebugString(),
                                " failed: ", reason.message())));
  return status_;
}

// ------------------------------------------------------ SimCommunicator ---

SimCommunicator::SimCommunicator(Group& group, int rank, comm::LineSink& sink)
    : group_(group), rank_(rank), sink_(sink) {
  if (group.options().clock.has_value()) {
    clock_ = std::make_shared<RankClock>(*group.options().clock, rank);
  }
}

SimCommunicator::SimCommunicator(std::shared_ptr<Group> subgroup, int rank,
                                 comm::LineSink& sink,
                                 std::vector<int> global_ranks,
                                 std::shared_ptr<RankClock> clock, int stream)
    : subgroup_(std::move(subgroup)),
      group_(*subgroup_),
      rank_(rank),
      sink_(sink),
      global_ranks_(std::move(global_ranks)),
      clock_(std::move(clock)),
      clock_stream_(stream) {}

SimCommunicator::~SimCommunicator() {
  if (subgroup_ != nullptr) group_.MarkExited(rank_);
}

absl::StatusOr<std::unique_ptr<comm::Communicator>> SimCommunicator::Split(
    int color, int key) {
  // The split's number: this rank's next collective, the same on every
  // rank (the all-gather below is that collective).
  const int64_t split = next_collective_;
  TANDEM_ASSIGN_OR_RETURN(comm::SplitPlan plan,
                          comm::PlanSplit(*this, color, key));
  if (plan.sub_rank < 0) return nullptr;
  std::vector<int> global_ranks;
  for (int r : plan.members) {
    global_ranks.push_back(global_ranks_.empty() ? r : global_ranks_[r]);
  }
  int stream = RankClock::kRunStream;
  if (clock_ != nullptr) {
    absl::StatusOr<int> s = clock_->AddStream(global_ranks);
    if (!s.ok()) {
      return absl::Status(
          s.status().code(),
          absl::StrCat("Split on rank ", rank_,
                       ": the network clock: ", s.status().message()));
    }
    stream = *s;
  }
  std::shared_ptr<Group> sub =
      group_.SubGroup(split, color, static_cast<int>(plan.members.size()));
  return std::unique_ptr<comm::Communicator>(
      new SimCommunicator(std::move(sub), plan.sub_rank, sink_,
                          std::move(global_ranks), clock_, stream));
}

SimCommunicator::Range SimCommunicator::RangeOf(const BufferView& buf) {
  const auto begin = reinterpret_cast<uintptr_t>(buf.data);
  return Range{begin, begin + static_cast<uintptr_t>(buf.bytes())};
}

std::unique_ptr<comm::Work> SimCommunicator::Post(const Operation& op) {
  const comm::BufferView& buf = op.buf;
  Access access;
  switch (op.fp.op) {
    case OpKind::kAllReduce:
      access.write = RangeOf(buf);
      return IssueCollective(op.fp, Endpoint{buf.data, buf.data}, access);
    case OpKind::kBroadcast:
      (rank_ == op.fp.root ? access.read : access.write) = RangeOf(buf);
      return IssueCollective(op.fp, Endpoint{buf.data, buf.data}, access);
    case OpKind::kAllGather:
    case OpKind::kReduceScatter:
      access.read = RangeOf(buf);
      access.write = RangeOf(op.recv);
      return IssueCollective(op.fp, Endpoint{buf.data, op.recv.data}, access);
    case OpKind::kSend:
      access.read = RangeOf(buf);
      return IssuePointToPoint(op.fp.peer, op.fp, Endpoint{buf.data, nullptr},
                               access);
    case OpKind::kRecv:
      access.write = RangeOf(buf);
      return IssuePointToPoint(op.fp.peer, op.fp, Endpoint{nullptr, buf.data},
                               access);
    case OpKind::kBarrier:
      break;
  }
  return IssueCollective(op.fp, Endpoint{}, Access{});
}

std::unique_ptr<comm::Work> SimCommunicator::IssueCollective(
    comm::Fingerprint fp, Endpoint endpoint, Access access) {
  ClockPause pause(clock_.get());
  fp.seq = next_collective_;
  if (group_.aborted()) {
    return comm::MakeCompletedWork(Annotate(fp, group_.abort_reason()),
                                   comm::StartRecord(fp, size()));
  }
  if (absl::Status s = CheckNoConflict(fp, access); !s.ok()) {
    return comm::MakeRejectedWork(s, fp, size());
  }
  for (const Fault& fault : group_.options().faults) {
    if (fault.rank != rank_ || fault.collective != fp.seq) continue;
    if (fault.kind == Fault::Kind::kDelay) {
      group_.SleepUnlessAborted(rank_, fault.delay);
    } else {
      absl::Status injected = absl::UnavailableError(
          absl::StrCat("sim: injected fault: rank ", rank_, " fails at ",
                       fp.DebugString(), " (sim::Fault::FailAt)"));
      group_.Abort(absl::AbortedError(
          absl::StrCat("sim: rank ", rank_, " failed: ", injected.message())));
      ++next_collective_;
      return comm::MakeCompletedWork(Annotate(fp, injected),
                                     comm::StartRecord(fp, size()));
    }
  }
  // Small all-reduces take the lanes (sim/fast_lane.h): the same checks, a
  // fraction of the Slot path's cache traffic. Not with the network clock,
  // which costs every collective through its Slot.
  if (clock_ == nullptr && group_.fast_lanes() != nullptr &&
      FastLanes::Eligible(fp)) {
    // As PostCollective does: an injected delay may have outlasted the run.
    if (group_.aborted()) {
      ++next_collective_;
      return comm::MakeCompletedWork(Annotate(fp, group_.abort_reason()),
                                     comm::StartRecord(fp, size()));
    }
    group_.fast_lanes()->Post(rank_, fp, endpoint.recv);
    group_.CountIssued(rank_, fp.seq);
    ++next_collective_;
    std::shared_ptr<std::atomic<bool>> released =
        TrackInFlight(fp, std::move(access));
    auto work = std::make_unique<FastWork>(
        group_, rank_, comm::StartRecord(fp, size()),
        OpDeadlineAfter(group_.options().timeout), std::move(released));
    group_.fast_lanes()->WakePeers(rank_);  // after the work above: see there
    return work;
  }
  absl::StatusOr<std::shared_ptr<Slot>> slot =
      group_.PostCollective(rank_, fp, endpoint, pause.now_s());
  ++next_collective_;
  if (!slot.ok())
    return comm::MakeCompletedWork(Annotate(fp, slot.status()),
                                   comm::StartRecord(fp, size()));
  if (clock_ != nullptr) clock_->OnCollectiveIssued(clock_stream_, fp, *slot);
  std::shared_ptr<std::atomic<bool>> released =
      TrackInFlight(fp, std::move(access));
  return std::make_unique<SimWork>(
      group_, *std::move(slot), /*home=*/rank_, rank_,
      comm::StartRecord(fp, size()), OpDeadlineAfter(group_.options().timeout),
      std::move(released), clock_.get(), clock_stream_);
}

std::unique_ptr<comm::Work> SimCommunicator::IssuePointToPoint(
    int peer, comm::Fingerprint fp, Endpoint endpoint, Access access) {
  ClockPause pause(clock_.get());
  const bool is_send = fp.op == OpKind::kSend;
  int64_t& counter = is_send ? sends_to_[peer] : recvs_from_[peer];
  fp.seq = counter;
  if (group_.aborted()) {
    return comm::MakeCompletedWork(Annotate(fp, group_.abort_reason()),
                                   comm::StartRecord(fp, size()));
  }
  if (absl::Status s = CheckNoConflict(fp, access); !s.ok()) {
    return comm::MakeRejectedWork(s, fp, size());
  }
  const int src = is_send ? rank_ : peer;
  const int dst = is_send ? peer : rank_;
  absl::StatusOr<std::shared_ptr<Slot>> slot =
      group_.PostPointToPoint(rank_, src, dst, fp, endpoint, pause.now_s());
  ++counter;
  if (!slot.ok())
    return comm::MakeCompletedWork(Annotate(fp, slot.status()),
                                   comm::StartRecord(fp, size()));
  std::shared_ptr<std::atomic<bool>> released =
      TrackInFlight(fp, std::move(access));
  return std::make_unique<SimWork>(
      group_, *std::move(slot), /*home=*/0, rank_,
      comm::StartRecord(fp, size()), OpDeadlineAfter(group_.options().timeout),
      std::move(released), clock_.get(), clock_stream_, src, dst);
}

std::shared_ptr<std::atomic<bool>> SimCommunicator::TrackInFlight(
    const comm::Fingerprint& fp, Access access) {
  auto released = std::allocate_shared<std::atomic<bool>>(
      CachedAllocator<std::atomic<bool>>(), false);
  in_flight_.push_back(InFlight{released, fp, access});
  return released;
}

absl::Status SimCommunicator::CheckNoConflict(const comm::Fingerprint& fp,
                                              const Access& access) {
  // Forget operations this rank has seen complete (or dropped).
  in_flight_.erase(
      std::remove_if(in_flight_.begin(), in_flight_.end(),
                     [](const InFlight& f) { return f.released->load(); }),
      in_flight_.end());
  auto overlaps = [](const Range& x, const Range& y) {
    return x.begin < y.end && y.begin < x.end;
  };
  for (const InFlight& f : in_flight_) {
    if (overlaps(access.write, f.access.read) ||
        overlaps(access.write, f.access.write) ||
        overlaps(access.read, f.access.write)) {
      return absl::InvalidArgumentError(absl::StrCat(
          comm::OpKindName(fp.op), " on rank ", rank_,
          ": its buffers overlap those of ", f.fp.DebugString(),
          ", which is still in flight (not yet waited), and one of the two "
          "writes them. Wait for that operation before reusing its buffers, "
          "or use separate buffers"));
    }
  }
  return absl::OkStatus();
}

absl::Status SimCommunicator::Annotate(const comm::Fingerprint& fp,
                                       const absl::Status& reason) const {
  return absl::Status(reason.code(),
                      absl::StrCat("rank ", rank_, ": ", fp.DebugString(),
                                   " failed: ", reason.message()));
}

}  // namespace tandem::sim::internal
