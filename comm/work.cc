#include "comm/work.h"

#include <memory>
#include <utility>

namespace tandem::comm {
namespace {

class CompletedWork : public Work {
 public:
  explicit CompletedWork(absl::Status status) : status_(std::move(status)) {}
  bool IsCompleted() override { return true; }
  absl::Status Wait(absl::Duration) override { return status_; }

 private:
  const absl::Status status_;
};

}  // namespace

std::unique_ptr<Work> MakeCompletedWork(absl::Status status) {
  return std::make_unique<CompletedWork>(std::move(status));
}

}  // namespace tandem::comm
