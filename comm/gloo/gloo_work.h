// Internal pieces of the gloo engine (comm/gloo only): the adapter that lets
// Gloo's rendezvous use our TCP store, and the Work of a queued operation.
#ifndef TANDEM_COMM_GLOO_GLOO_WORK_H_
#define TANDEM_COMM_GLOO_GLOO_WORK_H_

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "base/unshared_status.h"
#include "comm/stall_note.h"
#include "comm/store/tcp_store.h"
#include "comm/work.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/store.h"

namespace tandem::comm::gloo_internal {

// Gloo's rendezvous Store over our TCP store client. Gloo expects failures
// as exceptions; they surface from connectFullMesh, which Create catches.
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  explicit StoreAdapter(TcpStoreClient& client) : client_(client) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Check(client_.Set(key, std::string(data.begin(), data.end())));
  }
  std::vector<char> get(const std::string& key) override {
    absl::StatusOr<std::string> v = client_.Get(key);
    Check(v.status());
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override {
    Check(client_.Wait(keys));
  }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    Check(client_.Wait(keys, absl::FromChrono(timeout)));
  }

 private:
  static void Check(const absl::Status& s) {
    if (!s.ok()) throw gloo::IoException(std::string(s.message()));
  }
  TcpStoreClient& client_;
};

// The completion state of one queued operation.
struct OpState {
  std::mutex mu;
  std::condition_variable cv;
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::Status status ABSL_GUARDED_BY(mu);

  void Finish(absl::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    if (done) return;
    done = true;
    status = std::move(s);
    cv.notify_all();
  }
};

// How a communicator's Works speak while a wait is stuck (shared by them,
// immutable): every `interval` of a blocked Wait (0: never) the waiting rank
// reports through the store that it reached the collective, learns which
// ranks have not, and rank 0 prints the stall note (comm/stall_note.h)
// naming them. Gloo itself cannot tell who is missing; the store can.
struct StallPolicy {
  int rank = 0;
  int size = 1;
  absl::Duration timeout = absl::Seconds(300);  // GlooOptions::timeout
  absl::Duration interval = absl::ZeroDuration();
  TcpStoreClient* store = nullptr;  // not owned; outlives the communicator
  std::string prefix;               // the communicator's store prefix
};

class GlooWork : public Work {
 public:
  GlooWork(WorkRecord record, std::shared_ptr<OpState> state,
           std::shared_ptr<const StallPolicy> stall)
      : Work(std::move(record)),
        state_(std::move(state)),
        stall_(std::move(stall)) {}

  bool IsCompleted() override {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->done) MarkEnded();
    return state_->done;
  }

  absl::Status Wait(absl::Duration timeout) override {
    const absl::Time give_up =
        timeout == absl::InfiniteDuration()
            ? absl::InfiniteFuture()
            : absl::Now() + std::max(timeout, absl::ZeroDuration());
    const bool notes =
        stall_ != nullptr && stall_->interval > absl::ZeroDuration();
    absl::Time next_note =
        notes ? record().start + stall_->interval : absl::InfiniteFuture();
    std::unique_lock<std::mutex> lock(state_->mu);
    while (!state_->done) {
      // Bounded all the same when both are infinite: the worker fails the
      // operation once Gloo's own timeout (GlooOptions::timeout) passes.
      const absl::Time until = std::min(give_up, next_note);
      if (until == absl::InfiniteFuture()) {
        state_->cv.wait(lock, [this] { return state_->done; });
        break;
      }
      state_->cv.wait_for(lock,
                          absl::ToChronoNanoseconds(std::max(
                              until - absl::Now(), absl::ZeroDuration())),
                          [this] { return state_->done; });
      if (state_->done) break;
      const absl::Time now = absl::Now();
      if (now >= give_up) {
        return absl::DeadlineExceededError(
            absl::StrCat("gloo: ", record().DebugString(),
                         " did not complete "
                         "within ",
                         absl::FormatDuration(timeout)));
      }
      if (now >= next_note) {
        lock.unlock();  // the store round trips happen unlocked
        Note(now);
        next_note = absl::Now() + stall_->interval;
        lock.lock();
      }
    }
    MarkEnded();
    // The state may be freed on the worker thread: give the caller its own
    // copy of an error (base/unshared_status.h).
    absl::Status status = UnsharedStatus(state_->status);
    if (status.ok() || missing_.empty()) return status;
    return absl::Status(
        status.code(),
        absl::StrCat(status.message(), "; ", MissingPhrase(),
                     " had not reached ", record().fp.DebugString(),
                     " when this rank last looked (the stall note)"));
  }

 private:
  bool IsCollective() const {
    return record().fp.op != OpKind::kSend && record().fp.op != OpKind::kRecv;
  }
  std::string ReachedKey(int rank) const {
    return absl::StrCat(stall_->prefix, "/reached/", record().fp.seq, "/",
                        rank);
  }
  // "rank 1" or "ranks 1, 3".
  std::string MissingPhrase() const {
    return absl::StrCat(missing_.size() == 1 ? "rank " : "ranks ",
                        absl::StrJoin(missing_, ", "));
  }
  // One stall tick: report that this rank reached the collective, learn who
  // has not, and (rank 0) print the note. Store errors only make the note
  // vaguer; they never fail the operation.
  void Note(absl::Time now) {
    std::string progress;
    if (IsCollective() && stall_->store != nullptr) {
      if (!reported_) {
        reported_ = stall_->store->Set(ReachedKey(stall_->rank), "1").ok();
      }
      std::vector<int> missing;
      for (int r = 0; r < stall_->size; ++r) {
        if (r == stall_->rank) continue;
        absl::StatusOr<bool> here = stall_->store->Check({ReachedKey(r)});
        if (here.ok() && !*here) missing.push_back(r);
      }
      missing_ = std::move(missing);
      progress = missing_.empty()
                     ? std::string(
                           "every rank reached it; its data is "
                           "still moving")
                     : absl::StrCat("not yet reached by ", MissingPhrase(),
                                    " (ranks report when their own wait "
                                    "stalls)");
    } else {
      progress =
          "the peer has not matched it or its data is still moving (gloo "
          "cannot tell which)";
    }
    if (stall_->rank != 0) return;
    PrintStallNote(stall_->rank, record().fp.DebugString(),
                   now - record().start, progress,
                   record().start + stall_->timeout - now);
  }

  std::shared_ptr<OpState> state_;
  const std::shared_ptr<const StallPolicy> stall_;  // null: no notes
  bool reported_ = false;     // this rank's "reached" key is set
  std::vector<int> missing_;  // who had not reached it at the last note
};

}  // namespace tandem::comm::gloo_internal

#endif  // TANDEM_COMM_GLOO_GLOO_WORK_H_
