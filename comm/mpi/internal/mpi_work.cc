#include "comm/mpi/internal/mpi_work.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm/fingerprint.h"
#include "comm/stall_note.h"

namespace tandem::comm::mpi_internal {

absl::Status MpiError(absl::string_view call, int code, int rank) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  std::string what = MPI_Error_string(code, text, &length) == MPI_SUCCESS
                         ? std::string(text, length)
                         : absl::StrCat("MPI error ", code);
  return absl::InternalError(
      absl::StrCat(call, " on rank ", rank, " failed: ", what));
}

namespace {

struct KeptBuffers {
  std::mutex mu;
  std::vector<std::shared_ptr<const void>> buffers;  // guarded by mu
};

KeptBuffers& Kept() {
  // Never destroyed: a static destructor runs after main's MPI_Finalize,
  // or without it at all, and must not free what MPI may still write to.
  static KeptBuffers* const kept = new KeptBuffers;
  return *kept;
}

}  // namespace

void KeepForMpi(std::shared_ptr<const void> buffer) {
  KeptBuffers& kept = Kept();
  std::lock_guard<std::mutex> lock(kept.mu);
  kept.buffers.push_back(std::move(buffer));
}

int64_t KeptForMpiCount() {
  KeptBuffers& kept = Kept();
  std::lock_guard<std::mutex> lock(kept.mu);
  return static_cast<int64_t>(kept.buffers.size());
}

MpiWork::MpiWork(WorkRecord record, const WaitPolicy& policy)
    : Work(std::move(record)),
      policy_(policy),
      deadline_(policy.timeout == absl::InfiniteDuration()
                    ? absl::InfiniteFuture()
                    : this->record().start + policy.timeout) {}

MpiWork::~MpiWork() {
  if (check_ != nullptr) check_->Remove(*this);
  // A completed request is MPI_REQUEST_NULL (MPI_Testall sets it); any
  // other is still MPI's, and so is scratch_ if it was handed to it. The
  // move keeps the same heap block, the one MPI holds a pointer to.
  const bool in_flight =
      std::any_of(requests_.begin(), requests_.end(),
                  [](MPI_Request r) { return r != MPI_REQUEST_NULL; });
  if (in_flight && !scratch_.empty()) {
    KeepForMpi(std::make_shared<std::vector<float>>(std::move(scratch_)));
  }
}

void MpiWork::Fail(absl::Status status) {
  status_ = std::move(status);
  done_ = true;
  MarkEnded();
}

void MpiWork::Start(Launch launch, CollectiveCheck* check) {
  if (check == nullptr) {
    absl::Status started = launch(*this);
    if (!started.ok()) Fail(std::move(started));
    return;
  }
  check_ = check;
  check->Enqueue(*this, std::move(launch));
}

std::string MpiWork::Name() const {
  const Fingerprint& fp = record().fp;
  // DebugString is "#12 AllReduce(f32 x 1024, sum)"; messages read better
  // as "AllReduce #12 (f32 x 1024, sum)".
  std::string args = fp.DebugString();
  args = args.substr(args.find('('));
  return absl::StrCat(OpKindName(fp.op), " #", fp.seq, " ", args);
}

std::string MpiWork::Progress() const {
  if (check_ != nullptr) {
    return "not every rank has issued it yet (MPI cannot tell which ranks "
           "are missing)";
  }
  if (checked_) return "every rank issued it; its data is still moving";
  if (record().fp.op == OpKind::kSend || record().fp.op == OpKind::kRecv) {
    return "the peer has not matched it or its data is still moving (MPI "
           "cannot tell which)";
  }
  return "some rank has not issued it or its data is still moving (MPI "
         "cannot tell which with the collective check off)";
}

bool MpiWork::IsCompleted() {
  if (!done_) Poll();
  return done_;
}

void MpiWork::Poll() {
  if (check_ != nullptr) {
    check_->Advance();
    if (check_ != nullptr || done_) return;
  }
  int flag = 0;
  int rc = MPI_Testall(static_cast<int>(requests_.size()), requests_.data(),
                       &flag, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) {
    Fail(MpiError(Name(), rc, policy_.rank));
    return;
  }
  if (!flag) return;
  if (finish_) finish_();
  done_ = true;
  MarkEnded();
}

void MpiWork::MaybeNote(absl::Time now, absl::Time& next_note) {
  if (policy_.rank != 0 || policy_.stall_note_interval <= absl::ZeroDuration())
    return;
  if (now < next_note) return;
  next_note = now + policy_.stall_note_interval;
  comm::PrintStallNote(0, Name(), now - record().start, Progress(),
                       deadline_ == absl::InfiniteFuture()
                           ? absl::InfiniteDuration()
                           : deadline_ - now);
}

absl::Status MpiWork::Wait(absl::Duration timeout) {
  const absl::Time give_up = timeout == absl::InfiniteDuration()
                                 ? absl::InfiniteFuture()
                                 : absl::Now() + timeout;
  // Poll with yields for the first 20 ms: libnbc moves data only inside
  // MPI_Testall, so any pause between polls adds straight to the
  // operation's time (napping after 100 µs made a 140 µs 1 MiB all-reduce
  // take 1.2 ms). A yield still lets other ranks sharing the core run.
  // After that, the peer is late rather than the data in flight: nap 50 µs
  // between polls so the waiting rank leaves the core to others.
  const absl::Time nap_after = absl::Now() + absl::Milliseconds(20);
  absl::Time next_note = record().start + policy_.stall_note_interval;
  while (!done_) {
    Poll();
    if (done_) break;
    const absl::Time now = absl::Now();
    if (now >= deadline_) {
      Fail(absl::DeadlineExceededError(absl::StrCat(
          "mpi: ", Name(), " on rank ", policy_.rank,
          " did not complete within the MPI backend's timeout of ",
          absl::FormatDuration(policy_.timeout), " (waited ",
          absl::FormatDuration(
              absl::Trunc(now - record().start, absl::Milliseconds(1))),
          "): ", Progress(),
          ". A rank may have died, stopped, or issued different operations. "
          "MPI cannot cancel it: end the job (raise MpiOptions::timeout if a "
          "rank is legitimately that slow).")));
      break;
    }
    if (now >= give_up) {
      return absl::DeadlineExceededError(absl::StrCat(
          Name(), " on rank ", policy_.rank, " still in flight after ",
          absl::FormatDuration(timeout), "; Wait again to keep waiting"));
    }
    MaybeNote(now, next_note);
    if (now < nap_after) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  return status_;
}

CollectiveCheck::CollectiveCheck(MPI_Comm comm, int rank, int size)
    : comm_(comm), rank_(rank), size_(size) {}

CollectiveCheck::~CollectiveCheck() {
  // MPI holds pointers into each in-flight entry (mine, gathered): splice
  // those nodes, unmoved, into a list that is kept; finished ones are freed.
  auto in_flight = std::make_shared<std::list<Pending>>();
  for (auto it = queue_.begin(); it != queue_.end();) {
    auto next = std::next(it);
    int flag = 0;
    const int rc = MPI_Test(&it->request, &flag, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS && !flag) {
      it->launch = nullptr;  // never launched; drops the captured views
      it->work = nullptr;
      in_flight->splice(in_flight->end(), queue_, it);
    }
    it = next;
  }
  if (!in_flight->empty()) KeepForMpi(std::move(in_flight));
}

void CollectiveCheck::Enqueue(MpiWork& work, MpiWork::Launch launch) {
  Pending& p = queue_.emplace_back();
  p.work = &work;
  p.launch = std::move(launch);
  p.mine = Encode(work.record().fp);
  p.gathered.resize(static_cast<size_t>(size_) * kFingerprintWords);
  int rc = MPI_Iallgather(p.mine.data(), kFingerprintWords, MPI_INT64_T,
                          p.gathered.data(), kFingerprintWords, MPI_INT64_T,
                          comm_, &p.request);
  if (rc != MPI_SUCCESS) {
    queue_.pop_back();
    work.check_ = nullptr;
    work.Fail(MpiError("MPI_Iallgather (collective check)", rc, rank_));
  }
}

void CollectiveCheck::Remove(MpiWork& work) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->work == &work) {
      // The exchange stays in MPI's hands; its buffers must outlive it.
      it->work = nullptr;
      return;
    }
  }
}

void CollectiveCheck::Advance() {
  while (!queue_.empty()) {
    Pending& p = queue_.front();
    int flag = 0;
    int rc = MPI_Test(&p.request, &flag, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS && !flag) return;
    MpiWork* work = p.work;
    absl::Status status =
        rc != MPI_SUCCESS
            ? MpiError("MPI_Iallgather (collective check)", rc, rank_)
            : Compare(p);
    MpiWork::Launch launch = std::move(p.launch);
    queue_.pop_front();
    if (work == nullptr) continue;  // destroyed; nothing to launch
    work->check_ = nullptr;
    if (work->done_) continue;  // timed out while checking: never launched
    work->checked_ = status.ok();
    if (status.ok()) status = launch(*work);
    if (!status.ok()) work->Fail(std::move(status));
  }
}

absl::Status CollectiveCheck::Compare(const Pending& p) const {
  return CompareGatheredFingerprints("mpi", rank_, size_, p.gathered, p.mine);
}

}  // namespace tandem::comm::mpi_internal
