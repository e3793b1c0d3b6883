#include "sim/rank_thread.h"

#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace tandem::sim::internal {

struct RankThread::State {
  std::function<void()> fn;
  pthread_t thread{};
  bool joined = false;
};

namespace {

void* Trampoline(void* arg) {
  // The State outlives the thread: the owner joins before freeing it.
  static_cast<std::function<void()>*>(arg)->operator()();
  return nullptr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RankThread>> RankThread::Start(
    std::function<void()> fn, int64_t stack_bytes) {
  if (stack_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sim: a rank's stack size must be >= 0 (0: the system default); "
        "found ",
        stack_bytes));
  }
  auto state = std::make_unique<State>();
  state->fn = std::move(fn);
  pthread_attr_t attr;
  if (int err = pthread_attr_init(&attr); err != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("sim: pthread_attr_init failed: ", std::strerror(err)));
  }
  int err = 0;
  if (stack_bytes > 0) {
    const int64_t page =
        sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
    const int64_t rounded = (stack_bytes + page - 1) / page * page;
    err = pthread_attr_setstacksize(&attr, static_cast<size_t>(rounded));
    if (err != 0) {
      pthread_attr_destroy(&attr);
      return absl::InvalidArgumentError(absl::StrCat(
          "sim: cannot give a rank a stack of ", stack_bytes,
          " bytes (pthread_attr_setstacksize: ", std::strerror(err),
          "); raise --sim_stack_kib in the examples, "
          "sim::Options::stack_bytes"));
    }
  }
  err = pthread_create(&state->thread, &attr, &Trampoline, &state->fn);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    // glibc puts static thread-local storage on the stack: a stack smaller
    // than that fails with EINVAL.
    return (err == EINVAL ? absl::InvalidArgumentError
                          : absl::ResourceExhaustedError)(absl::StrCat(
        "sim: could not start a rank thread with a ",
        stack_bytes == 0 ? std::string("default-sized")
                         : absl::StrCat(stack_bytes, "-byte"),
        " stack: ", std::strerror(err),
        err == EINVAL ? " (too small for this program's thread-local "
                        "storage: raise --sim_stack_kib in the examples, "
                        "sim::Options::stack_bytes)"
                      : " (too many threads or too little memory: use fewer "
                        "ranks)"));
  }
  return std::unique_ptr<RankThread>(new RankThread(std::move(state)));
}

RankThread::RankThread(std::unique_ptr<State> state)
    : state_(std::move(state)) {}

RankThread::~RankThread() { Join(); }

void RankThread::Join() {
  if (state_ == nullptr || state_->joined) return;
  pthread_join(state_->thread, nullptr);
  state_->joined = true;
}

}  // namespace tandem::sim::internal
