// Internal pieces of the gloo engine (comm/gloo only): the adapter that lets
// Gloo's rendezvous use our TCP store, and the Work of a queued operation.
#ifndef TANDEM_COMM_GLOO_GLOO_WORK_H_
#define TANDEM_COMM_GLOO_GLOO_WORK_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/unshared_status.h"
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

class GlooWork : public Work {
 public:
  GlooWork(WorkRecord record, std::shared_ptr<OpState> state)
      : Work(std::move(record)), state_(std::move(state)) {}

  bool IsCompleted() override {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->done) MarkEnded();
    return state_->done;
  }

  absl::Status Wait(absl::Duration timeout) override {
    std::unique_lock<std::mutex> lock(state_->mu);
    auto done = [this] { return state_->done; };
    if (timeout == absl::InfiniteDuration()) {
      // Bounded all the same: the worker fails the operation once Gloo's
      // own timeout (GlooOptions::timeout) passes.
      state_->cv.wait(lock, done);
    } else if (!state_->cv.wait_for(lock,
                                    absl::ToChronoNanoseconds(std::max(
                                        timeout, absl::ZeroDuration())),
                                    done)) {
      return absl::DeadlineExceededError(
          absl::StrCat("gloo: ", record().DebugString(),
                       " did not complete "
                       "within ",
                       absl::FormatDuration(timeout)));
    }
    MarkEnded();
    // The state may be freed on the worker thread: give the caller its own
    // copy of an error (base/unshared_status.h).
    return UnsharedStatus(state_->status);
  }

 private:
  std::shared_ptr<OpState> state_;
};

}  // namespace tandem::comm::gloo_internal

#endif  // TANDEM_COMM_GLOO_GLOO_WORK_H_
