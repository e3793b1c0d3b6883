#include "comm/nccl/abort_signal.h"

#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem::comm {

bool AbortSignal::Raise(int rank, const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (raised_.load(std::memory_order_relaxed)) return false;
  cause_ = absl::AbortedError(absl::StrCat(
      "rank ", rank, " failed: ",
      status.ok()
          ? absl::Status(absl::StatusCode::kUnknown, "raised without an error")
                .ToString()
          : status.ToString()));
  raised_.store(true, std::memory_order_release);
  return true;
}

absl::Status AbortSignal::cause() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cause_;
}

}  // namespace tandem::comm
